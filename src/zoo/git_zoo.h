// Model zoos given as Git URLs (seed 003: `model_zoo="https://git.company.com/models"`):
//
//   EDL_ASSIGN_OR_RETURN(GitZooUrl url, ParseGitZooUrl("https://host/models.git#v1"));
//   EDL_ASSIGN_OR_RETURN(FetchedGitZoo zoo, FetchGitZoo(url, cache_dir));
//   // zoo.dir: the checked-out sources of zoo.commit, to build like any zoo.
//
// Fetched with libgit2 into a cache keyed by commit, <cache_dir>/git/<commit>/
// (the sources without the .git metadata). A fetch works in a temporary
// directory beside it and publishes with rename(): a reader sees no entry or a
// whole one, concurrent fetchers of one commit (in any process) agree, and a
// failed fetch leaves nothing behind (a killed one's work directory goes with
// a later fetch, once an hour old). No LibTorch.
#ifndef ELASTICDL_ZOO_GIT_ZOO_H_
#define ELASTICDL_ZOO_GIT_ZOO_H_

#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl {

// Whether `model_zoo` is a URL ("scheme://...") rather than a directory.
bool IsZooUrl(std::string_view model_zoo);

struct GitZooUrl {
  // The repository, without the #ref.
  std::string url;
  // A branch, a tag, a full refname or a commit id (full or abbreviated).
  // Empty: the remote's HEAD.
  std::string ref;
};

// Splits "URL#ref". INVALID_ARGUMENT for a scheme other than http, https,
// git and file, or an empty ref after '#'.
StatusOr<GitZooUrl> ParseGitZooUrl(std::string_view model_zoo);

struct FetchedGitZoo {
  // <cache_dir>/git/<commit>: the checked-out sources.
  std::string dir;
  // The commit's 40-hex id.
  std::string commit;
  // True when the cache had the commit and the server was not contacted
  // (only for a ref that is a full commit id).
  bool cached = false;
};

// The sources of `url` at its ref, from the cache or the server. A branch or
// tag is always resolved on the server; a commit already fetched is then not
// downloaded again. Errors (messages name the URL): the server cannot be
// reached or refuses (UNAVAILABLE, with libgit2's message); the ref is not
// on the server (NOT_FOUND, listing some of its branches and tags); the
// commit holds no .cc or .py file (INVALID_ARGUMENT); the cache cannot be written.
StatusOr<FetchedGitZoo> FetchGitZoo(const GitZooUrl& url, const std::string& cache_dir);

// The cache entry of `commit` (40 hex): <cache_dir>/git/<commit>.
std::string GitZooCacheEntry(const std::string& cache_dir, std::string_view commit);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_GIT_ZOO_H_
