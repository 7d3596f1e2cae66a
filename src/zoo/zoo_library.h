// A loaded model zoo: the entries its compiled sources registered and those
// of its Python modules, looked up by the names of the command line
// (`--model_def=mnist.mnist_functional_api.custom_model`).
#ifndef ELASTICDL_ZOO_ZOO_LIBRARY_H_
#define ELASTICDL_ZOO_ZOO_LIBRARY_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"
#include "elasticdl/zoo/registry.h"

namespace elasticdl {

// An entry's name: module "mnist.mnist_functional_api" and name
// "custom_model", defined in file "mnist/mnist_functional_api.cc".
struct EntryRef {
  std::string module;
  std::string name;
  std::string file;
};

// "mnist/mnist_functional_api.cc" for module "mnist.mnist_functional_api":
// the file of a compiled module.
std::string ModuleFile(std::string_view module);

// Modules whose entries are found by name when first looked up, rather than
// registered when the zoo is loaded: a zoo's Python files
// (python/python_zoo.h). A Python function has no signature to tell its kind
// by, so an entry takes the kind its lookup asks for, and what it returns is
// checked when it is called. Thread-safe.
class ZooModules {
 public:
  virtual ~ZooModules() = default;
  // The file of `module` relative to the zoo ("mnist/mnist_functional_api.py"),
  // or "" when these modules have none of that name.
  virtual std::string FileOf(const std::string& module) const = 0;
  // Every module file, sorted.
  virtual std::vector<std::string> Files() const = 0;
  // `name` of `module` as an entry of one of `kinds`. Errors as
  // ZooLibrary::Find's, and INVALID_ARGUMENT when the module cannot be
  // imported (with the traceback). The entry lives as long as this object.
  virtual StatusOr<const ZooEntry*> Find(const std::string& module, const std::string& name,
                                         std::initializer_list<EntryKind> kinds) const = 0;
  // Where the first of `threads` (pthread_self() values) that runs the
  // modules' code is, for a call that does not return: the last frames of
  // its stack; "" for none, or when it cannot be told within `patience`.
  virtual std::string Where(const std::vector<uint64_t>& threads,
                            std::chrono::milliseconds patience) const = 0;
};

// Splits --model_def: everything before the last dot is the module. Fewer
// than two dotted parts, or an empty part, is INVALID_ARGUMENT.
StatusOr<EntryRef> ParseModelDef(std::string_view model_def);

// Resolves an entry flag such as --loss: a value without a dot names an
// entry of `model_module` (the module of --model_def); a dotted value is
// module.name, like --model_def.
StatusOr<EntryRef> ResolveEntry(std::string_view flag_value, std::string_view model_module);

// The entries of one zoo. A library loaded from a file stays loaded while
// any shared_ptr to it is alive; whatever holds code from it (a model, a
// dataset, a metric made by its entries) must hold one too (ZooProgram sees
// to that). Immutable after Load but for the modules' entries made on
// lookup: thread-safe.
class ZooLibrary {
 public:
  // dlopens a zoo library (RTLD_NOW | RTLD_LOCAL) and reads its registry;
  // `modules` (may be null) are the zoo's Python modules. An empty `path`
  // is a zoo without compiled files. INVALID_ARGUMENT if the library cannot
  // be loaded (with dlerror's reason), is not a zoo library, or registers a
  // name twice in one file; FAILED_PRECONDITION if it was built against
  // another zoo ABI version.
  // `left_out`: the zoo's compiled files the library does not hold (one
  // built for some modules, BuiltZoo::left_out), named among the files
  // there are.
  static StatusOr<std::shared_ptr<ZooLibrary>> Load(const std::string& path,
                                                    std::unique_ptr<ZooModules> modules = nullptr,
                                                    std::vector<std::string> left_out = {});

  // The entries of a registry linked into the process (tests, built-in
  // zoos); `name` stands for the path in messages. `registry` must outlive
  // the result.
  static StatusOr<std::shared_ptr<ZooLibrary>> FromRegistry(const ZooRegistry* registry,
                                                            std::string name);

  ~ZooLibrary();
  ZooLibrary(const ZooLibrary&) = delete;
  ZooLibrary& operator=(const ZooLibrary&) = delete;

  // The entry `name` of `module`, which must be of `kind`: registered by the
  // compiled module, or made from the Python module's `name`. NOT_FOUND
  // naming the files (or the file's entries) there are when the file or the
  // entry is missing; INVALID_ARGUMENT when the entry is of another kind.
  StatusOr<const ZooEntry*> Find(const std::string& module, const std::string& name,
                                 EntryKind kind) const;
  StatusOr<const ZooEntry*> Find(const EntryRef& ref, EntryKind kind) const {
    return Find(ref.module, ref.name, kind);
  }
  // The same, for an entry of any of `kinds` (the first names the kind in
  // messages).
  StatusOr<const ZooEntry*> Find(const std::string& module, const std::string& name,
                                 std::initializer_list<EntryKind> kinds) const;
  // The entries compiled module `module` registers, in registration order
  // (none for a Python module).
  std::vector<const ZooEntry*> ModuleEntries(const std::string& module) const;

  // The compiled modules' entries.
  const std::vector<ZooEntry>& entries() const { return registry_->entries(); }
  // The compiled files that registered entries, those left out of the
  // library and the Python module files, sorted.
  std::vector<std::string> Files() const;
  // The file of `module`: its .py file when it is a Python module, else
  // ModuleFile(module).
  std::string FileOf(const std::string& module) const;
  const std::string& path() const { return path_; }
  // ZooModules::Where of the Python modules; "" without them (a compiled
  // module's code cannot be looked into).
  std::string Where(const std::vector<uint64_t>& threads,
                    std::chrono::milliseconds patience) const {
    return modules_ != nullptr ? modules_->Where(threads, patience) : "";
  }

 private:
  ZooLibrary(std::string path, void* handle, const ZooRegistry* registry,
             std::unique_ptr<ZooModules> modules, std::vector<std::string> left_out)
      : path_(std::move(path)),
        handle_(handle),
        registry_(registry),
        left_out_(std::move(left_out)),
        modules_(std::move(modules)) {}
  Status CheckUniqueNames() const;

  std::string path_;
  void* handle_;  // from dlopen; null for FromRegistry and a zoo without one
  const ZooRegistry* registry_;
  std::vector<std::string> left_out_;
  // Declared after handle_: destroyed first.
  std::unique_ptr<ZooModules> modules_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_LIBRARY_H_
