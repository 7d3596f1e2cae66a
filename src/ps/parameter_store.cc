#include "ps/parameter_store.h"

#include <utility>
#include <vector>

#include "common/strings.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

Status CheckLike(const char* what, const std::string& name, const torch::Tensor& given,
                 const torch::Tensor& owned) {
  if (given.sizes() != owned.sizes() || given.scalar_type() != owned.scalar_type()) {
    return absl::InvalidArgumentError(
        StrCat(what, " '", name, "' has shape ", c10::str(given.sizes()), " and type ",
               c10::toString(given.scalar_type()), "; the parameter server holds ",
               c10::str(owned.sizes()), " ", c10::toString(owned.scalar_type())));
  }
  return absl::OkStatus();
}

}  // namespace

ParameterStore::ParameterStore(ParameterStoreOptions options) : options_(std::move(options)) {}

Status ParameterStore::Init(const proto::ModelValues& values, bool* accepted, int64_t* version) {
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors parameters, rpc::DecodeTensors(values.parameters()));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors buffers, rpc::DecodeTensors(values.buffers()));
  std::lock_guard<std::mutex> lock(mu_);
  *accepted = !initialized_;
  if (initialized_) {
    *version = version_;
    return absl::OkStatus();
  }
  std::vector<torch::Tensor> trainable;
  for (auto& [name, t] : parameters) {
    if (!t.is_floating_point()) {
      return absl::InvalidArgumentError(
          StrCat("parameter '", name, "' is not floating point; it cannot be trained"));
    }
    t.requires_grad_(true);
    trainable.push_back(t);
  }
  EDL_ASSIGN_OR_RETURN(optimizer_, MakeOptimizer(options_.optimizer, trainable));
  parameters_ = std::move(parameters);
  buffers_ = std::move(buffers);
  initialized_ = true;
  version_ = values.version();
  *version = version_;
  return absl::OkStatus();
}

void ParameterStore::RefreshSnapshotLocked() {
  if (snapshot_version_ == version_ && snapshot_ != nullptr) return;
  auto values = std::make_shared<proto::ModelValues>();
  values->set_version(version_);
  for (const auto& [name, t] : parameters_) {
    // Encoding a tensor we own cannot fail: its dtype was accepted at Init.
    rpc::EncodeTensor(name, t, values->add_parameters()).IgnoreError();
  }
  for (const auto& [name, t] : buffers_) {
    rpc::EncodeTensor(name, t, values->add_buffers()).IgnoreError();
  }
  snapshot_ = std::move(values);
  snapshot_version_ = version_;
}

Status ParameterStore::Pull(int64_t known_version, proto::PullResponse* out) {
  std::shared_ptr<const proto::ModelValues> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out->set_initialized(initialized_);
    out->mutable_values()->set_version(version_);
    if (!initialized_ || known_version == version_) return absl::OkStatus();
    RefreshSnapshotLocked();
    snapshot = snapshot_;
  }
  // Copy outside the lock: snapshots are immutable.
  *out->mutable_values() = *snapshot;
  return absl::OkStatus();
}

Status ParameterStore::ValidateLocked(const std::map<std::string, torch::Tensor>& gradients,
                                      const std::map<std::string, torch::Tensor>& deltas) const {
  for (const auto& [name, g] : gradients) {
    auto it = parameters_.find(name);
    if (it == parameters_.end()) {
      return absl::InvalidArgumentError(
          StrCat("gradient for '", name, "', which this parameter server does not hold"));
    }
    EDL_RETURN_IF_ERROR(CheckLike("gradient", name, g, it->second));
  }
  for (const auto& [name, d] : deltas) {
    auto it = buffers_.find(name);
    if (it == buffers_.end()) {
      return absl::InvalidArgumentError(
          StrCat("buffer update for '", name, "', which this parameter server does not hold"));
    }
    EDL_RETURN_IF_ERROR(CheckLike("buffer update", name, d, it->second));
  }
  return absl::OkStatus();
}

Status ParameterStore::StepLocked(const std::map<std::string, torch::Tensor>& gradients) {
  for (auto& [name, p] : parameters_) {
    auto it = gradients.find(name);
    // Parameters without a gradient are skipped by the optimizer.
    p.mutable_grad() = it == gradients.end() ? torch::Tensor() : it->second;
  }
  try {
    optimizer_->step();
  } catch (const std::exception& e) {
    return absl::InternalError(StrCat("optimizer step failed: ", e.what()));
  }
  ++version_;
  return absl::OkStatus();
}

Status ParameterStore::Push(const proto::PushRequest& request, proto::PushResponse* out) {
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors gradients, rpc::DecodeTensors(request.gradients()));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors deltas, rpc::DecodeTensors(request.buffer_deltas()));
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError("parameter server is not initialized yet");
  }
  EDL_RETURN_IF_ERROR(ValidateLocked(gradients, deltas));
  if (request.base_version() > version_) {
    return absl::InvalidArgumentError(StrCat("gradients computed on version ",
                                             request.base_version(), ", newer than the server's ",
                                             version_));
  }
  if (!options_.use_async && version_ - request.base_version() > options_.staleness_tolerance) {
    out->set_accepted(false);
    out->set_version(version_);
    return absl::OkStatus();
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, d] : deltas) buffers_[name].add_(d);
  if (!deltas.empty()) snapshot_ = nullptr;

  if (options_.use_async || options_.grads_to_wait <= 1) {
    const int64_t staleness = version_ - request.base_version();
    if (options_.lr_staleness_modulation && staleness > 0) {
      for (auto& [name, g] : gradients) g.div_(static_cast<double>(staleness + 1));
    }
    EDL_RETURN_IF_ERROR(StepLocked(gradients));
  } else {
    for (auto& [name, g] : gradients) {
      auto it = pending_sum_.find(name);
      if (it == pending_sum_.end()) {
        pending_sum_.emplace(name, g.clone());
      } else {
        it->second.add_(g);
      }
    }
    if (++pending_count_ >= options_.grads_to_wait) {
      for (auto& [name, g] : pending_sum_) g.div_(pending_count_);
      Status s = StepLocked(pending_sum_);
      pending_sum_.clear();
      pending_count_ = 0;
      EDL_RETURN_IF_ERROR(s);
    }
  }
  out->set_accepted(true);
  out->set_version(version_);
  return absl::OkStatus();
}

int64_t ParameterStore::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

bool ParameterStore::initialized() const {
  std::lock_guard<std::mutex> lock(mu_);
  return initialized_;
}

}  // namespace elasticdl::ps
