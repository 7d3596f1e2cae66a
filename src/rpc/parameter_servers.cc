#include "rpc/parameter_servers.h"

#include "common/strings.h"

namespace elasticdl::rpc {
namespace {

size_t TensorsOf(const proto::PushRequest& request) {
  return static_cast<size_t>(request.gradients_size()) +
         static_cast<size_t>(request.buffer_updates_size());
}

}  // namespace

std::vector<int> ParameterServers::Targets(const std::vector<int>& shards) const {
  if (!shards.empty()) return shards;
  std::vector<int> all(static_cast<size_t>(num_shards()));
  for (int i = 0; i < num_shards(); ++i) all[static_cast<size_t>(i)] = i;
  return all;
}

Status ParameterServers::CheckHeld(const std::vector<HeldBytes>& held,
                                   const std::vector<proto::PushRequest>& requests,
                                   const std::vector<int>& shards) const {
  if (held.size() != requests.size()) {
    return absl::InvalidArgumentError(
        StrCat("held bytes for ", held.size(), " pushes; ", requests.size(), " requests"));
  }
  for (int i : Targets(shards)) {
    const auto u = static_cast<size_t>(i);
    if (u >= requests.size()) {
      return absl::InvalidArgumentError(StrCat("no request for shard ", i));
    }
    if (held[u].size() != TensorsOf(requests[u])) {
      return absl::InvalidArgumentError(StrCat(held[u].size(),
                                               " views of held bytes for the push to shard ", i,
                                               " of ", TensorsOf(requests[u]), " tensors"));
    }
  }
  return absl::OkStatus();
}

void ParameterServers::CopyHeld(const HeldBytes& held, proto::PushRequest* request) {
  size_t k = 0;
  for (auto* field : {request->mutable_gradients(), request->mutable_buffer_updates()}) {
    for (proto::Tensor& t : *field) {
      const std::string_view bytes = held[k++];
      if (!bytes.empty()) t.mutable_content()->assign(bytes.data(), bytes.size());
    }
  }
}

Status ParameterServers::PushFrom(std::vector<proto::PushRequest>* requests,
                                  std::vector<proto::PushResponse>* responses,
                                  const std::vector<int>& shards,
                                  const std::vector<HeldBytes>& held, const ValuesSink& sink) {
  EDL_RETURN_IF_ERROR(CheckHeld(held, *requests, shards));
  const std::vector<int> targets = Targets(shards);
  for (int i : targets) {
    CopyHeld(held[static_cast<size_t>(i)], &(*requests)[static_cast<size_t>(i)]);
  }
  EDL_RETURN_IF_ERROR(Push(requests, responses, shards));
  for (int i : targets) {
    const proto::PushResponse& response = (*responses)[static_cast<size_t>(i)];
    if (sink && response.has_values()) EDL_RETURN_IF_ERROR(sink(i, response.values(), {}));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::rpc
