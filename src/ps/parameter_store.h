// One parameter-server shard's state: the dense parameters and buffers it
// owns, their version, and the optimizer that applies pushed gradients.
//
// Versions: a shard starts at version 0 when initialized and adds one per
// optimizer step. Async mode (the default) steps on every push. Sync mode
// averages `grads_to_wait` accepted pushes per step and refuses gradients
// computed on a version more than `staleness_tolerance` steps old: the worker
// pulls and computes again.
//
// Exactly-once pushes: a push tagged (task T, minibatch i) is applied only if
// it is the next minibatch of T this shard has not applied; a repeat (a
// worker retrying, or a worker taking the task over) is acknowledged as a
// duplicate and applied nothing. The shard remembers, per task, how many
// minibatches it applied (always a prefix), and checkpoints that with the
// values, so a restored shard tells the master exactly what it contains.
//
// Instances: each store has a random nonzero id. Versions of a relaunched,
// restored server repeat with other values, so a pull leaves values out only
// when both version and instance are the caller's, and a push computed on
// another instance is refused (accepted=false: pull and compute again).
//
// Checkpoints: Snapshot() copies a consistent state (values, optimizer
// slots, buffers, applied minibatches) under the lock; Restore() and
// InitFromCheckpoints() start a store from checkpoints.
//
// Thread-safe: every method may be called from many RPC threads at once;
// updates are serialized by one mutex, so a pull never sees half a step.
#ifndef ELASTICDL_PS_PARAMETER_STORE_H_
#define ELASTICDL_PS_PARAMETER_STORE_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/optimizer.h"
#include "ps/shard_state.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {

struct ParameterStoreOptions {
  // The update rule, from the zoo's optimizer().
  OptimizerSpec optimizer = torch::optim::SGDOptions(0.1);
  // Apply each push at once (true) or average grads_to_wait pushes (false).
  bool use_async = true;
  // Sync mode: accepted pushes per step. At least 1.
  int grads_to_wait = 1;
  // Sync mode: how many versions old a push's base version may be.
  // 0 accepts only gradients computed on the current version.
  int staleness_tolerance = 0;
  // Async mode: scale a gradient computed on a version s steps old by
  // 1 / (1 + s), so that workers racing on the same version do not add up
  // to a larger step than one worker would take (the original's
  // --lr_staleness_modulation). For SGD this is the learning rate scaled.
  bool lr_staleness_modulation = false;
  // This shard's index and the job's number of shards: which parameters a
  // shard takes from checkpoints written with another number of shards, and
  // what snapshots record.
  int ps_id = 0;
  int num_ps = 1;
  // The instance id; 0 (the default) picks a random nonzero one. Tests fix it.
  uint64_t instance = 0;
  // When `on_snapshot` is set: after Init is accepted, and (when
  // `snapshot_every` > 0) after every step that brings the version to a
  // multiple of `snapshot_every`, the store takes a Snapshot under its lock
  // and hands it to `on_snapshot` outside the lock (on the calling RPC
  // thread; it should be quick). Snapshots may arrive out of version order
  // when pushes race.
  int64_t snapshot_every = 0;
  std::function<void(ShardSnapshot)> on_snapshot;
};

class ParameterStore {
 public:
  explicit ParameterStore(ParameterStoreOptions options);

  // Takes `values` as the initial model unless already initialized (first
  // wins). Sets *accepted accordingly and *version to the current version.
  // A store initialized from a checkpoint (Restore, InitFromCheckpoints)
  // ignores the values too, but checks them against what it holds: a
  // parameter or buffer of the model that the checkpoint lacks, or one the
  // model lacks, or a different shape, is FAILED_PRECONDITION naming them.
  Status Init(const proto::ModelValues& values, bool* accepted, int64_t* version);

  // Fills `out` (cleared first) with `initialized`, the current version and instance and,
  // unless the caller's known_version and known_instance are both current,
  // all values.
  Status Pull(const proto::PullRequest& request, proto::PullResponse* out);

  // Applies (or, in sync mode, accumulates) pushed gradients and buffer
  // deltas. `out` is cleared first. In this order of checks; each refusal applies nothing:
  //  - FAILED_PRECONDITION before Init;
  //  - INVALID_ARGUMENT for malformed tensors, names the shard does not
  //    hold, wrong shapes or types, a negative minibatch;
  //  - tag (T, i) with i below the minibatches of T applied: accepted and
  //    duplicate (nothing applied, buffer deltas neither);
  //  - tag (T, i) with i above them: FAILED_PRECONDITION naming both;
  //  - `instance` not ours: accepted=false. Instance 0 is "unknown": it
  //    matches only on untagged pushes (tools and tests that do not track
  //    instances); tagged pushes must name the instance they pulled from;
  //  - base_version newer than ours: INVALID_ARGUMENT;
  //  - sync mode, base_version too stale: accepted=false.
  // Then the push is applied (sync mode: accumulated, its buffer deltas too,
  // until grads_to_wait pushes make a step) and its tag counts as applied.
  Status Push(const proto::PushRequest& request, proto::PushResponse* out);

  // Sync mode: applies the gradients still waiting for their step (fewer
  // than grads_to_wait, at the end of training), divided by grads_to_wait
  // as in a full step, so every minibatch weighs the same. No-op when none
  // wait. Sets *version to the current version.
  Status Flush(int64_t* version);

  // A consistent copy of the shard (tensors cloned under the lock; cheap
  // next to encoding). In sync mode, pushes accumulated but not yet stepped
  // are not in it: neither their gradients, their buffer deltas nor their
  // tags (the tasks' applied counts stop before them). FAILED_PRECONDITION
  // before Init.
  StatusOr<ShardSnapshot> Snapshot() const;

  // Recovery: starts an uninitialized store from its own shard's checkpoint
  // (same ps_id and num_ps, else INVALID_ARGUMENT): values, optimizer state,
  // buffers, version and applied minibatches. FAILED_PRECONDITION when
  // already initialized.
  Status Restore(const proto::ShardCheckpoint& checkpoint);

  // A new job's model from a checkpoint written with any number of shards:
  // `shards` are all the files of one version; this store takes the
  // parameters and buffers it owns (rpc::ShardOf for options.num_ps), with
  // their optimizer state when the checkpoint's optimizer is of the same
  // kind as ours (otherwise the optimizer starts fresh), and the version.
  // Applied minibatches start empty (they belong to the other job).
  // INVALID_ARGUMENT when the files disagree on the version or a name
  // appears twice; FAILED_PRECONDITION when already initialized.
  Status InitFromCheckpoints(const std::vector<proto::ShardCheckpoint>& shards);

  // Minibatches applied per task (a prefix each), including sync-mode pushes
  // accumulated but not stepped.
  std::map<int64_t, int64_t> applied() const;

  int64_t version() const;
  bool initialized() const;
  uint64_t instance() const { return instance_; }

 private:
  Status ValidateLocked(const std::map<std::string, torch::Tensor>& gradients,
                        const std::map<std::string, torch::Tensor>& deltas) const;
  Status StepLocked(const std::map<std::string, torch::Tensor>& gradients);
  void AddDeltasLocked(const std::map<std::string, torch::Tensor>& deltas);
  // Applies the sync-mode accumulation as one step and clears it.
  // One step with the accumulated gradients divided by `divisor`.
  Status FlushPendingLocked(int divisor);
  void RefreshSnapshotLocked();
  ShardSnapshot SnapshotLocked() const;
  // Installs parameters (with optimizer state when `slots_apply`), buffers,
  // version and applied as the initial state.
  Status Load(const std::map<std::string, const proto::ParameterState*>& parameters,
              rpc::NamedTensors buffers, int64_t version, bool slots_apply,
              std::map<int64_t, int64_t> applied);
  Status PushLocked(const proto::PushRequest& request, rpc::NamedTensors& gradients,
                    rpc::NamedTensors& deltas, proto::PushResponse* out,
                    std::optional<ShardSnapshot>* snapshot);
  Status CheckOfferedLocked(const rpc::NamedTensors& parameters,
                            const rpc::NamedTensors& buffers) const;
  // Hands a snapshot to options_.on_snapshot if one was taken.
  void Deliver(std::optional<ShardSnapshot> snapshot) const;

  const ParameterStoreOptions options_;
  const uint64_t instance_;
  const proto::OptimizerConfig optimizer_config_;

  mutable std::mutex mu_;
  bool initialized_ = false;
  // Initialized from a checkpoint rather than by Init.
  bool from_checkpoint_ = false;
  int64_t version_ = 0;
  std::map<std::string, torch::Tensor> parameters_;
  std::map<std::string, torch::Tensor> buffers_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // task id -> minibatches applied (or accumulated, in sync mode).
  std::map<int64_t, int64_t> applied_;
  // Sync mode: the sum of accepted gradients since the last step, the sum
  // of their buffer deltas, how many, and their tags.
  std::map<std::string, torch::Tensor> pending_sum_;
  std::map<std::string, torch::Tensor> pending_deltas_;
  int pending_count_ = 0;
  std::vector<std::pair<int64_t, int64_t>> pending_tags_;
  // Encoded values of version snapshot_version_, shared by concurrent pulls.
  std::shared_ptr<const proto::ModelValues> snapshot_;
  int64_t snapshot_version_ = -1;
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PARAMETER_STORE_H_
