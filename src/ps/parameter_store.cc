#include "ps/parameter_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "rpc/placement.h"
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

uint64_t PickInstance(uint64_t fixed) {
  if (fixed != 0) return fixed;
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

// The first name in `tensors` holding a NaN or an infinity; empty if none.
template <typename Map, typename Get>
std::string FirstNonFinite(const Map& tensors, Get get) {
  for (const auto& [name, entry] : tensors) {
    const torch::Tensor& t = get(entry);
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>()) return name;
  }
  return "";
}

// Longest a pull waits for a step: RPC threads are not held for long.
constexpr std::chrono::milliseconds kMaxPullWait{5000};

// Checks that `offered` and `held` name the same tensors with the same
// shapes and types; `what` is "parameter" or "buffer".
Status CheckSameTensors(const char* what, const rpc::NamedTensors& offered,
                        const rpc::NamedTensors& held) {
  std::string lacking;
  std::string extra;
  for (const auto& [name, t] : offered) {
    auto it = held.find(name);
    if (it == held.end()) {
      lacking += StrCat(lacking.empty() ? "" : ", ", "'", name, "'");
    } else {
      EDL_RETURN_IF_ERROR(CheckLike(what, name, t, it->second));
    }
  }
  for (const auto& [name, t] : held) {
    if (offered.count(name) == 0) extra += StrCat(extra.empty() ? "" : ", ", "'", name, "'");
  }
  if (!lacking.empty()) {
    return absl::FailedPreconditionError(
        StrCat("the checkpoint this parameter server was initialized from lacks the model's ", what,
               "(s) ", lacking));
  }
  if (!extra.empty()) {
    return absl::FailedPreconditionError(
        StrCat("the checkpoint this parameter server was initialized from holds ", what, "(s) ",
               extra, " that the model does not have"));
  }
  return absl::OkStatus();
}

}  // namespace

ParameterStore::ParameterStore(ParameterStoreOptions options)
    : options_(std::move(options)),
      instance_(PickInstance(options_.instance)),
      optimizer_config_(OptimizerConfigOf(options_.optimizer)) {}

Status ParameterStore::Init(const proto::ModelValues& values, bool* accepted, int64_t* version) {
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors parameters, rpc::DecodeTensors(values.parameters()));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors buffers, rpc::DecodeTensors(values.buffers()));
  std::optional<ShardSnapshot> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *accepted = !initialized_;
    if (initialized_) {
      *version = version_;
      return from_checkpoint_ ? CheckOfferedLocked(parameters, buffers) : absl::OkStatus();
    }
    std::vector<torch::Tensor> trainable;
    for (auto& [name, t] : parameters) {
      if (!t.is_floating_point()) {
        *accepted = false;
        return absl::InvalidArgumentError(
            StrCat("parameter '", name, "' is not floating point; it cannot be trained"));
      }
      t.requires_grad_(true);
      trainable.push_back(t);
    }
    auto optimizer = MakeOptimizer(options_.optimizer, trainable);
    if (!optimizer.ok()) {
      *accepted = false;
      return optimizer.status();
    }
    optimizer_ = std::move(optimizer).value();
    parameters_ = std::move(parameters);
    buffers_ = std::move(buffers);
    initialized_ = true;
    version_ = values.version();
    *version = version_;
    if (options_.on_snapshot) snapshot = SnapshotLocked();
  }
  Deliver(std::move(snapshot));
  return absl::OkStatus();
}

Status ParameterStore::CheckOfferedLocked(const rpc::NamedTensors& parameters,
                                          const rpc::NamedTensors& buffers) const {
  EDL_RETURN_IF_ERROR(CheckSameTensors("parameter", parameters, parameters_));
  return CheckSameTensors("buffer", buffers, buffers_);
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

Status ParameterStore::Pull(const proto::PullRequest& request, proto::PullResponse* out) {
  out->Clear();
  std::shared_ptr<const proto::ModelValues> snapshot;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto current = [&] {
      return initialized_ && request.known_version() == version_ &&
             request.known_instance() == instance_;
    };
    if (request.wait_ms() > 0 && current()) {
      const auto wait = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(request.wait_ms()), kMaxPullWait);
      stepped_.wait_for(lock, wait, [&] { return !current(); });
    }
    out->set_initialized(initialized_);
    out->set_instance(instance_);
    out->mutable_values()->set_version(version_);
    if (!initialized_ ||
        (request.known_version() == version_ && request.known_instance() == instance_)) {
      return absl::OkStatus();
    }
    RefreshSnapshotLocked();
    snapshot = snapshot_;
  }
  // Copy outside the lock: snapshots are immutable.
  *out->mutable_values() = *snapshot;
  return absl::OkStatus();
}

Status ParameterStore::ValidateLocked(const rpc::NamedTensors& gradients,
                                      const BufferUpdates& buffers) const {
  for (const auto& [name, g] : gradients) {
    auto it = parameters_.find(name);
    if (it == parameters_.end()) {
      return absl::InvalidArgumentError(
          StrCat("gradient for '", name, "', which this parameter server does not hold"));
    }
    EDL_RETURN_IF_ERROR(CheckLike("gradient", name, g, it->second));
  }
  for (const auto& [name, b] : buffers) {
    auto it = buffers_.find(name);
    if (it == buffers_.end()) {
      return absl::InvalidArgumentError(
          StrCat("buffer update for '", name, "', which this parameter server does not hold"));
    }
    EDL_RETURN_IF_ERROR(CheckLike("buffer update", name, b.update, it->second));
    if (!std::isfinite(b.decay) || (!it->second.is_floating_point() && b.decay != 1)) {
      return absl::InvalidArgumentError(StrCat("buffer '", name, "': decay ", b.decay,
                                               " is not a finite number (1 for integer buffers)"));
    }
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
  stepped_.notify_all();
  return absl::OkStatus();
}

void ParameterStore::UpdateBuffersLocked(const BufferUpdates& buffers) {
  for (const auto& [name, b] : buffers) {
    torch::Tensor& held = buffers_[name];
    if (b.decay != 1) held.mul_(b.decay);
    held.add_(b.update);
  }
  if (!buffers.empty()) snapshot_ = nullptr;
}

bool ParameterStore::StepCompleteLocked() const {
  if (pending_.empty()) return false;
  if (options_.grads_to_wait > 0) {
    return static_cast<int>(pending_.size()) >= options_.grads_to_wait;
  }
  if (group_generation_ < 0) return false;
  return std::includes(present_.begin(), present_.end(), group_.begin(), group_.end());
}

void ParameterStore::StepIfCompleteLocked(std::optional<ShardSnapshot>* snapshot) {
  if (!StepCompleteLocked()) return;
  const int64_t version_before = version_;
  // A failed step puts its minibatches back: their workers redo them.
  FlushPendingLocked(static_cast<int>(pending_.size())).IgnoreError();
  if (options_.on_snapshot && options_.snapshot_every > 0 && version_ != version_before &&
      version_ % options_.snapshot_every == 0) {
    *snapshot = SnapshotLocked();
  }
}

Status ParameterStore::FlushPendingLocked(int divisor) {
  std::vector<Contribution> pushes = std::move(pending_);
  pending_.clear();
  present_.clear();
  // Tag order: the same sums on every run, whatever the arrival order.
  std::sort(pushes.begin(), pushes.end(), [](const Contribution& a, const Contribution& b) {
    return std::make_tuple(!a.tagged, a.task, a.minibatch, a.arrival) <
           std::make_tuple(!b.tagged, b.task, b.minibatch, b.arrival);
  });
  // The tensors were decoded for their pushes: ours to sum into.
  rpc::NamedTensors sum;
  for (Contribution& c : pushes) {
    for (auto& [name, g] : c.gradients) {
      auto [it, inserted] = sum.emplace(name, g);
      if (!inserted) it->second.add_(g);
    }
  }
  for (auto& [name, g] : sum) g.div_(divisor);
  Status s = StepLocked(sum);
  if (s.ok()) {
    for (const Contribution& c : pushes) UpdateBuffersLocked(c.buffers);
  } else {
    // Nothing of the step was applied: neither are its minibatches.
    for (const Contribution& c : pushes) {
      auto it = c.tagged ? applied_.find(c.task) : applied_.end();
      if (it != applied_.end()) it->second = std::min(it->second, c.minibatch);
    }
  }
  return s;
}

Status ParameterStore::Flush(int64_t* version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError("parameter server is not initialized yet");
  }
  torch::NoGradGuard no_grad;
  if (!pending_.empty()) {
    const int divisor =
        options_.grads_to_wait > 0 ? options_.grads_to_wait : static_cast<int>(pending_.size());
    EDL_RETURN_IF_ERROR(FlushPendingLocked(divisor));
  }
  *version = version_;
  return absl::OkStatus();
}

void ParameterStore::SetGroup(int64_t generation, const std::vector<int32_t>& workers) {
  std::optional<ShardSnapshot> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation < group_generation_) return;
    group_generation_ = generation;
    group_ = std::set<int32_t>(workers.begin(), workers.end());
    if (!initialized_ || options_.use_async) return;
    torch::NoGradGuard no_grad;
    StepIfCompleteLocked(&snapshot);
  }
  Deliver(std::move(snapshot));
}

Status ParameterStore::Push(const proto::PushRequest& request, proto::PushResponse* out) {
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors gradients, rpc::DecodeTensors(request.gradients()));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors updates, rpc::DecodeTensors(request.buffer_updates()));
  if (request.buffer_decays_size() != 0 &&
      request.buffer_decays_size() != request.buffer_updates_size()) {
    return absl::InvalidArgumentError(StrCat(request.buffer_decays_size(), " buffer decays for ",
                                             request.buffer_updates_size(), " buffer updates"));
  }
  BufferUpdates buffers;
  for (int i = 0; i < request.buffer_updates_size(); ++i) {
    const std::string& name = request.buffer_updates(i).name();
    BufferUpdate& b = buffers[name];
    b.update = std::move(updates.at(name));
    if (request.buffer_decays_size() != 0) b.decay = request.buffer_decays(i);
  }
  // Checked outside the lock: it reads every value.
  std::string bad =
      FirstNonFinite(gradients, [](const torch::Tensor& t) -> const torch::Tensor& { return t; });
  if (!bad.empty()) {
    return absl::InvalidArgumentError(
        StrCat("the gradient of '", bad, "' holds non-finite values; nothing applied"));
  }
  bad = FirstNonFinite(buffers,
                       [](const BufferUpdate& b) -> const torch::Tensor& { return b.update; });
  if (!bad.empty()) {
    return absl::InvalidArgumentError(
        StrCat("the update of buffer '", bad, "' holds non-finite values; nothing applied"));
  }
  std::optional<ShardSnapshot> snapshot;
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = PushLocked(request, gradients, buffers, out, &snapshot);
  }
  Deliver(std::move(snapshot));
  return s;
}

Status ParameterStore::PushLocked(const proto::PushRequest& request, rpc::NamedTensors& gradients,
                                  BufferUpdates& buffers, proto::PushResponse* out,
                                  std::optional<ShardSnapshot>* snapshot) {
  out->Clear();
  if (!initialized_) {
    return absl::FailedPreconditionError("parameter server is not initialized yet");
  }
  EDL_RETURN_IF_ERROR(ValidateLocked(gradients, buffers));
  out->set_accepted(false);
  out->set_version(version_);
  const bool tagged = request.has_tag();
  const int64_t task = request.tag().task_id();
  const int64_t minibatch = request.tag().minibatch();
  if (tagged) {
    if (minibatch < 0) {
      return absl::InvalidArgumentError(
          StrCat("push tagged with minibatch ", minibatch, " of task ", task));
    }
    auto it = applied_.find(task);
    const int64_t done = it == applied_.end() ? 0 : it->second;
    if (minibatch < done) {
      out->set_accepted(true);
      out->set_duplicate(true);
      if (!options_.use_async && options_.grads_to_wait == 0) {
        // A worker redoing what this shard has: the step need not wait for
        // its gradient, which another shard may be waiting for first.
        present_.insert(request.worker_id());
        torch::NoGradGuard no_grad;
        StepIfCompleteLocked(snapshot);
        out->set_version(version_);
      }
      return absl::OkStatus();
    }
    if (minibatch > done) {
      return absl::FailedPreconditionError(StrCat("minibatch ", minibatch, " of task ", task,
                                                  " arrives before minibatch ", done,
                                                  " (parameter server ", options_.ps_id, ")"));
    }
  }
  if (request.instance() != instance_ && (tagged || request.instance() != 0)) {
    return absl::OkStatus();  // computed on another server instance
  }
  if (request.base_version() > version_) {
    return absl::InvalidArgumentError(StrCat("gradients computed on version ",
                                             request.base_version(), ", newer than the server's ",
                                             version_));
  }
  const int64_t staleness = version_ - request.base_version();
  const int64_t bound = options_.use_async ? options_.max_staleness : options_.staleness_tolerance;
  if (bound >= 0 && staleness > bound) return absl::OkStatus();  // too stale
  const int64_t version_before = version_;
  torch::NoGradGuard no_grad;
  if (options_.use_async) {
    if (options_.lr_staleness_modulation && staleness > 0) {
      for (auto& [name, g] : gradients) g.div_(static_cast<double>(staleness + 1));
    }
    EDL_RETURN_IF_ERROR(StepLocked(gradients));
    UpdateBuffersLocked(buffers);
    if (tagged) applied_[task] = minibatch + 1;
  } else {
    Contribution c;
    c.tagged = tagged;
    c.task = task;
    c.minibatch = minibatch;
    c.arrival = arrivals_++;
    c.worker = request.worker_id();
    c.gradients = std::move(gradients);
    c.buffers = std::move(buffers);
    pending_.push_back(std::move(c));
    present_.insert(request.worker_id());
    if (tagged) applied_[task] = minibatch + 1;
    if (StepCompleteLocked()) {
      const int divisor = static_cast<int>(pending_.size());
      EDL_RETURN_IF_ERROR(FlushPendingLocked(divisor));
    } else {
      out->set_step_pending(options_.grads_to_wait == 0);
    }
  }
  out->set_accepted(true);
  out->set_version(version_);
  if (options_.on_snapshot && options_.snapshot_every > 0 && version_ != version_before &&
      version_ % options_.snapshot_every == 0) {
    *snapshot = SnapshotLocked();
  }
  return absl::OkStatus();
}

void ParameterStore::Deliver(std::optional<ShardSnapshot> snapshot) const {
  if (snapshot.has_value() && options_.on_snapshot) options_.on_snapshot(std::move(*snapshot));
}

ShardSnapshot ParameterStore::SnapshotLocked() const {
  ShardSnapshot s;
  s.version = version_;
  s.ps_id = options_.ps_id;
  s.num_ps = options_.num_ps;
  s.optimizer = optimizer_config_;
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : parameters_) {
    ParameterSnapshot& out = s.parameters[name];
    out.value = p.detach().clone();
    ExportOptimizerState(options_.optimizer, *optimizer_, p, &out);
  }
  for (const auto& [name, b] : buffers_) s.buffers[name] = b.clone();
  s.applied = applied_;
  // Waiting for their step: not in the values, so not applied.
  for (const Contribution& c : pending_) {
    if (!c.tagged) continue;
    int64_t& n = s.applied[c.task];
    n = std::min(n, c.minibatch);
  }
  for (auto it = s.applied.begin(); it != s.applied.end();) {
    it = it->second == 0 ? s.applied.erase(it) : std::next(it);
  }
  return s;
}

StatusOr<ShardSnapshot> ParameterStore::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError("parameter server is not initialized yet");
  }
  return SnapshotLocked();
}

Status ParameterStore::Restore(const proto::ShardCheckpoint& checkpoint) {
  if (checkpoint.ps_id() != options_.ps_id || checkpoint.num_ps() != options_.num_ps) {
    return absl::InvalidArgumentError(
        StrCat("checkpoint of parameter server ", checkpoint.ps_id(), " of ", checkpoint.num_ps(),
               " cannot restore parameter server ", options_.ps_id, " of ", options_.num_ps));
  }
  std::map<std::string, const proto::ParameterState*> parameters;
  for (const auto& p : checkpoint.parameters()) {
    if (!parameters.emplace(p.value().name(), &p).second) {
      return absl::InvalidArgumentError(
          StrCat("checkpoint holds parameter '", p.value().name(), "' twice"));
    }
  }
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors buffers, rpc::DecodeTensors(checkpoint.buffers()));
  std::map<int64_t, int64_t> applied;
  for (const auto& progress : checkpoint.applied()) {
    if (progress.minibatches() > 0) applied[progress.task_id()] = progress.minibatches();
  }
  const bool slots_apply = checkpoint.optimizer().kind_case() == optimizer_config_.kind_case();
  return Load(parameters, std::move(buffers), checkpoint.version(), slots_apply,
              std::move(applied));
}

Status ParameterStore::InitFromCheckpoints(const std::vector<proto::ShardCheckpoint>& shards) {
  if (shards.empty()) return absl::InvalidArgumentError("no checkpoint files to initialize from");
  std::map<std::string, const proto::ParameterState*> parameters;
  rpc::NamedTensors buffers;
  for (const auto& shard : shards) {
    if (shard.version() != shards[0].version()) {
      return absl::InvalidArgumentError(StrCat("checkpoint files of versions ", shards[0].version(),
                                               " and ", shard.version(),
                                               " cannot initialize one model"));
    }
    for (const auto& p : shard.parameters()) {
      const std::string& name = p.value().name();
      if (rpc::ShardOf(name, options_.num_ps) != options_.ps_id) continue;
      if (!parameters.emplace(name, &p).second) {
        return absl::InvalidArgumentError(
            StrCat("parameter '", name, "' appears in two checkpoint files"));
      }
    }
    for (const auto& b : shard.buffers()) {
      if (rpc::ShardOf(b.name(), options_.num_ps) != options_.ps_id) continue;
      EDL_ASSIGN_OR_RETURN(torch::Tensor t, rpc::DecodeTensor(b));
      if (!buffers.emplace(b.name(), std::move(t)).second) {
        return absl::InvalidArgumentError(
            StrCat("buffer '", b.name(), "' appears in two checkpoint files"));
      }
    }
  }
  const bool slots_apply = shards[0].optimizer().kind_case() == optimizer_config_.kind_case();
  return Load(parameters, std::move(buffers), shards[0].version(), slots_apply, {});
}

Status ParameterStore::Load(const std::map<std::string, const proto::ParameterState*>& parameters,
                            rpc::NamedTensors buffers, int64_t version, bool slots_apply,
                            std::map<int64_t, int64_t> applied) {
  rpc::NamedTensors values;
  std::vector<torch::Tensor> trainable;
  for (const auto& [name, state] : parameters) {
    EDL_ASSIGN_OR_RETURN(torch::Tensor t, rpc::DecodeTensor(state->value()));
    if (!t.is_floating_point()) {
      return absl::InvalidArgumentError(
          StrCat("parameter '", name, "' is not floating point; it cannot be trained"));
    }
    t.requires_grad_(true);
    trainable.push_back(t);
    values.emplace(name, std::move(t));
  }
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<torch::optim::Optimizer> optimizer,
                       MakeOptimizer(options_.optimizer, trainable));
  if (slots_apply) {
    for (const auto& [name, state] : parameters) {
      EDL_ASSIGN_OR_RETURN(rpc::NamedTensors slots, rpc::DecodeTensors(state->slots()));
      EDL_RETURN_IF_ERROR(ImportOptimizerState(options_.optimizer, name, slots, state->step(),
                                               values.at(name), optimizer.get()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (initialized_) {
    return absl::FailedPreconditionError(
        "parameter server is already initialized; a checkpoint cannot replace its model");
  }
  optimizer_ = std::move(optimizer);
  parameters_ = std::move(values);
  buffers_ = std::move(buffers);
  version_ = version;
  applied_ = std::move(applied);
  initialized_ = true;
  from_checkpoint_ = true;
  snapshot_ = nullptr;
  return absl::OkStatus();
}

std::map<int64_t, int64_t> ParameterStore::applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applied_;
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
