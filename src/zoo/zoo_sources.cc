#include "zoo/zoo_sources.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

bool IsIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsModuleFile(std::string_view file) {
  return HasSuffix(file, ".cc") || HasSuffix(file, ".py");
}

// Every directory and the stem of "a/b/c.cc" (or .py) are identifiers.
bool IsModulePath(std::string_view relative_path) {
  std::string_view rest = relative_path.substr(0, relative_path.size() - 3);  // drop ".cc"
  while (true) {
    size_t slash = rest.find('/');
    if (!IsIdentifier(rest.substr(0, slash))) return false;
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

std::vector<std::string> FilesEndingIn(const std::vector<std::string>& files,
                                       std::string_view suffix) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    if (HasSuffix(f, suffix)) out.push_back(f);
  }
  return out;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256& Sha256::Update(std::string_view data) {
  EVP_DigestUpdate(ctx_, data.data(), data.size());
  return *this;
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx_, digest, &size);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string SourceModule(std::string_view relative_path) {
  std::string module(relative_path.substr(0, relative_path.rfind('.')));
  std::replace(module.begin(), module.end(), '/', '.');
  return module;
}

std::vector<std::string> ZooSources::CompiledFiles() const { return FilesEndingIn(files, ".cc"); }

std::vector<std::string> ZooSources::PythonFiles() const { return FilesEndingIn(files, ".py"); }

std::vector<std::string> ZooSources::HeaderFiles() const { return FilesEndingIn(files, ".h"); }

StatusOr<ZooSources> ScanZooSources(const std::string& zoo_dir) {
  std::error_code ec;
  if (!fs::is_directory(zoo_dir, ec)) {
    return absl::InvalidArgumentError(StrCat("model zoo ", zoo_dir, " is not a directory"));
  }
  ZooSources sources;
  sources.dir = fs::absolute(zoo_dir).lexically_normal().string();
  if (HasSuffix(sources.dir, "/") && sources.dir.size() > 1) sources.dir.pop_back();

  fs::recursive_directory_iterator it(sources.dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!(HasSuffix(name, ".cc") || HasSuffix(name, ".h") || HasSuffix(name, ".py"))) continue;
    // A link is followed (its file's contents are taken) but named by its
    // own path in the zoo, wherever it points; one that cannot be followed
    // (a loop) is an error naming it, one to nothing is no file.
    std::error_code status_ec;
    if (!it->is_regular_file(status_ec)) {
      if (status_ec && status_ec != std::errc::no_such_file_or_directory &&
          status_ec != std::errc::not_a_directory) {
        return absl::InvalidArgumentError(StrCat("model zoo file ", it->path().string(),
                                                 " cannot be read: ", status_ec.message()));
      }
      continue;
    }
    sources.files.push_back(it->path().lexically_relative(sources.dir).string());
  }
  if (ec) {
    return absl::DataLossError(StrCat("cannot list model zoo ", sources.dir, ": ", ec.message()));
  }
  std::sort(sources.files.begin(), sources.files.end());

  if (sources.CompiledFiles().empty() && sources.PythonFiles().empty()) {
    return absl::InvalidArgumentError(
        StrCat("model zoo ", sources.dir, " has no model files (.cc or .py)"));
  }
  std::map<std::string, std::string> module_files;
  Sha256 hash, compiled, python;
  bool any_compiled = false, any_python = false;
  for (const std::string& file : sources.files) {
    if (IsModuleFile(file)) {
      if (!IsModulePath(file)) {
        return absl::InvalidArgumentError(
            StrCat("model zoo file ", file,
                   " cannot be named by a module path: its directories and name (without ",
                   file.substr(file.size() - 3), ") must be identifiers"));
      }
      auto [other, inserted] = module_files.emplace(SourceModule(file), file);
      if (!inserted) {
        return absl::InvalidArgumentError(StrCat("model zoo files ", other->second, " and ", file,
                                                 " define the same module ", other->first,
                                                 ": a module is one file; rename one of them"));
      }
    }
    EDL_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(sources.dir + "/" + file));
    // Length-prefixed, so no two different zoos hash the same bytes.
    const std::string header = StrCat(file.size(), ":", file, contents.size(), ":");
    hash.Update(header).Update(contents);
    const bool is_python = HasSuffix(file, ".py");
    (is_python ? python : compiled).Update(header).Update(contents);
    (is_python ? any_python : any_compiled) = true;
    sources.digests[file] = Sha256().Update(contents).HexDigest();
  }
  if (any_compiled) sources.compiled_identity = "sha256:" + compiled.HexDigest();
  if (any_python) sources.python_identity = "sha256:" + python.HexDigest();
  sources.identity = "sha256:" + hash.HexDigest();
  return sources;
}

}  // namespace elasticdl
