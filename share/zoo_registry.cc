// Compiled into every model-zoo library (the zoo build adds it, from
// <prefix>/share/elasticdl/zoo_registry.cc): the library's own registry,
// which its ELASTICDL_REGISTER lines fill when it is loaded, and the one
// symbol the loader looks up.
#include "elasticdl/zoo/registry.h"

namespace elasticdl::zoo_internal {

ZooRegistry& LocalRegistry() {
  // Function-local: registrations from static initializers of any source
  // file of the library find it constructed.
  static ZooRegistry registry;
  return registry;
}

}  // namespace elasticdl::zoo_internal

extern "C" __attribute__((visibility("default"))) const elasticdl::ZooRegistry*
elasticdl_zoo_registry_v1(int* abi_version) {
  *abi_version = elasticdl::kZooAbiVersion;
  return &elasticdl::zoo_internal::LocalRegistry();
}
