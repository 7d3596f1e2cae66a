#include "rpc/parameter_servers.h"

#include "common/strings.h"

namespace elasticdl::rpc {

Status ParameterServers::CopyHeld(const HeldBytes& held, proto::PushRequest* request) {
  const size_t tensors = static_cast<size_t>(request->gradients_size()) +
                         static_cast<size_t>(request->buffer_updates_size());
  if (held.size() != tensors) {
    return absl::InvalidArgumentError(
        StrCat(held.size(), " views of held bytes for a push of ", tensors, " tensors"));
  }
  size_t k = 0;
  for (auto* field : {request->mutable_gradients(), request->mutable_buffer_updates()}) {
    for (proto::Tensor& t : *field) {
      const std::string_view bytes = held[k++];
      if (!bytes.empty()) t.mutable_content()->assign(bytes.data(), bytes.size());
    }
  }
  return absl::OkStatus();
}

Status ParameterServers::PushFrom(std::vector<proto::PushRequest>* requests,
                                  std::vector<proto::PushResponse>* responses,
                                  const std::vector<int>& shards,
                                  const std::vector<HeldBytes>& held, const ValuesSink& sink) {
  std::vector<int> targets = shards;
  if (targets.empty()) {
    for (int i = 0; i < num_shards(); ++i) targets.push_back(i);
  }
  for (int i : targets) {
    const auto u = static_cast<size_t>(i);
    if (u < held.size()) EDL_RETURN_IF_ERROR(CopyHeld(held[u], &(*requests)[u]));
  }
  EDL_RETURN_IF_ERROR(Push(requests, responses, shards));
  for (int i : targets) {
    const proto::PushResponse& response = (*responses)[static_cast<size_t>(i)];
    if (sink && response.has_values()) EDL_RETURN_IF_ERROR(sink(i, response.values(), {}));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::rpc
