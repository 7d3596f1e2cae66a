#include "cluster/cluster_backend.h"

#include "common/strings.h"

namespace elasticdl::cluster {

std::string RoleLabel(Role role, int id) {
  switch (role) {
    case Role::kMaster:
      return "master";
    case Role::kPs:
      return StrCat("ps-", id);
    case Role::kWorker:
      break;
  }
  return StrCat("worker-", id);
}

std::string ClusterBackend::Describe(const ProcessHandle& handle) const {
  if (!handle.backend_id.empty()) return handle.backend_id;
  return StrCat("pid ", handle.pid);
}

}  // namespace elasticdl::cluster
