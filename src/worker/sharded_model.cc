#include "worker/sharded_model.h"

#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>

#include <map>

#include "common/strings.h"
#include "ps/placement.h"
#include "rpc/tensor_codec.h"
#include "zoo/mirrored_module.h"

namespace elasticdl::worker {
namespace {

// How a normalization module updates its running statistics.
struct RunningStats {
  std::optional<double> momentum;  // nullopt: cumulative average
};

// BatchNorm's momentum may be unset (a cumulative average); InstanceNorm's
// is always set.
std::optional<double> MomentumOf(const c10::optional<double>& m) {
  return m.has_value() ? std::optional<double>(*m) : std::nullopt;
}
std::optional<double> MomentumOf(double m) { return m; }

template <typename Impl>
std::optional<RunningStats> RunningStatsOf(torch::nn::Module& module) {
  auto* m = module.as<Impl>();
  if (m == nullptr || !m->options.track_running_stats()) return std::nullopt;
  return RunningStats{MomentumOf(m->options.momentum())};
}

std::optional<RunningStats> RunningStatsOf(torch::nn::Module& module) {
  if (auto* mirror = module.as<MirroredModule>()) {
    if (!mirror->running_stats) return std::nullopt;
    return RunningStats{mirror->running_stats->momentum};
  }
  for (auto* of :
       {&RunningStatsOf<torch::nn::BatchNorm1dImpl>, &RunningStatsOf<torch::nn::BatchNorm2dImpl>,
        &RunningStatsOf<torch::nn::BatchNorm3dImpl>, &RunningStatsOf<torch::nn::InstanceNorm1dImpl>,
        &RunningStatsOf<torch::nn::InstanceNorm2dImpl>,
        &RunningStatsOf<torch::nn::InstanceNorm3dImpl>}) {
    if (auto stats = (*of)(module)) return stats;
  }
  return std::nullopt;
}

std::string Join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

ShardedModel::ShardedModel(std::shared_ptr<Model> model, int num_shards)
    : model_(std::move(model)), num_shards_(std::max(num_shards, 1)) {
  for (const auto& item : model_->named_parameters()) {
    slots_.push_back({item.key(), item.value(), ps::ShardOf(item.key(), num_shards_), false, {}});
  }
  std::map<std::string, int> buffer_slot;
  for (const auto& item : model_->named_buffers()) {
    Slot s{item.key(), item.value(), ps::ShardOf(item.key(), num_shards_), true, {}};
    s.pulled = s.tensor.detach().clone();
    buffer_slot[s.name] = static_cast<int>(slots_.size());
    slots_.push_back(std::move(s));
  }
  for (const auto& item : model_->named_modules()) {
    std::optional<RunningStats> stats = RunningStatsOf(*item.value());
    if (!stats) continue;
    auto counter = buffer_slot.find(Join(item.key(), "num_batches_tracked"));
    for (const char* name : {"running_mean", "running_var"}) {
      auto it = buffer_slot.find(Join(item.key(), name));
      if (it == buffer_slot.end()) continue;
      Slot& s = slots_[it->second];
      s.momentum = stats->momentum;
      if (!stats->momentum.has_value() && counter != buffer_slot.end()) {
        s.cumulative = true;
        s.counter = counter->second;
      }
    }
  }
}

ShardedModel::BufferRole ShardedModel::RoleOf(const std::string& name) const {
  BufferRole role;
  for (const Slot& s : slots_) {
    if (!s.is_buffer || s.name != name) continue;
    if (s.cumulative) {
      role.kind = BufferRole::kCumulativeStatistic;
      role.counter = slots_[s.counter].name;
    } else if (s.momentum.has_value()) {
      role.kind = BufferRole::kRunningStatistic;
    }
  }
  return role;
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
  // Every shard holds some rows of every table.
  for (const proto::EmbeddingTableSpec& spec : tables_) *values.add_embedding_tables() = spec;
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

Status ShardedModel::Apply(const proto::ModelValues& values, std::string_view shared) {
  torch::NoGradGuard no_grad;
  for (bool is_buffer : {false, true}) {
    const auto& tensors = is_buffer ? values.buffers() : values.parameters();
    for (const proto::Tensor& t : tensors) {
      Slot* slot = Find(t.name(), is_buffer);
      if (slot == nullptr) {
        return absl::InvalidArgumentError(StrCat(
            "the model has no ", is_buffer ? "buffer" : "parameter", " named '", t.name(), "'"));
      }
      EDL_RETURN_IF_ERROR(rpc::CopyInto(t, slot->tensor, shared));
      if (is_buffer) slot->pulled.copy_(slot->tensor);
    }
  }
  return absl::OkStatus();
}

double ShardedModel::DecayOf(const Slot& s) const {
  if (s.momentum.has_value()) return 1 - *s.momentum;
  if (s.cumulative) {
    // The module averaged over n batches, counting this one.
    const double n = slots_[s.counter].tensor.item<double>();
    return n > 0 ? 1 - 1 / n : 1;
  }
  return 1;
}

Status ShardedModel::FillPush(int shard, proto::PushRequest* request, Held* held) const {
  torch::NoGradGuard no_grad;
  // A tensor is named where it lies when it lies in memory; copied in
  // otherwise (a gradient not contiguous on the CPU), its view then empty.
  auto add = [held](const std::string& name, const torch::Tensor& t, proto::Tensor* out) {
    if (held == nullptr) return rpc::EncodeTensor(name, t, out);
    StatusOr<std::string_view> bytes = rpc::DescribeTensor(name, t, out);
    if (!bytes.ok()) {
      held->bytes.emplace_back();
      return rpc::EncodeTensor(name, t, out);
    }
    held->bytes.push_back(*bytes);
    held->tensors.push_back(t);
    return absl::OkStatus();
  };
  if (held != nullptr) {
    held->bytes.clear();
    held->tensors.clear();
  }
  // Gradients first, then buffer updates: the order of the request's
  // tensors, which `held` follows.
  for (const Slot& s : slots_) {
    if (s.shard == shard && !s.is_buffer && s.tensor.grad().defined()) {
      EDL_RETURN_IF_ERROR(add(s.name, s.tensor.grad(), request->add_gradients()));
    }
  }
  for (const Slot& s : slots_) {
    if (s.shard != shard || !s.is_buffer) continue;
    const double decay = DecayOf(s);
    // A bool has no difference: its update says per element whether it was
    // set (1), cleared (-1) or kept (0).
    torch::Tensor update = s.tensor.scalar_type() == torch::kBool
                               ? s.tensor.to(torch::kInt8) - s.pulled.to(torch::kInt8)
                           : decay == 1 ? s.tensor - s.pulled
                                        : s.tensor - decay * s.pulled;
    EDL_RETURN_IF_ERROR(add(s.name, update, request->add_buffer_updates()));
    request->add_buffer_decays(decay);
  }
  return absl::OkStatus();
}

void ShardedModel::PushAccepted(int shard) {
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    if (s.is_buffer && s.shard == shard) s.pulled.copy_(s.tensor);
  }
}

void ShardedModel::RestoreBuffers() {
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    if (s.is_buffer) s.tensor.copy_(s.pulled);
  }
}

std::optional<std::string> ShardedModel::FirstNonFinite() const {
  for (const Slot& s : slots_) {
    const torch::Tensor& t = s.is_buffer ? s.tensor : s.tensor.grad();
    if (!rpc::AllFinite(t)) {
      return StrCat(s.is_buffer ? "buffer '" : "the gradient of '", s.name, "'");
    }
  }
  return std::nullopt;
}

}  // namespace elasticdl::worker
