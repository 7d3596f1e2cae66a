// Compiling a model-zoo directory into a shared library against the
// ElasticDL CMake package, and keeping its Python files, with a cache keyed
// by the zoo's sources:
//
//   ZooBuildOptions options;
//   options.zoo_dir = "model_zoo";
//   options.modules = {"mnist.mnist_functional_api"};  // optional
//   EDL_ASSIGN_OR_RETURN(BuiltZoo zoo, BuildZoo(options));
//   EDL_ASSIGN_OR_RETURN(auto library, python::OpenZoo(zoo.library_path, zoo.python_dir));
//
// Each .cc file is compiled with ELASTICDL_ZOO_MODULE set to its module
// ("mnist.mnist_functional_api" for mnist/mnist_functional_api.cc) into an
// object of its own, cached by the file's path and contents, the zoo's
// headers, the build type and the package: after an edit only the edited
// file compiles again, and the library is linked from the objects with the
// package's zoo_registry.cc. The build runs `cmake` (from PATH) in a child
// process. The .py files are copied as they are: they are imported where
// the job runs.
#ifndef ELASTICDL_ZOO_ZOO_BUILDER_H_
#define ELASTICDL_ZOO_ZOO_BUILDER_H_

#include <string>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

struct ZooBuildOptions {
  // The model zoo directory. Required.
  std::string zoo_dir;
  // Where built zoos are kept, under zoo/<key>/. Required (the user's is
  // Environment::cache_dir).
  std::string cache_dir;
  // The ElasticDL CMake package (the directory of ElasticDLConfig.cmake).
  // Empty: DefaultPackageDir().
  std::string package_dir;
  // CMAKE_BUILD_TYPE of the zoo. Part of the cache key. Default Release.
  std::string build_type = "Release";
  // Parallel compile jobs; 0: one per CPU.
  int jobs = 0;
  // The modules the library is for (ZooProgramNames::Modules()): it then
  // holds their compiled files only, as a Python program imports only the
  // modules it names (a module of no file adds none: looking it up says
  // so). Every compiled file when empty, and when the files do not link by
  // themselves (one calls code of a file outside them: the cache remembers,
  // and the next build takes every file at once).
  std::vector<std::string> modules;
};

struct BuiltZoo {
  // The zoo library, in the cache; load it with ZooLibrary::Load. Empty
  // when the zoo has no .cc file, or the modules asked for are Python files.
  std::string library_path;
  // The zoo's .py files (and only those), in the cache, under their paths
  // in the zoo: the root its Python modules are imported from. Empty when
  // the zoo has none.
  std::string python_dir;
  // "sha256:<hex>" of the zoo's sources (see ZooSources): what a trained
  // model records as the zoo it came from.
  std::string identity;
  // The zoo's .cc, .h and .py files, relative to its directory.
  std::vector<std::string> sources;
  // The .cc files the library holds: every compiled file, or those of
  // ZooBuildOptions::modules.
  std::vector<std::string> compiled;
  // The zoo's other .cc files; ZooLibrary::Load names them among the files
  // there are when a module is missing.
  std::vector<std::string> left_out;
  // How many of `compiled` this call compiled (the others' objects were
  // cached).
  int objects_compiled = 0;
  // True when nothing had to be compiled or copied: all came from the cache.
  bool cached = false;
};

// Returns the cached library for the zoo's compiled sources (or those of
// `modules`), this ElasticDL package (its headers and libraries, by size and
// time) and build type, or builds it from cached objects and the files whose
// objects are not cached; and the cached copy of its Python files, or makes
// it. A zoo without .cc files (or `modules` that are all Python files) needs
// no package and compiles nothing. Concurrent
// builders of the same zoo, in any process, wait for one another (a lock
// file) and publish atomically, so none sees a partial library or copy.
// Errors: a bad zoo directory (see ScanZooSources); a missing package
// (FAILED_PRECONDITION); sources that fail to compile (INVALID_ARGUMENT
// "model zoo DIR failed to compile:" followed by the compiler's error lines
// and the path of the full log).
StatusOr<BuiltZoo> BuildZoo(const ZooBuildOptions& options);

// <directory of the running binary>/../lib/cmake/ElasticDL: where the
// package lies both in the build tree (bin/ beside lib/) and installed.
std::string DefaultPackageDir();

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_BUILDER_H_
