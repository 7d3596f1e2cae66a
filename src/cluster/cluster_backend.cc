#include "cluster/cluster_backend.h"

#include <cassert>
#include <charconv>

#include "common/strings.h"

namespace elasticdl::cluster {

std::optional<ProcessName> ProcessName::Parse(std::string_view label) {
  if (label == "master") return Master();
  Role role;
  if (label.substr(0, 3) == "ps-") {
    role = Role::kPs;
    label.remove_prefix(3);
  } else if (label.substr(0, 7) == "worker-") {
    role = Role::kWorker;
    label.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  int32_t index = 0;
  auto [end, ec] = std::from_chars(label.data(), label.data() + label.size(), index);
  if (ec != std::errc() || end != label.data() + label.size() || label.empty() || index < 0) {
    return std::nullopt;
  }
  return ProcessName(role, index);
}

PsId ProcessName::ps() const {
  assert(role_ == Role::kPs);
  return PsId(index_);
}

WorkerId ProcessName::worker() const {
  assert(role_ == Role::kWorker);
  return WorkerId(index_);
}

std::string ProcessName::label() const {
  switch (role_) {
    case Role::kMaster:
      return "master";
    case Role::kPs:
      return StrCat("ps-", index_);
    case Role::kWorker:
      break;
  }
  return StrCat("worker-", index_);
}

std::string ClusterBackend::Describe(const ProcessHandle& handle) const {
  if (!handle.backend_id.empty()) return handle.backend_id;
  return StrCat("pid ", handle.pid);
}

}  // namespace elasticdl::cluster
