// One parameter-server shard's part of an embedding table: rows keyed by
// int64 id, with the optimizer's per-row slots, updated sparsely.
//
// Rows: a row the shard does not hold reads as its initial value, a function
// of (table seed, id) alone (EmbeddingInitializer), so every shard, restart
// and number of shards agrees on it without storing it. A row is created the
// first time a gradient reaches it; evaluation and prediction therefore never
// grow a table. With admission (spec.admit_after = K > 1) a row is created at
// the K-th minibatch that trains it; until then it reads unadmitted_value
// and its gradients are dropped (counted).
//
// Updates: Apply() steps the table's optimizer on the rows of a gradient and
// on those only (lazy semantics): SGD (momentum, Nesterov, weight decay),
// Adam (amsgrad), AdamW, Adagrad, RMSprop and FTRL-proximal. Each row counts its
// own steps, so Adam's bias correction and Adagrad's learning-rate decay of
// a row are those of a dense optimizer that saw only that row's minibatches:
// a row first trained late starts like a fresh one, not with a bias
// correction of 1. The arithmetic is LibTorch's (same order, same rounding
// per element) for the optimizers it has.
//
// Eviction: rows not updated for spec.evict_after_versions model versions
// are dropped; beyond spec.max_rows, the least recently updated are dropped
// (down to 15/16 of the budget, so that eviction is amortized). A dropped
// row starts again from its initial value, admission included.
//
// Not thread-safe: the ParameterStore serializes calls under its lock.
#ifndef ELASTICDL_PS_EMBEDDING_TABLE_H_
#define ELASTICDL_PS_EMBEDDING_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::ps {

struct EmbeddingCounters {
  int64_t rows = 0;                // rows held now
  int64_t created = 0;             // rows created (admitted)
  int64_t evicted_by_age = 0;      // dropped for not being updated
  int64_t evicted_by_budget = 0;   // dropped beyond max_rows
  int64_t awaiting_admission = 0;  // ids trained, not yet admitted
  int64_t dropped_gradients = 0;   // gradient rows of ids not admitted
  int64_t bytes = 0;               // rows, slots, per-row state and the index
};

class EmbeddingTable {
 public:
  virtual ~EmbeddingTable() = default;

  // A table from its spec; `model_optimizer` applies unless the spec names
  // one. INVALID_ARGUMENT naming the table for a dimension below 1, a dtype
  // other than float32/float64, a bad initializer, a bad optimizer.
  static StatusOr<std::unique_ptr<EmbeddingTable>> Create(
      const proto::EmbeddingTableSpec& spec, const proto::OptimizerConfig& model_optimizer);

  const proto::EmbeddingTableSpec& spec() const { return spec_; }
  const proto::OptimizerConfig& optimizer() const { return optimizer_; }
  // The learning rate its optimizer is configured with.
  double base_lr() const;
  int64_t dim() const { return spec_.dim(); }
  // Bytes of one row's values.
  virtual size_t row_bytes() const = 0;

  // Writes the rows of `ids` to `out` (n * row_bytes()).
  virtual void Read(const int64_t* ids, size_t n, char* out) const = 0;

  // Applies the gradient rows `grads` (n * row_bytes(), for unique `ids`),
  // each multiplied by `scale`, at model version `version` with learning
  // rate `lr` (base_lr(), or what a schedule makes of it), then evicts what
  // the spec's policy says.
  virtual void Apply(const int64_t* ids, size_t n, const char* grads, double scale, int64_t version,
                     double lr) = 0;

  // Sums `parts` (rows of this table; an id may be in several) into `*out`'s
  // ids and values: each id once, in order of first appearance, its rows
  // added in the order of `parts`.
  virtual void Sum(const std::vector<const proto::EmbeddingRows*>& parts,
                   proto::EmbeddingRows* out) const = 0;

  // The rows held, with slots and steps, in blocks of at most
  // `rows_per_block` rows.
  virtual std::vector<proto::EmbeddingRowBlock> Snapshot(size_t rows_per_block) const = 0;

  // Adds the rows of `block` for which `keep(id)` holds, at version
  // `version`. `written` is the optimizer that stepped the rows: where its
  // state carries over to this table's (SlotsCarryOver), the rows keep
  // their slots and steps, and a slot this optimizer keeps that `written`
  // did not (amsgrad's maximum, a momentum buffer, ...) starts as a new
  // row's does; else every row starts with fresh slots. INVALID_ARGUMENT
  // for a block that does not fit the table (sizes, a slot `written` keeps
  // missing, a row already held).
  virtual Status Load(const proto::EmbeddingRowBlock& block,
                      const std::function<bool(int64_t)>& keep,
                      const proto::OptimizerConfig& written, int64_t version) = 0;

  virtual EmbeddingCounters counters() const = 0;

 protected:
  EmbeddingTable(proto::EmbeddingTableSpec spec, proto::OptimizerConfig optimizer)
      : spec_(std::move(spec)), optimizer_(std::move(optimizer)) {}

  const proto::EmbeddingTableSpec spec_;
  const proto::OptimizerConfig optimizer_;
};

// The slots `optimizer` keeps per row, in order ("momentum_buffer",
// "exp_avg", "sum", "accum", ...), and whether it counts steps per row.
std::vector<std::string> SlotNames(const proto::OptimizerConfig& optimizer);
bool CountsSteps(const proto::OptimizerConfig& optimizer);

// Whether an optimizer configured as `now` continues from the state one
// configured as `written` kept (a checkpoint's): of the same kind, or Adam
// and AdamW, whose states are the same (PyTorch's load_state_dict carries
// one's into the other). Hyperparameters may differ; slots one keeps and
// the other does not are dropped or start fresh.
bool SlotsCarryOver(const proto::OptimizerConfig& written, const proto::OptimizerConfig& now);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_EMBEDDING_TABLE_H_
