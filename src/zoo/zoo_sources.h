// The sources of a model-zoo directory: which files it has, the module each
// .cc file defines, and the zoo's identity (a hash of its sources).
#ifndef ELASTICDL_ZOO_ZOO_SOURCES_H_
#define ELASTICDL_ZOO_ZOO_SOURCES_H_

#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace elasticdl {

struct ZooSources {
  // The zoo directory, absolute.
  std::string dir;
  // Every .cc and .h file under `dir` (recursively, skipping hidden files and
  // directories), relative to it, sorted.
  std::vector<std::string> files;
  // "sha256:<hex>" of the relative paths and contents of `files`: equal for
  // equal sources wherever the zoo lies.
  std::string identity;

  // The .cc files of `files`: what the zoo library compiles.
  std::vector<std::string> CompiledFiles() const;
};

// Scans `zoo_dir`. INVALID_ARGUMENT if it is not a directory, has no .cc
// file, or has a .cc file that no module path can name (every directory and
// the file's stem must be an identifier); DATA_LOSS if a file cannot be read.
StatusOr<ZooSources> ScanZooSources(const std::string& zoo_dir);

// The module a source file defines: "mnist/mnist_functional_api.cc" is
// "mnist.mnist_functional_api".
std::string SourceModule(std::string_view relative_path);

// Incremental SHA-256 (OpenSSL).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& Update(std::string_view data);
  // Lowercase hex of the digest; the object is then spent.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_SOURCES_H_
