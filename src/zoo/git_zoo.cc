#include "zoo/git_zoo.h"

#include <git2.h>
#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/file.h"
#include "common/strings.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

// libgit2's process state, alive while an owner is: git_libgit2_init() and
// git_libgit2_shutdown() count, so owners may nest and overlap in threads.
class GitLibrary {
 public:
  GitLibrary() { git_libgit2_init(); }
  ~GitLibrary() { git_libgit2_shutdown(); }
  GitLibrary(const GitLibrary&) = delete;
  GitLibrary& operator=(const GitLibrary&) = delete;
};

template <typename T, void (*Free)(T*)>
struct GitFree {
  void operator()(T* p) const { Free(p); }
};
using Repository = std::unique_ptr<git_repository, GitFree<git_repository, git_repository_free>>;
using Remote = std::unique_ptr<git_remote, GitFree<git_remote, git_remote_free>>;
using Object = std::unique_ptr<git_object, GitFree<git_object, git_object_free>>;
using Commit = std::unique_ptr<git_commit, GitFree<git_commit, git_commit_free>>;
using Tree = std::unique_ptr<git_tree, GitFree<git_tree, git_tree_free>>;

// libgit2's message for the last failed call.
std::string GitMessage() {
  const git_error* e = git_error_last();
  return e != nullptr && e->message != nullptr ? e->message : "unknown libgit2 error";
}

std::string OidHex(const git_oid& oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof(hex), &oid);
  return hex;
}

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  }
  return true;
}

bool IsFullCommitId(std::string_view ref) { return ref.size() == GIT_OID_HEXSZ && IsHex(ref); }

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// A temporary directory removed with everything in it when this goes away
// (unless it was renamed away first).
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What the remote advertises: its refs, peeled tags included ("refs/tags/v1^{}").
struct Advertised {
  std::vector<std::pair<std::string, git_oid>> refs;

  const git_oid* Find(const std::string& name) const {
    for (const auto& [n, oid] : refs) {
      if (n == name) return &oid;
    }
    return nullptr;
  }

  // The commit `ref` names among the refs (a tag peeled), and the refname;
  // nullopt if it names none.
  std::optional<std::pair<std::string, git_oid>> Resolve(const std::string& ref) const {
    const std::vector<std::string> names =
        ref.empty() ? std::vector<std::string>{"HEAD"}
                    : std::vector<std::string>{ref, "refs/heads/" + ref, "refs/tags/" + ref};
    for (const std::string& name : names) {
      if (const git_oid* oid = Find(name); oid != nullptr) {
        const git_oid* peeled = Find(name + "^{}");
        return std::make_pair(name, peeled != nullptr ? *peeled : *oid);
      }
    }
    return std::nullopt;
  }

  // "branches: main, dev; tags: v1" (at most a few of each).
  std::string Summary() const {
    constexpr size_t kMax = 8;
    std::string out;
    for (const auto& [prefix, what] :
         {std::pair<std::string, std::string>{"refs/heads/", "branches"}, {"refs/tags/", "tags"}}) {
      std::vector<std::string> names;
      for (const auto& [n, oid] : refs) {
        if (n.rfind(prefix, 0) == 0 && !HasSuffix(n, "^{}"))
          names.push_back(n.substr(prefix.size()));
      }
      if (names.empty()) continue;
      if (!out.empty()) out += "; ";
      out += what + ": ";
      for (size_t i = 0; i < names.size() && i < kMax; ++i) out += (i ? ", " : "") + names[i];
      if (names.size() > kMax) out += StrCat(" and ", names.size() - kMax, " more");
    }
    return out.empty() ? "it has no branches or tags" : out;
  }
};

// Whether `dir` holds a model file, .cc or .py (outside hidden directories).
bool HasModelFile(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      std::error_code status_ec;
      if (it->is_directory(status_ec)) it.disable_recursion_pending();
      continue;
    }
    const std::string extension = it->path().extension().string();
    std::error_code status_ec;
    if ((extension == ".cc" || extension == ".py") && it->is_regular_file(status_ec)) return true;
  }
  return false;
}

// Removes what fetchers that died (killed mid-fetch) left in `git_dir`:
// work directories untouched for an hour.
void RemoveAbandonedFetches(const std::string& git_dir) {
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (auto it = fs::directory_iterator(git_dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    if (it->path().filename().string().rfind(".fetch-", 0) != 0) continue;
    std::error_code stat_error;
    if (it->last_write_time(stat_error) < cutoff && !stat_error)
      fs::remove_all(it->path(), stat_error);
  }
}

class Fetcher {
 public:
  Fetcher(const GitZooUrl& url, std::string cache_git)
      : url_(url), git_dir_(std::move(cache_git)) {}

  StatusOr<FetchedGitZoo> Fetch() {
    EDL_RETURN_IF_ERROR(CreateDirectories(git_dir_));
    RemoveAbandonedFetches(git_dir_);
    std::string tmp_path = git_dir_ + "/.fetch-XXXXXX";
    if (::mkdtemp(tmp_path.data()) == nullptr) {
      return absl::InternalError(StrCat("cannot create ", tmp_path, ": ", std::strerror(errno)));
    }
    TempDir tmp(tmp_path);  // outlives the repository handles below
    EDL_ASSIGN_OR_RETURN(std::string commit, FetchInto(tmp.path()));
    const std::string entry = git_dir_ + "/" + commit;
    if (fetched_) {
      std::error_code ec;
      fs::remove_all(tmp.path() + "/.git", ec);
      if (!HasModelFile(tmp.path())) {
        return absl::InvalidArgumentError(
            StrCat(url_.url, " at ", commit, " holds no .cc or .py file: it is not a model zoo"));
      }
      // Another fetcher of the commit may have published first: theirs is
      // the same tree, so keep it.
      if (::rename(tmp.path().c_str(), entry.c_str()) != 0 && !IsDirectory(entry)) {
        return absl::InternalError(StrCat("cannot publish ", entry, ": ", std::strerror(errno)));
      }
    }
    FetchedGitZoo zoo;
    zoo.dir = entry;
    zoo.commit = commit;
    return zoo;
  }

 private:
  Status GitError(absl::StatusCode code, std::string_view what) const {
    return Status(code, StrCat(url_.url, ": ", what, ": ", GitMessage()));
  }

  // Resolves the ref on the server and, unless the cache has the commit,
  // checks it out in `work`. Returns the commit.
  StatusOr<std::string> FetchInto(const std::string& work) {
    git_repository* raw_repo = nullptr;
    if (git_repository_init(&raw_repo, work.c_str(), 0) != 0) {
      return GitError(absl::StatusCode::kInternal, "cannot create a repository");
    }
    Repository repo(raw_repo);
    git_remote* raw_remote = nullptr;
    if (git_remote_create_anonymous(&raw_remote, repo.get(), url_.url.c_str()) != 0) {
      return GitError(absl::StatusCode::kInvalidArgument, "not a Git URL");
    }
    Remote remote(raw_remote);
    if (git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, nullptr, nullptr, nullptr) != 0) {
      return GitError(absl::StatusCode::kUnavailable, "cannot connect to the repository");
    }
    Advertised advertised;
    const git_remote_head** heads = nullptr;
    size_t count = 0;
    if (git_remote_ls(&heads, &count, remote.get()) != 0) {
      return GitError(absl::StatusCode::kUnavailable, "cannot list the repository's refs");
    }
    for (size_t i = 0; i < count; ++i) advertised.refs.emplace_back(heads[i]->name, heads[i]->oid);

    std::optional<std::pair<std::string, git_oid>> named = advertised.Resolve(url_.ref);
    const bool by_id = !named && url_.ref.size() >= GIT_OID_MINPREFIXLEN &&
                       url_.ref.size() <= GIT_OID_HEXSZ && IsHex(url_.ref);
    if (!named && !by_id) {
      return absl::NotFoundError(
          url_.ref.empty()
              ? StrCat(url_.url, " has no HEAD: name a branch, tag or commit after '#' (",
                       advertised.Summary(), ")")
              : StrCat(url_.url, " has no branch, tag or commit '", url_.ref, "' (",
                       advertised.Summary(), ")"));
    }
    if (named && IsDirectory(git_dir_ + "/" + OidHex(named->second))) {
      return OidHex(named->second);
    }

    git_fetch_options fetch;
    git_fetch_options_init(&fetch, GIT_FETCH_OPTIONS_VERSION);
    fetch.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
    char heads_spec[] = "+refs/heads/*:refs/remotes/origin/*";
    char tags_spec[] = "+refs/tags/*:refs/tags/*";
    char* specs[] = {heads_spec, tags_spec};
    git_strarray refspecs = {specs, 2};
    if (git_remote_download(remote.get(), &refspecs, &fetch) != 0) {
      return GitError(absl::StatusCode::kUnavailable, "cannot fetch");
    }
    git_remote_disconnect(remote.get());

    git_object* raw_object = nullptr;
    if (named) {
      if (git_object_lookup(&raw_object, repo.get(), &named->second, GIT_OBJECT_ANY) != 0) {
        return GitError(absl::StatusCode::kNotFound, StrCat(named->first, " was not fetched"));
      }
    } else {
      git_oid prefix;
      if (git_oid_fromstrn(&prefix, url_.ref.data(), url_.ref.size()) != 0 ||
          git_object_lookup_prefix(&raw_object, repo.get(), &prefix, url_.ref.size(),
                                   GIT_OBJECT_ANY) != 0) {
        return absl::NotFoundError(StrCat(url_.url, " has no branch, tag or commit '", url_.ref,
                                          "' reachable from its refs (", GitMessage(), "; ",
                                          advertised.Summary(), ")"));
      }
    }
    Object object(raw_object);
    git_object* raw_peeled = nullptr;
    if (git_object_peel(&raw_peeled, object.get(), GIT_OBJECT_COMMIT) != 0) {
      return absl::InvalidArgumentError(
          StrCat(url_.url, ": '", url_.ref, "' is not a commit: ", GitMessage()));
    }
    Commit commit(reinterpret_cast<git_commit*>(raw_peeled));
    std::string id = OidHex(*git_commit_id(commit.get()));
    if (IsDirectory(git_dir_ + "/" + id)) return id;

    git_tree* raw_tree = nullptr;
    if (git_commit_tree(&raw_tree, commit.get()) != 0) {
      return GitError(absl::StatusCode::kDataLoss, StrCat("cannot read the tree of ", id));
    }
    Tree tree(raw_tree);
    git_checkout_options checkout;
    git_checkout_options_init(&checkout, GIT_CHECKOUT_OPTIONS_VERSION);
    checkout.checkout_strategy = GIT_CHECKOUT_FORCE;
    if (git_checkout_tree(repo.get(), reinterpret_cast<git_object*>(tree.get()), &checkout) != 0) {
      return GitError(absl::StatusCode::kInternal, StrCat("cannot check out ", id));
    }
    fetched_ = true;
    return id;
  }

  const GitZooUrl& url_;
  const std::string git_dir_;
  bool fetched_ = false;  // the work directory holds a checkout to publish
};

}  // namespace

bool IsZooUrl(std::string_view model_zoo) {
  const size_t colon = model_zoo.find("://");
  if (colon == std::string_view::npos || colon == 0) return false;
  for (char c : model_zoo.substr(0, colon)) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
          c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

StatusOr<GitZooUrl> ParseGitZooUrl(std::string_view model_zoo) {
  if (!IsZooUrl(model_zoo)) {
    return absl::InvalidArgumentError(StrCat(model_zoo, " is not a URL"));
  }
  const std::string_view scheme = model_zoo.substr(0, model_zoo.find("://"));
  if (scheme != "https" && scheme != "http" && scheme != "git" && scheme != "file") {
    return absl::InvalidArgumentError(StrCat("URL scheme '", scheme,
                                             "' is not supported for a Git model zoo (use "
                                             "https://, http://, git:// or file://)"));
  }
  GitZooUrl url;
  const size_t hash = model_zoo.find('#');
  url.url = std::string(model_zoo.substr(0, hash));
  if (hash != std::string_view::npos) {
    url.ref = std::string(model_zoo.substr(hash + 1));
    if (url.ref.empty()) {
      return absl::InvalidArgumentError(
          StrCat(model_zoo, ": nothing after '#': name a branch, a tag or a commit"));
    }
  }
  return url;
}

std::string GitZooCacheEntry(const std::string& cache_dir, std::string_view commit) {
  return StrCat(cache_dir, "/git/", commit);
}

StatusOr<FetchedGitZoo> FetchGitZoo(const GitZooUrl& url, const std::string& cache_dir) {
  // The sources found in the cache are compiled and run: the cache, git/
  // and the commit's directory must be this user's alone.
  EDL_RETURN_IF_ERROR(UsePrivateDirectories(cache_dir, "git"));
  if (IsFullCommitId(url.ref)) {
    FetchedGitZoo zoo;
    zoo.commit = absl::AsciiStrToLower(url.ref);
    zoo.dir = GitZooCacheEntry(cache_dir, zoo.commit);
    zoo.cached = true;
    if (IsDirectory(zoo.dir)) {
      EDL_RETURN_IF_ERROR(CheckPrivateDirectory(zoo.dir));
      return zoo;
    }
  }
  GitLibrary library;
  EDL_ASSIGN_OR_RETURN(FetchedGitZoo zoo, Fetcher(url, StrCat(cache_dir, "/git")).Fetch());
  EDL_RETURN_IF_ERROR(CheckPrivateDirectory(zoo.dir));
  return zoo;
}

}  // namespace elasticdl
