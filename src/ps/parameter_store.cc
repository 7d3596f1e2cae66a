#include "ps/parameter_store.h"

#include <absl/cleanup/cleanup.h>
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "common/finite.h"
#include "common/strings.h"
#include "ps/placement.h"
#include "ps/step_math.h"
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
    if (!rpc::AllFinite(t)) return name;
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

// The blocks a snapshot cuts a table's rows into.
constexpr size_t kRowsPerBlock = 1 << 16;

// Tables of `specs` (from a model or a checkpoint), optimized by
// `optimizer` unless a spec names its own.
StatusOr<std::map<std::string, std::unique_ptr<EmbeddingTable>>> MakeTables(
    const google::protobuf::RepeatedPtrField<proto::EmbeddingTableSpec>& specs,
    const proto::OptimizerConfig& optimizer) {
  std::map<std::string, std::unique_ptr<EmbeddingTable>> tables;
  for (const proto::EmbeddingTableSpec& spec : specs) {
    EDL_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTable> table,
                         EmbeddingTable::Create(spec, optimizer));
    if (!tables.emplace(spec.name(), std::move(table)).second) {
      return absl::InvalidArgumentError(StrCat("embedding table '", spec.name(), "' twice"));
    }
  }
  return tables;
}

// A table of a checkpoint and one of the model agree when their rows do.
bool SameRows(const proto::EmbeddingTableSpec& a, const proto::EmbeddingTableSpec& b) {
  return a.dim() == b.dim() && a.dtype() == b.dtype() && a.num_rows() == b.num_rows();
}

std::string DescribeTable(const proto::EmbeddingTableSpec& spec) {
  return StrCat("'", spec.name(), "' (dimension ", spec.dim(), ", ",
                proto::DataType_Name(spec.dtype()),
                spec.num_rows() > 0 ? StrCat(", ", spec.num_rows(), " rows") : "", ")");
}

}  // namespace

// The servers' optimizers step float32 and float64 parameters; a buffer
// may be of any type the wire carries.
Status CheckTrainable(const std::string& name, const torch::Tensor& t) {
  if (t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kFloat64) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      StrCat("parameter '", name, "' is ", c10::toString(t.scalar_type()),
             "; the parameter servers train float32 and float64 parameters",
             t.is_floating_point() ? " (keep the model in float32)" : ""));
}

ParameterStore::ParameterStore(ParameterStoreOptions options)
    : options_(std::move(options)),
      instance_(PickInstance(options_.instance)),
      optimizer_config_(OptimizerConfigOf(options_.optimizer)),
      base_lr_(std::visit([](const auto& o) { return static_cast<double>(o.lr()); },
                          options_.optimizer)) {}

Status ParameterStore::Init(const proto::ModelValues& values, bool* accepted, int64_t* version) {
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors parameters, rpc::DecodeTensors(values.parameters()));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors buffers, rpc::DecodeTensors(values.buffers()));
  std::optional<ShardSnapshot> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *accepted = !initialized_;
    if (initialized_) {
      *version = version_;
      return from_checkpoint_ ? CheckOfferedLocked(parameters, buffers, values) : absl::OkStatus();
    }
    auto tables = MakeTables(values.embedding_tables(), optimizer_config_);
    if (!tables.ok()) {
      *accepted = false;
      return tables.status();
    }
    std::vector<torch::Tensor> trainable;
    for (auto& [name, t] : parameters) {
      if (Status trainable_type = CheckTrainable(name, t); !trainable_type.ok()) {
        *accepted = false;
        return trainable_type;
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
    tables_ = std::move(tables).value();
    initialized_ = true;
    version_ = values.version();
    *version = version_;
    if (options_.on_snapshot) snapshot = SnapshotLocked();
  }
  Deliver(std::move(snapshot));
  return absl::OkStatus();
}

Status ParameterStore::CheckOfferedLocked(const rpc::NamedTensors& parameters,
                                          const rpc::NamedTensors& buffers,
                                          const proto::ModelValues& values) const {
  EDL_RETURN_IF_ERROR(CheckSameTensors("parameter", parameters, parameters_));
  EDL_RETURN_IF_ERROR(CheckSameTensors("buffer", buffers, buffers_));
  for (const proto::EmbeddingTableSpec& spec : values.embedding_tables()) {
    auto it = tables_.find(spec.name());
    if (it == tables_.end()) {
      return absl::FailedPreconditionError(
          StrCat("the checkpoint this parameter server was initialized from lacks the model's "
                 "embedding table ",
                 DescribeTable(spec)));
    }
    if (!SameRows(spec, it->second->spec())) {
      return absl::FailedPreconditionError(StrCat("the model's embedding table ",
                                                  DescribeTable(spec),
                                                  " differs from the "
                                                  "checkpoint's ",
                                                  DescribeTable(it->second->spec())));
    }
  }
  if (static_cast<size_t>(values.embedding_tables_size()) != tables_.size()) {
    for (const auto& [name, table] : tables_) {
      bool offered = false;
      for (const auto& spec : values.embedding_tables()) offered |= spec.name() == name;
      if (!offered) {
        return absl::FailedPreconditionError(
            StrCat("the checkpoint this parameter server was initialized from holds embedding "
                   "table '",
                   name, "' that the model does not have"));
      }
    }
  }
  return absl::OkStatus();
}

void ParameterStore::RefreshSnapshotLocked() {
  if (snapshot_version_ == version_ && snapshot_ != nullptr) return;
  // A snapshot no pull holds any longer (none can take it without the
  // lock) is written over: its tensors' bytes keep their room, and nothing
  // is allocated for the next version.
  if (snapshot_ == nullptr || snapshot_.use_count() > 1) {
    snapshot_ = std::make_shared<proto::ModelValues>();
  }
  proto::ModelValues* values = snapshot_.get();
  values->Clear();
  values->set_version(version_);
  for (const auto& [name, t] : parameters_) {
    // Encoding a tensor we own cannot fail: its dtype was accepted at Init.
    rpc::EncodeTensor(name, t, values->add_parameters()).IgnoreError();
  }
  for (const auto& [name, t] : buffers_) {
    rpc::EncodeTensor(name, t, values->add_buffers()).IgnoreError();
  }
  for (const auto& [name, table] : tables_) *values->add_embedding_tables() = table->spec();
  snapshot_version_ = version_;
}

void ParameterStore::StopWaiting() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_waiting_ = true;
  }
  stepped_.notify_all();
}

Status ParameterStore::Pull(const proto::PullRequest& request, proto::PullResponse* out,
                            std::shared_ptr<const proto::ModelValues>* values) {
  out->Clear();
  if (values != nullptr) values->reset();
  std::shared_ptr<const proto::ModelValues> snapshot;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto current = [&] {
      return initialized_ && request.known_version() == version_ &&
             request.known_instance() == instance_;
    };
    if (request.wait_ms() > 0 && current() && !stop_waiting_) {
      const auto wait = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(request.wait_ms()), kMaxPullWait);
      stepped_.wait_for(lock, wait, [&] { return !current() || stop_waiting_; });
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
  if (values != nullptr) {
    *values = std::move(snapshot);
    return absl::OkStatus();
  }
  // Copy outside the lock: snapshots are immutable.
  *out->mutable_values() = *snapshot;
  return absl::OkStatus();
}

StatusOr<std::vector<ParameterStore::TableShape>> ParameterStore::ShapesLocked(
    const google::protobuf::RepeatedPtrField<proto::EmbeddingRows>& tables) const {
  if (!initialized_) {
    return absl::FailedPreconditionError("parameter server is not initialized yet");
  }
  std::vector<TableShape> shapes;
  shapes.reserve(static_cast<size_t>(tables.size()));
  for (const proto::EmbeddingRows& rows : tables) {
    auto it = tables_.find(rows.table());
    if (it == tables_.end()) {
      return absl::InvalidArgumentError(
          StrCat("rows of embedding table '", rows.table(), "', which the model does not have"));
    }
    const proto::EmbeddingTableSpec& spec = it->second->spec();
    shapes.push_back({spec.dtype(), spec.num_rows(), it->second->row_bytes()});
  }
  return shapes;
}

Status ParameterStore::CheckRows(const proto::EmbeddingRows& rows, const TableShape& shape,
                                 bool values) const {
  const size_t n = static_cast<size_t>(rows.ids_size());
  absl::flat_hash_set<int64_t> seen;
  if (values) seen.reserve(n);
  for (int64_t id : rows.ids()) {
    if (shape.num_rows > 0 && (id < 0 || id >= shape.num_rows)) {
      return absl::InvalidArgumentError(StrCat("embedding table '", rows.table(), "': id ", id,
                                               " outside [0, ", shape.num_rows, ")"));
    }
    // A pull may name an id twice (it reads the row twice); a gradient may
    // not (it would apply twice).
    if (values && !seen.insert(id).second) {
      return absl::InvalidArgumentError(
          StrCat("embedding table '", rows.table(), "': id ", id, " twice in one request"));
    }
    if (options_.num_ps > 1 && ps::RowShardOf(id, options_.num_ps) != options_.ps_id) {
      return absl::InvalidArgumentError(
          StrCat("embedding table '", rows.table(), "': row ", id, " is held by parameter server ",
                 ps::RowShardOf(id, options_.num_ps), ", not ", options_.ps_id));
    }
  }
  if (!values) return absl::OkStatus();
  if (rows.values().size() != n * shape.row_bytes) {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", rows.table(), "': ", rows.values().size(),
               " bytes of gradients for ", n, " rows of ", shape.row_bytes, " bytes"));
  }
  const std::string& bytes = rows.values();
  if (!(shape.dtype == proto::DT_FLOAT64 ? AllFiniteFloat64(bytes.data(), bytes.size() / 8)
                                         : AllFiniteFloat32(bytes.data(), bytes.size() / 4))) {
    return absl::InvalidArgumentError(StrCat("the gradient of embedding table '", rows.table(),
                                             "' holds non-finite values; nothing applied"));
  }
  return absl::OkStatus();
}

Status ParameterStore::CheckRequestRows(
    const google::protobuf::RepeatedPtrField<proto::EmbeddingRows>& tables, bool values) const {
  if (tables.empty()) return absl::OkStatus();
  std::vector<TableShape> shapes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_ASSIGN_OR_RETURN(shapes, ShapesLocked(tables));
  }
  // A table's shape is fixed for the job: the rows are checked unlocked.
  for (int i = 0; i < tables.size(); ++i) {
    EDL_RETURN_IF_ERROR(CheckRows(tables[i], shapes[static_cast<size_t>(i)], values));
  }
  return absl::OkStatus();
}

Status ParameterStore::PullRows(const proto::PullRowsRequest& request,
                                proto::PullRowsResponse* out) {
  out->Clear();
  EDL_RETURN_IF_ERROR(CheckRequestRows(request.tables(), /*values=*/false));
  std::lock_guard<std::mutex> lock(mu_);
  for (const proto::EmbeddingRows& rows : request.tables()) {
    const EmbeddingTable& table = *tables_.at(rows.table());
    proto::EmbeddingRows* answer = out->add_tables();
    answer->set_table(rows.table());
    std::string* values = answer->mutable_values();
    values->resize(static_cast<size_t>(rows.ids_size()) * table.row_bytes());
    table.Read(rows.ids().data(), static_cast<size_t>(rows.ids_size()), values->data());
  }
  out->set_version(version_);
  out->set_instance(instance_);
  return absl::OkStatus();
}

void ParameterStore::ApplySparseLocked(const std::vector<const proto::EmbeddingRows*>& sparse,
                                       double scale, int64_t from) {
  const double scheduled = options_.lr_schedule.LearningRate(base_lr_, from);
  for (const proto::EmbeddingRows* rows : sparse) {
    EmbeddingTable& table = *tables_.at(rows->table());
    const double lr = table.spec().has_optimizer() ? table.base_lr() : scheduled;
    table.Apply(rows->ids().data(), static_cast<size_t>(rows->ids_size()), rows->values().data(),
                scale, version_, lr);
  }
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
    if (it->second.scalar_type() == torch::kBool) {
      // What changed, per element: set (1), cleared (-1) or kept (0).
      if (b.update.sizes() != it->second.sizes() || b.update.scalar_type() != torch::kInt8) {
        return absl::InvalidArgumentError(StrCat(
            "buffer update '", name, "' has shape ", c10::str(b.update.sizes()), " and type ",
            c10::toString(b.update.scalar_type()), "; the parameter server holds a bool buffer of ",
            c10::str(it->second.sizes()), ", updated by a Char (int8) tensor of that shape"));
      }
    } else {
      EDL_RETURN_IF_ERROR(CheckLike("buffer update", name, b.update, it->second));
    }
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
  if (!options_.lr_schedule.is_constant()) {
    const double lr = options_.lr_schedule.LearningRate(base_lr_, version_);
    for (torch::optim::OptimizerParamGroup& group : optimizer_->param_groups()) {
      group.options().set_lr(lr);
    }
  }
  // The gradients are the pushes' tensors: let go of them after the step,
  // for the next pushes to be decoded into (rpc::DecodeTensors' reuse).
  absl::Cleanup let_go = [this] {
    for (auto& [name, p] : parameters_) p.mutable_grad() = torch::Tensor();
  };
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
  for (const auto& [name, b] : buffers) FoldUpdate(buffers_[name], b.update, b.decay);
  if (!buffers.empty()) snapshot_version_ = -1;  // the snapshot no longer holds these values
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
  // The tensors were decoded for their pushes: ours to sum into, each
  // parameter's in the pushes' order.
  std::map<std::string, std::vector<torch::Tensor*>> terms;
  for (Contribution& c : pushes) {
    for (auto& [name, g] : c.gradients) terms[name].push_back(&g);
  }
  rpc::NamedTensors sum;
  for (auto& [name, t] : terms) {
    SumAndDivide(t, divisor);
    sum.emplace(name, *t.front());
  }
  const int64_t from = version_;
  Status s = StepLocked(sum);
  if (s.ok()) {
    for (const Contribution& c : pushes) UpdateBuffersLocked(c.buffers);
    // Each table's rows summed over the pushes, in the same order.
    std::map<std::string, std::vector<const proto::EmbeddingRows*>> parts;
    for (const Contribution& c : pushes) {
      for (const proto::EmbeddingRows& rows : c.sparse) parts[rows.table()].push_back(&rows);
    }
    // A table's rows from one push (ids unique, CheckRows) are their own sum.
    std::deque<proto::EmbeddingRows> sums;  // `apply` points into it: no reallocation
    std::vector<const proto::EmbeddingRows*> apply;
    for (const auto& [name, rows] : parts) {
      if (rows.size() == 1) {
        apply.push_back(rows.front());
        continue;
      }
      proto::EmbeddingRows& total = sums.emplace_back();
      total.set_table(name);
      tables_.at(name)->Sum(rows, &total);
      apply.push_back(&total);
    }
    ApplySparseLocked(apply, 1.0 / divisor, from);
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
  std::shared_ptr<const proto::ModelValues> values;
  Status s = Push(request, std::move(gradients), std::move(updates), out, &values);
  // Copied outside the lock, as a pull's: snapshots are immutable.
  if (values != nullptr) *out->mutable_values() = *values;
  return s;
}

Status ParameterStore::Push(const proto::PushRequest& request, rpc::NamedTensors gradients,
                            rpc::NamedTensors updates, proto::PushResponse* out,
                            std::shared_ptr<const proto::ModelValues>* values) {
  values->reset();
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
  EDL_RETURN_IF_ERROR(CheckRequestRows(request.sparse_gradients(), /*values=*/true));
  std::optional<ShardSnapshot> snapshot;
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t version_before = version_;
    s = PushLocked(request, gradients, buffers, out, &snapshot);
    if (s.ok() && request.want_values() && out->accepted() && !out->duplicate() &&
        version_ != version_before) {
      RefreshSnapshotLocked();
      *values = snapshot_;
    }
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
  if (options_.max_version > 0 && version_ >= options_.max_version) {
    out->set_max_steps_reached(true);
    return absl::OkStatus();
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
    double scale = 1;
    if (options_.lr_staleness_modulation && staleness > 0) {
      for (auto& [name, g] : gradients) g.div_(static_cast<double>(staleness + 1));
      scale = 1.0 / static_cast<double>(staleness + 1);
    }
    EDL_RETURN_IF_ERROR(StepLocked(gradients));
    UpdateBuffersLocked(buffers);
    ApplySparseLocked(
        {request.sparse_gradients().pointer_begin(), request.sparse_gradients().pointer_end()},
        scale, version_before);
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
    c.sparse.assign(request.sparse_gradients().begin(), request.sparse_gradients().end());
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
  out->set_learning_rate(options_.lr_schedule.LearningRate(base_lr_, version_before));
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
  for (const auto& [name, table] : tables_) {
    s.tables.push_back(table->spec());
    std::vector<proto::EmbeddingRowBlock> blocks = table->Snapshot(kRowsPerBlock);
    std::move(blocks.begin(), blocks.end(), std::back_inserter(s.blocks));
  }
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
  const bool slots_apply = SlotsCarryOver(checkpoint.optimizer(), optimizer_config_);
  EDL_ASSIGN_OR_RETURN(Tables tables, LoadTables({&checkpoint}));
  return Load(parameters, std::move(buffers), checkpoint.version(), slots_apply, std::move(applied),
              std::move(tables));
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
      if (ps::ShardOf(name, options_.num_ps) != options_.ps_id) continue;
      if (!parameters.emplace(name, &p).second) {
        return absl::InvalidArgumentError(
            StrCat("parameter '", name, "' appears in two checkpoint files"));
      }
    }
    for (const auto& b : shard.buffers()) {
      if (ps::ShardOf(b.name(), options_.num_ps) != options_.ps_id) continue;
      EDL_ASSIGN_OR_RETURN(torch::Tensor t, rpc::DecodeTensor(b));
      if (!buffers.emplace(b.name(), std::move(t)).second) {
        return absl::InvalidArgumentError(
            StrCat("buffer '", b.name(), "' appears in two checkpoint files"));
      }
    }
  }
  const bool slots_apply = SlotsCarryOver(shards[0].optimizer(), optimizer_config_);
  std::vector<const proto::ShardCheckpoint*> files;
  for (const auto& shard : shards) files.push_back(&shard);
  EDL_ASSIGN_OR_RETURN(Tables tables, LoadTables(files));
  return Load(parameters, std::move(buffers), shards[0].version(), slots_apply, {},
              std::move(tables));
}

StatusOr<ParameterStore::Tables> ParameterStore::LoadTables(
    const std::vector<const proto::ShardCheckpoint*>& shards) const {
  // The tables as the first file declares them (every file declares all).
  const proto::ShardCheckpoint& first = *shards.front();
  for (const proto::ShardCheckpoint* shard : shards) {
    bool same = shard->embedding_tables_size() == first.embedding_tables_size();
    for (int i = 0; same && i < first.embedding_tables_size(); ++i) {
      same = shard->embedding_tables(i).name() == first.embedding_tables(i).name() &&
             SameRows(shard->embedding_tables(i), first.embedding_tables(i));
    }
    if (!same) {
      return absl::InvalidArgumentError(StrCat("checkpoint files of parameter servers ",
                                               first.ps_id(), " and ", shard->ps_id(),
                                               " declare different embedding tables"));
    }
  }
  // A table without an optimizer of its own follows the model's: its rows
  // were stepped by the checkpoint's model optimizer.
  EDL_ASSIGN_OR_RETURN(Tables tables, MakeTables(first.embedding_tables(), optimizer_config_));
  std::map<std::string, const proto::OptimizerConfig*> written;
  for (const proto::EmbeddingTableSpec& spec : first.embedding_tables()) {
    written[spec.name()] = spec.has_optimizer() ? &spec.optimizer() : &first.optimizer();
  }
  const int num_ps = options_.num_ps;
  const int ps_id = options_.ps_id;
  auto mine = [num_ps, ps_id](int64_t id) { return ps::RowShardOf(id, num_ps) == ps_id; };
  for (const proto::ShardCheckpoint* shard : shards) {
    for (const proto::EmbeddingRowBlock& block : shard->embedding_blocks()) {
      auto it = tables.find(block.rows().table());
      if (it == tables.end()) {
        return absl::InvalidArgumentError(StrCat("checkpoint rows of embedding table '",
                                                 block.rows().table(),
                                                 "', which it does not declare"));
      }
      EDL_RETURN_IF_ERROR(it->second->Load(block, mine, *written.at(it->first), shard->version()));
    }
  }
  return tables;
}

Status ParameterStore::Load(const std::map<std::string, const proto::ParameterState*>& parameters,
                            rpc::NamedTensors buffers, int64_t version, bool slots_apply,
                            std::map<int64_t, int64_t> applied, Tables tables) {
  rpc::NamedTensors values;
  std::vector<torch::Tensor> trainable;
  for (const auto& [name, state] : parameters) {
    EDL_ASSIGN_OR_RETURN(torch::Tensor t, rpc::DecodeTensor(state->value()));
    EDL_RETURN_IF_ERROR(CheckTrainable(name, t));
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
  tables_ = std::move(tables);
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

double ParameterStore::learning_rate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.lr_schedule.LearningRate(base_lr_, version_);
}

bool ParameterStore::initialized() const {
  std::lock_guard<std::mutex> lock(mu_);
  return initialized_;
}

std::map<std::string, EmbeddingCounters> ParameterStore::embedding_counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, EmbeddingCounters> counters;
  for (const auto& [name, table] : tables_) counters[name] = table->counters();
  return counters;
}

ParameterStore::DenseSize ParameterStore::dense_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  DenseSize size;
  for (const auto* tensors : {&parameters_, &buffers_}) {
    for (const auto& [name, t] : *tensors) {
      size.elements += t.numel();
      size.bytes += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  return size;
}

}  // namespace elasticdl::ps
