#include "zoo/zoo_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/strings.h"

namespace elasticdl {
namespace {

// "a model", "an optimizer", ...
std::string WithArticle(EntryKind kind) {
  const char* name = EntryKindName(kind);
  return StrCat(std::string_view("aeio").find(name[0]) != std::string_view::npos ? "an " : "a ",
                name);
}

}  // namespace

std::string ModuleFile(std::string_view module) {
  std::string file(module);
  std::replace(file.begin(), file.end(), '.', '/');
  return file + ".cc";
}

StatusOr<EntryRef> ParseModelDef(std::string_view model_def) {
  const size_t dot = model_def.rfind('.');
  bool ok = dot != std::string_view::npos;
  for (size_t start = 0; ok;) {  // every dotted part is non-empty
    size_t end = std::min(model_def.find('.', start), model_def.size());
    ok = end > start;
    if (end == model_def.size()) break;
    start = end + 1;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        StrCat("'", model_def,
               "' does not name a zoo entry: expected module.entry, such as "
               "mnist.mnist_functional_api.custom_model for the entry custom_model of "
               "mnist/mnist_functional_api.cc"));
  }
  EntryRef ref;
  ref.module = std::string(model_def.substr(0, dot));
  ref.name = std::string(model_def.substr(dot + 1));
  ref.file = ModuleFile(ref.module);
  return ref;
}

StatusOr<EntryRef> ResolveEntry(std::string_view flag_value, std::string_view model_module) {
  if (flag_value.find('.') != std::string_view::npos) return ParseModelDef(flag_value);
  if (flag_value.empty()) return absl::InvalidArgumentError("empty zoo entry name");
  EntryRef ref;
  ref.module = std::string(model_module);
  ref.name = std::string(flag_value);
  ref.file = ModuleFile(ref.module);
  return ref;
}

StatusOr<std::shared_ptr<ZooLibrary>> ZooLibrary::Load(const std::string& path,
                                                       std::unique_ptr<ZooModules> modules,
                                                       std::vector<std::string> left_out) {
  if (path.empty()) {
    static const ZooRegistry kNoEntries;
    return std::shared_ptr<ZooLibrary>(new ZooLibrary("(no compiled files)", nullptr, &kNoEntries,
                                                      std::move(modules), std::move(left_out)));
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("cannot load model zoo library ", path, ": ", ::dlerror()));
  }
  using EntryPoint = const ZooRegistry* (*)(int*);
  auto entry_point = reinterpret_cast<EntryPoint>(::dlsym(handle, "elasticdl_zoo_registry_v1"));
  if (entry_point == nullptr) {
    ::dlclose(handle);
    return absl::InvalidArgumentError(
        StrCat(path, " is not a model zoo library: it lacks elasticdl_zoo_registry_v1"));
  }
  int abi_version = 0;
  const ZooRegistry* registry = entry_point(&abi_version);
  if (abi_version != kZooAbiVersion) {
    ::dlclose(handle);
    return absl::FailedPreconditionError(
        StrCat("model zoo library ", path, " was built for zoo ABI version ", abi_version,
               ", this ElasticDL has version ", kZooAbiVersion, "; rebuild the zoo"));
  }
  std::shared_ptr<ZooLibrary> library(
      new ZooLibrary(path, handle, registry, std::move(modules), std::move(left_out)));
  EDL_RETURN_IF_ERROR(library->CheckUniqueNames());
  return library;
}

StatusOr<std::shared_ptr<ZooLibrary>> ZooLibrary::FromRegistry(const ZooRegistry* registry,
                                                               std::string name) {
  std::shared_ptr<ZooLibrary> library(
      new ZooLibrary(std::move(name), nullptr, registry, nullptr, {}));
  EDL_RETURN_IF_ERROR(library->CheckUniqueNames());
  return library;
}

ZooLibrary::~ZooLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

Status ZooLibrary::CheckUniqueNames() const {
  std::set<std::pair<std::string, std::string>> seen;
  for (const ZooEntry& e : entries()) {
    if (!seen.emplace(e.module, e.name).second) {
      return absl::InvalidArgumentError(StrCat(ModuleFile(e.module), " registers '", e.name,
                                               "' more than once (in ", path_, ")"));
    }
  }
  return Status();
}

std::vector<std::string> ZooLibrary::Files() const {
  std::set<std::string> files;
  for (const ZooEntry& e : entries()) files.insert(ModuleFile(e.module));
  files.insert(left_out_.begin(), left_out_.end());
  if (modules_ != nullptr) {
    for (std::string& f : modules_->Files()) files.insert(std::move(f));
  }
  return {files.begin(), files.end()};
}

std::string ZooLibrary::FileOf(const std::string& module) const {
  if (modules_ != nullptr && ModuleEntries(module).empty()) {
    std::string file = modules_->FileOf(module);
    if (!file.empty()) return file;
  }
  return ModuleFile(module);
}

StatusOr<const ZooEntry*> ZooLibrary::Find(const std::string& module, const std::string& name,
                                           EntryKind kind) const {
  return Find(module, name, {kind});
}

std::vector<const ZooEntry*> ZooLibrary::ModuleEntries(const std::string& module) const {
  std::vector<const ZooEntry*> in_module;
  for (const ZooEntry& e : entries()) {
    if (e.module == module) in_module.push_back(&e);
  }
  return in_module;
}

StatusOr<const ZooEntry*> ZooLibrary::Find(const std::string& module, const std::string& name,
                                           std::initializer_list<EntryKind> kinds) const {
  const std::string file = ModuleFile(module);
  std::vector<const ZooEntry*> in_module = ModuleEntries(module);
  if (in_module.empty() && modules_ != nullptr && !modules_->FileOf(module).empty()) {
    return modules_->Find(module, name, kinds);
  }
  if (in_module.empty()) {
    const std::string files =
        modules_ == nullptr ? file : StrCat(file, " or ", file.substr(0, file.size() - 3), ".py");
    return absl::NotFoundError(fmt::format("model zoo has no file {} (module {}); files: {}", files,
                                           module, fmt::join(Files(), ", ")));
  }
  for (const ZooEntry* e : in_module) {
    if (e->name != name) continue;
    if (std::find(kinds.begin(), kinds.end(), e->kind) == kinds.end()) {
      return absl::InvalidArgumentError(StrCat(file, ": '", name, "' is ", WithArticle(e->kind),
                                               ", not ", WithArticle(*kinds.begin())));
    }
    return e;
  }
  std::vector<std::string> names;
  for (const ZooEntry* e : in_module)
    names.push_back(StrCat(e->name, " (", EntryKindName(e->kind), ")"));
  std::sort(names.begin(), names.end());
  return absl::NotFoundError(
      fmt::format("{} has no entry '{}'; entries: {}", file, name, fmt::join(names, ", ")));
}

}  // namespace elasticdl
