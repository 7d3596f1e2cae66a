// The sources of a model-zoo directory: which files it has, the module each
// .cc or .py file defines, and the zoo's identity (a hash of its sources).
#ifndef ELASTICDL_ZOO_ZOO_SOURCES_H_
#define ELASTICDL_ZOO_ZOO_SOURCES_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace elasticdl {

struct ZooSources {
  // The zoo directory, absolute.
  std::string dir;
  // Every .cc, .h and .py file under `dir` (recursively, skipping hidden
  // files and directories), relative to it, sorted.
  std::vector<std::string> files;
  // "sha256:<hex>" of the relative paths and contents of `files`: equal for
  // equal sources wherever the zoo lies. What a trained model records.
  std::string identity;
  // The same over the .cc and .h files only (what the zoo library is built
  // from), and over the .py files only (what the Python modules are); empty
  // when there are none.
  std::string compiled_identity;
  std::string python_identity;
  // The SHA-256 (hex) of each file's contents, by its entry in `files`.
  std::map<std::string, std::string> digests;

  // The .cc files of `files`: what the zoo library compiles.
  std::vector<std::string> CompiledFiles() const;
  // The .py files of `files`: the zoo's Python modules.
  std::vector<std::string> PythonFiles() const;
  // The .h files of `files`: what any compiled file may include.
  std::vector<std::string> HeaderFiles() const;
};

// Scans `zoo_dir`. INVALID_ARGUMENT if it is not a directory, has neither a
// .cc nor a .py file, has a .cc or .py file that no module path can name
// (every directory and the file's stem must be an identifier), or a .cc and
// a .py file of the same module; DATA_LOSS if a file cannot be read.
StatusOr<ZooSources> ScanZooSources(const std::string& zoo_dir);

// The module a source file defines: "mnist/mnist_functional_api.cc" (or
// .py) is "mnist.mnist_functional_api".
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
