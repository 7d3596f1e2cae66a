#include "worker/sharded_model.h"

#include "common/strings.h"
#include "rpc/placement.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::worker {

ShardedModel::ShardedModel(std::shared_ptr<Model> model, int num_shards)
    : model_(std::move(model)), num_shards_(std::max(num_shards, 1)) {
  for (const auto& item : model_->named_parameters()) {
    slots_.push_back({item.key(), item.value(), rpc::ShardOf(item.key(), num_shards_), false, {}});
  }
  for (const auto& item : model_->named_buffers()) {
    Slot s{item.key(), item.value(), rpc::ShardOf(item.key(), num_shards_), true, {}};
    s.pulled = s.tensor.detach().clone();
    slots_.push_back(std::move(s));
  }
}

ShardedModel::Slot* ShardedModel::Find(const std::string& name, bool is_buffer) {
  for (Slot& s : slots_) {
    if (s.name == name && s.is_buffer == is_buffer) return &s;
  }
  return nullptr;
}

StatusOr<proto::ModelValues> ShardedModel::Encode(int shard) const {
  proto::ModelValues values;
  for (const Slot& s : slots_) {
    if (s.shard != shard) continue;
    auto* out = s.is_buffer ? values.add_buffers() : values.add_parameters();
    EDL_RETURN_IF_ERROR(rpc::EncodeTensor(s.name, s.tensor, out));
  }
  return values;
}

StatusOr<proto::ModelValues> ShardedModel::EncodeAll() const {
  proto::ModelValues values;
  for (const Slot& s : slots_) {
    auto* out = s.is_buffer ? values.add_buffers() : values.add_parameters();
    EDL_RETURN_IF_ERROR(rpc::EncodeTensor(s.name, s.tensor, out));
  }
  return values;
}

Status ShardedModel::Apply(const proto::ModelValues& values) {
  torch::NoGradGuard no_grad;
  for (bool is_buffer : {false, true}) {
    const auto& tensors = is_buffer ? values.buffers() : values.parameters();
    for (const proto::Tensor& t : tensors) {
      Slot* slot = Find(t.name(), is_buffer);
      if (slot == nullptr) {
        return absl::InvalidArgumentError(StrCat(
            "the model has no ", is_buffer ? "buffer" : "parameter", " named '", t.name(), "'"));
      }
      EDL_RETURN_IF_ERROR(rpc::CopyInto(t, slot->tensor));
      if (is_buffer) slot->pulled.copy_(slot->tensor);
    }
  }
  return absl::OkStatus();
}

Status ShardedModel::FillPush(int shard, proto::PushRequest* request) const {
  for (const Slot& s : slots_) {
    if (s.shard != shard) continue;
    if (s.is_buffer) {
      EDL_RETURN_IF_ERROR(
          rpc::EncodeTensor(s.name, s.tensor - s.pulled, request->add_buffer_deltas()));
    } else if (s.tensor.grad().defined()) {
      EDL_RETURN_IF_ERROR(rpc::EncodeTensor(s.name, s.tensor.grad(), request->add_gradients()));
    }
  }
  return absl::OkStatus();
}

void ShardedModel::PushAccepted(int shard) {
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    if (s.is_buffer && s.shard == shard) s.pulled.copy_(s.tensor);
  }
}

}  // namespace elasticdl::worker
