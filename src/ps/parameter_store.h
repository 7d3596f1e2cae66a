// One parameter-server shard's state: the dense parameters and buffers it
// owns, their version, and the optimizer that applies pushed gradients.
//
// Versions: a shard starts at version 0 when initialized and adds one per
// optimizer step. Async mode steps on every push, refusing gradients computed
// on a version more than `max_staleness` steps old. Sync mode averages
// several accepted pushes per step — `grads_to_wait` of them, or with
// grads_to_wait = 0 one of every worker of the training group (SetGroup) —
// and refuses gradients computed on a version more than
// `staleness_tolerance` steps old. A refused push is answered accepted=false:
// the worker pulls and computes again. The pushes of a step are summed in the
// order of their tags, whatever order they arrived in, so a step is the same
// on every run.
//
// Buffers (BatchNorm statistics, counters) are not trained by gradients: a
// push carries, per buffer, an update u and a decay d, and the buffer b
// becomes d * b + u, one push after another (a step's pushes in tag order).
// An exponential moving average updated by many workers that pulled the same
// value thus stays one, as if their minibatches had been seen in sequence.
//
// Non-finite gradients or buffer updates are refused (INVALID_ARGUMENT).
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
// Embedding tables (ModelValues.embedding_tables, see embedding_table.h):
// the rows of this shard (ps::RowShardOf) are read by PullRows and trained
// by a push's sparse gradients, under the same version, tags, staleness
// rules and sync-mode steps as the dense parameters: a sync step sums the
// rows of its pushes in tag order and scales them as it does the dense
// gradients.
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

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/optimizer.h"
#include "ps/embedding_table.h"
#include "ps/shard_state.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {

struct ParameterStoreOptions {
  // The update rule, from the zoo's optimizer().
  OptimizerSpec optimizer = torch::optim::SGDOptions(0.1);
  // The learning rate of each step: the step from version v uses
  // lr_schedule.LearningRate(optimizer's lr, v) for the dense parameters and
  // the embedding tables that follow the model's optimizer. Constant by
  // default. A table with an optimizer of its own keeps that one's lr.
  LearningRateSchedule lr_schedule;
  // > 0: no step takes the version beyond this (the job's max_steps); pushes
  // that would are refused with max_steps_reached. 0: no limit.
  int64_t max_version = 0;
  // Apply each push at once (true) or average several pushes (false).
  bool use_async = true;
  // Async mode: how many versions old a push's base version may be;
  // negative: any. 1 keeps every applied gradient within one step of the
  // model it is applied to, which plain SGD tolerates where older ones
  // diverge at large learning rates.
  int max_staleness = -1;
  // Sync mode: accepted pushes per step; 0: one push from every worker of
  // the group (SetGroup), whatever their number.
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

// OK for a parameter the servers' optimizers can step (float32, float64);
// INVALID_ARGUMENT naming it otherwise.
Status CheckTrainable(const std::string& name, const torch::Tensor& t);

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

  // Pulls waiting for a step answer at once, and later ones do not wait: the
  // server is going, and its calls must end for it to go.
  void StopWaiting();

  // Fills `out` (cleared first) with `initialized`, the current version and instance and,
  // unless the caller's known_version and known_instance are both current,
  // all values. When they are current and request.wait_ms() > 0, first waits
  // up to that long (at most 5 s) for a step, or until StopWaiting. With `values` given, the
  // values (an immutable snapshot) are handed there instead of copied into
  // `out` (null when there are none to give).
  Status Pull(const proto::PullRequest& request, proto::PullResponse* out,
              std::shared_ptr<const proto::ModelValues>* values = nullptr);

  // Rows of embedding tables (`out` cleared first), with the current
  // version and instance. FAILED_PRECONDITION before Init;
  // INVALID_ARGUMENT for an unknown table, an id twice, an id out of the
  // table's range or one another shard holds.
  Status PullRows(const proto::PullRowsRequest& request, proto::PullRowsResponse* out);

  // Applies (or, in sync mode, accumulates) pushed gradients and buffer
  // deltas. `out` is cleared first. In this order of checks; each refusal applies nothing:
  //  - FAILED_PRECONDITION before Init;
  //  - INVALID_ARGUMENT for malformed tensors, names the shard does not
  //    hold, wrong shapes or types, a negative minibatch; sparse gradients
  //    of an unknown table, of the wrong size, with an id twice, out of
  //    range or of another shard;
  //  - tag (T, i) with i below the minibatches of T applied: accepted and
  //    duplicate (nothing applied, buffer deltas neither);
  //  - tag (T, i) with i above them: FAILED_PRECONDITION naming both;
  //  - `instance` not ours: accepted=false. Instance 0 is "unknown": it
  //    matches only on untagged pushes (tools and tests that do not track
  //    instances); tagged pushes must name the instance they pulled from;
  //  - base_version newer than ours: INVALID_ARGUMENT;
  //  - base_version too stale (max_staleness, staleness_tolerance):
  //    accepted=false.
  // Then the push is applied (sync mode: kept, its buffer updates too, until
  // the step is complete; step_pending says it is not yet) and its tag
  // counts as applied; with want_values, a push that made a step is answered
  // with the values after it. Non-finite values are INVALID_ARGUMENT, checked
  // before anything else of the push.
  Status Push(const proto::PushRequest& request, proto::PushResponse* out);
  // Push with the request's dense gradients and buffer updates decoded by
  // the caller (rpc::DecodeTensors, from wherever their bytes lie); the
  // values it answers with handed to `values` as Pull's are.
  Status Push(const proto::PushRequest& request, rpc::NamedTensors gradients,
              rpc::NamedTensors updates, proto::PushResponse* out,
              std::shared_ptr<const proto::ModelValues>* values);

  // Sync mode: applies the gradients still waiting for their step (at the
  // end of training). With a fixed grads_to_wait they are divided by
  // grads_to_wait as in a full step, so every minibatch weighs the same;
  // with a group, by their number. No-op when none wait. Sets *version to
  // the current version.
  Status Flush(int64_t* version);

  // Sync mode with grads_to_wait = 0: the workers a step waits for. A step
  // is complete once every worker of the group has pushed to it (pushes of
  // other workers count too) — a gradient, or a minibatch this shard has
  // applied before (acknowledged as a duplicate): a worker redoing work
  // after a fault does not hold a step back. Until the first group arrives,
  // no step is complete. A generation older than the current one's is
  // ignored.
  void SetGroup(int64_t generation, const std::vector<int32_t>& workers);

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
  // parameters and buffers it owns (ps::ShardOf for options.num_ps), with
  // their optimizer state when it carries over to ours (SlotsCarryOver: the
  // same kind, or Adam and AdamW; otherwise the optimizer starts fresh), and
  // the version.
  // Applied minibatches start empty (they belong to the other job).
  // INVALID_ARGUMENT when the files disagree on the version or a name
  // appears twice; FAILED_PRECONDITION when already initialized.
  Status InitFromCheckpoints(const std::vector<proto::ShardCheckpoint>& shards);

  // Minibatches applied per task (a prefix each), including sync-mode pushes
  // accumulated but not stepped.
  std::map<int64_t, int64_t> applied() const;

  int64_t version() const;
  // The learning rate of the next step (of the dense parameters and of the
  // tables that follow the model's optimizer).
  double learning_rate() const;
  bool initialized() const;
  // Each table's counters (rows, admission, eviction, bytes), by name.
  std::map<std::string, EmbeddingCounters> embedding_counters() const;
  // The dense parameters and buffers: how many elements, how many bytes.
  struct DenseSize {
    int64_t elements = 0;
    int64_t bytes = 0;
  };
  DenseSize dense_size() const;
  uint64_t instance() const { return instance_; }

 private:
  // A push's buffer updates and their decays.
  struct BufferUpdate {
    torch::Tensor update;
    double decay = 1;
  };
  using BufferUpdates = std::map<std::string, BufferUpdate>;
  // A sync-mode push waiting for its step.
  struct Contribution {
    bool tagged = false;
    int64_t task = 0;
    int64_t minibatch = 0;
    int64_t arrival = 0;
    int32_t worker = 0;
    rpc::NamedTensors gradients;
    BufferUpdates buffers;
    std::vector<proto::EmbeddingRows> sparse;
  };
  using Tables = std::map<std::string, std::unique_ptr<EmbeddingTable>>;

  Status ValidateLocked(const rpc::NamedTensors& gradients, const BufferUpdates& buffers) const;
  // What rows of a table are checked against; fixed when the table is made.
  struct TableShape {
    proto::DataType dtype;
    int64_t num_rows;  // the ids' range; 0: any id
    size_t row_bytes;
  };
  // The shapes of the tables that `tables` name, in order; an error for a
  // table the model does not have.
  StatusOr<std::vector<TableShape>> ShapesLocked(
      const google::protobuf::RepeatedPtrField<proto::EmbeddingRows>& tables) const;
  // Checks rows of a table: ids of this shard in range, and, with `values`
  // (a gradient), unique, of the right size and finite. Reads every id (and value), so it
  // runs without the lock.
  Status CheckRows(const proto::EmbeddingRows& rows, const TableShape& shape, bool values) const;
  // ShapesLocked under the lock, then CheckRows of every table outside it.
  Status CheckRequestRows(const google::protobuf::RepeatedPtrField<proto::EmbeddingRows>& tables,
                          bool values) const;
  // Applies sparse gradients (each row times `scale`) at the current version,
  // with the learning rate of the step from version `from`: a table that
  // follows the model's optimizer follows its schedule as the dense
  // parameters do; one with an optimizer of its own keeps that optimizer's
  // lr (in PyTorch's terms, another optimizer, without a scheduler).
  void ApplySparseLocked(const std::vector<const proto::EmbeddingRows*>& sparse, double scale,
                         int64_t from);
  Status StepLocked(const std::map<std::string, torch::Tensor>& gradients);
  void UpdateBuffersLocked(const BufferUpdates& buffers);
  // Whether the pending pushes make a complete step.
  bool StepCompleteLocked() const;
  // Takes the step if it is complete, and a snapshot if one is due.
  void StepIfCompleteLocked(std::optional<ShardSnapshot>* snapshot);
  // Applies the pending pushes as one step (gradients summed in tag order
  // and divided by `divisor`, then the buffer updates in that order) and
  // clears them.
  Status FlushPendingLocked(int divisor);
  void RefreshSnapshotLocked();
  ShardSnapshot SnapshotLocked() const;
  // Installs parameters (with optimizer state when `slots_apply`), buffers,
  // version and applied as the initial state.
  Status Load(const std::map<std::string, const proto::ParameterState*>& parameters,
              rpc::NamedTensors buffers, int64_t version, bool slots_apply,
              std::map<int64_t, int64_t> applied, Tables tables);
  // The tables of checkpoint `shards` (all of one version), with the rows
  // this shard owns.
  StatusOr<Tables> LoadTables(const std::vector<const proto::ShardCheckpoint*>& shards) const;
  Status PushLocked(const proto::PushRequest& request, rpc::NamedTensors& gradients,
                    BufferUpdates& buffers, proto::PushResponse* out,
                    std::optional<ShardSnapshot>* snapshot);
  Status CheckOfferedLocked(const rpc::NamedTensors& parameters, const rpc::NamedTensors& buffers,
                            const proto::ModelValues& values) const;
  // Hands a snapshot to options_.on_snapshot if one was taken.
  void Deliver(std::optional<ShardSnapshot> snapshot) const;

  const ParameterStoreOptions options_;
  const uint64_t instance_;
  const proto::OptimizerConfig optimizer_config_;
  // The optimizer's own lr, which lr_schedule scales.
  const double base_lr_;

  mutable std::mutex mu_;
  // Notified when the version changes.
  std::condition_variable stepped_;
  bool stop_waiting_ = false;
  bool initialized_ = false;
  // Initialized from a checkpoint rather than by Init.
  bool from_checkpoint_ = false;
  int64_t version_ = 0;
  std::map<std::string, torch::Tensor> parameters_;
  std::map<std::string, torch::Tensor> buffers_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  Tables tables_;
  // task id -> minibatches applied (or accumulated, in sync mode).
  std::map<int64_t, int64_t> applied_;
  // Sync mode: the pushes accepted since the last step.
  std::vector<Contribution> pending_;
  int64_t arrivals_ = 0;
  // Sync mode with a group: the workers a step waits for, and the group's
  // generation (-1: none received yet); the workers that pushed since the
  // last step (gradients, or minibatches this shard had applied).
  std::set<int32_t> group_;
  int64_t group_generation_ = -1;
  std::set<int32_t> present_;
  // Encoded values of version snapshot_version_, shared by concurrent pulls.
  // Written over in place at the next version when no pull holds it.
  std::shared_ptr<proto::ModelValues> snapshot_;
  int64_t snapshot_version_ = -1;
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PARAMETER_STORE_H_
