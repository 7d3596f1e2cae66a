#include "worker/worker.h"

#include <absl/cleanup/cleanup.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <thread>
#include <utility>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/seed.h"
#include "job/job_spec.h"
#include "job/trained_model.h"
#include "python/python_zoo.h"
#include "rpc/grpc_util.h"
#include "rpc/histogram_codec.h"
#include "rpc/job_credentials.h"
#include "rpc/tensor_codec.h"
#include "zoo/embedding_spec.h"
#include "zoo/zoo_library.h"

namespace elasticdl::worker {
namespace {

// How many minibatches a training pipeline that runs ahead makes before
// the model takes them.
constexpr size_t kMinibatchesAhead = 2;
// AllreduceStrategy: how much lower than the training thread's the pipeline
// thread's priority is (nice values). With every core computing, the
// pipeline then runs mostly while a member waits for its step's reduce
// rather than taking turns from the computing threads, whose delays the
// other members wait for; a training thread that waits for its minibatch
// leaves its core to the pipeline all the same.
constexpr int kCollectivePipelineNiceness = 10;
// ParameterServerStrategy: the same, lowest. The thread reads and parses
// the next task's records (handed out ahead) while the intra-op threads
// compute the current task's last minibatches on every core: it should take
// only the time their serial stretches leave (docs/benchmark-notes.md,
// Training).
constexpr int kParameterServerPipelineNiceness = 19;

// LibTorch's global CPU generator's state, which every draw from it changes.
torch::Tensor GlobalGeneratorState() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

using std::chrono::milliseconds;

constexpr milliseconds kMasterTimeout{30000};
// Between heartbeats: often enough that the master's view of a task's
// progress is fresh when the worker dies.
constexpr milliseconds kMaxHeartbeatInterval{250};
// Heartbeats this far apart mean the process was stopped (their calls to the
// master have a deadline of four intervals).
constexpr milliseconds kStoppedGap{5000};
// A pull waiting for a synchronous step asks again this often, to notice a
// request to stop.
constexpr milliseconds kStepWait{500};
// Longest a worker waits for a step before it computes its next minibatch
// on the version it has (adding it to the same step): a safety valve
// against a step that never completes, at the price of that step's
// determinism. Members that are gone leave the group within a lease.
constexpr auto kStepPatience = std::chrono::seconds(30);

proto::MetricKind ToProto(MetricKind kind) {
  return kind == MetricKind::kAuc ? proto::METRIC_AUC : proto::METRIC_MEAN;
}

}  // namespace

std::optional<std::string> FirstNonFiniteInput(const Example& batch) {
  torch::NoGradGuard no_grad;
  auto scan = [&batch](const std::string& what,
                       const torch::Tensor& t) -> std::optional<std::string> {
    // (A sparse feature, of variable length, is not looked into.)
    if (!t.defined() || !t.is_floating_point() || t.layout() != torch::kStrided ||
        rpc::AllFinite(t)) {
      return std::nullopt;
    }
    if (t.dim() == 0) return what;
    const torch::Tensor rows = torch::isfinite(t).reshape({t.size(0), -1}).all(1).logical_not();
    const int64_t row = rows.nonzero()[0][0].item<int64_t>();
    std::string said = StrCat(what, ", row ", row, " of the minibatch");
    // One origin a row, or the pipeline lost track of them.
    if (static_cast<int64_t>(batch.origins.size()) == t.size(0) &&
        batch.origins[row].file != nullptr) {
      said += StrCat(" (", *batch.origins[row].file, ": record ", batch.origins[row].index, ")");
    }
    return said;
  };
  for (const auto& [name, t] : batch.features) {
    if (std::optional<std::string> found = scan(StrCat("feature '", name, "'"), t)) return found;
  }
  return scan("the labels", batch.labels);
}

Status Worker::DatasetError(const Status& status) const {
  // Damaged records are the data's fault; anything else happened in the
  // zoo's dataset_fn.
  if (status.code() == absl::StatusCode::kDataLoss) return status;
  return program_.Annotate(status, EntryKind::kDatasetFn);
}

WorkerJob WorkerJob::Of(const proto::JobSpec& spec) {
  WorkerJob job;
  job.seed = spec.seed();
  job.minibatch_size = std::max<int64_t>(spec.tasks().minibatch_size(), 1);
  if (spec.fault_tolerance().worker_lease_ms() > 0) {
    job.lease = milliseconds(spec.fault_tolerance().worker_lease_ms());
  }
  job.trained_model = spec.model().trained_model();
  job.predictions_dir = spec.job_dir() + "/predictions";
  if (spec.type() == proto::JOB_TRAINING) job.strategy = spec.strategy();
  job.optimizer = spec.model().optimizer_config();
  job.checkpoint_dir = spec.ps().checkpoint_dir().empty() ? CheckpointsDir(spec.job_dir())
                                                          : spec.ps().checkpoint_dir();
  job.checkpoint_steps = spec.ps().checkpoint_steps();
  job.keep_checkpoint_max = spec.ps().keep_checkpoint_max();
  job.checkpoint_dir_for_init = spec.ps().checkpoint_dir_for_init();
  job.max_steps = spec.tasks().max_steps();
  job.bind_team = !spec.cluster().unbound_workers();
  if (spec.fault_tolerance().collective_timeout_ms() > 0) {
    job.collective_timeout = milliseconds(spec.fault_tolerance().collective_timeout_ms());
  }
  job.model_call_timeout = std::chrono::seconds(spec.fault_tolerance().model_call_timeout_s());
  return job;
}

StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(rpc::JobCredentials credentials, rpc::ReadJobCredentials(options.job_dir));
  const proto::ModelSpec& model = spec.model();
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library,
                       python::OpenZoo(model.zoo_library(), model.zoo_python_dir()));
  ZooProgramNames names;
  names.model_def = model.model_def();
  names.dataset_fn = model.dataset_fn();
  names.loss = model.loss();
  names.optimizer = model.optimizer();
  names.eval_metrics_fn = model.eval_metrics_fn();
  EDL_ASSIGN_OR_RETURN(ZooProgram program,
                       ZooProgram::Resolve(std::move(library), names, model.params()));
  int threads = options.num_threads > 0 ? options.num_threads : spec.workers().threads();
  torch::set_num_threads(std::max(threads, 1));
  WorkerPeers peers = GrpcPeers(options.master_address, credentials, options.job_dir);
  return std::make_unique<Worker>(options, WorkerJob::Of(spec), std::move(program),
                                  std::move(peers));
}

Worker::Worker(WorkerOptions options, WorkerJob job, ZooProgram program, WorkerPeers peers)
    : options_(std::move(options)),
      job_(std::move(job)),
      program_(std::move(program)),
      peers_(std::move(peers)) {
  rows_.set_calls(&calls_);
}

Worker::~Worker() {
  StopHeartbeats();
  if (stuck_.joinable()) stuck_.join();
  // Both use this worker's members.
  if (report_sent_.valid()) report_sent_.wait();
  if (asked_.valid()) asked_.wait();
}

bool Worker::stopping() const {
  return leave_.load() || lost_.load() || (options_.stop != nullptr && options_.stop->load());
}

bool Worker::task_stopping() const { return stopping() || task_revoked_.load(); }

void Worker::BeginTask(const proto::Task& task) {
  std::lock_guard<std::mutex> lock(task_mu_);
  minibatches_done_ = task.minibatches_done();
  attempt_ = task.attempt();
  task_id_ = task.task_id();
  task_revoked_ = false;
}

void Worker::EndTask() {
  std::lock_guard<std::mutex> lock(task_mu_);
  task_id_ = -1;
  task_revoked_ = false;
}

StatusOr<std::optional<Example>> Worker::ProbedPull(Dataset<Example>* batches, bool* free) {
  const torch::Tensor before = GlobalGeneratorState();
  StatusOr<std::optional<Example>> batch = batches->Next();
  *free = batch.ok() && batch->has_value() && torch::equal(before, GlobalGeneratorState());
  return batch;
}

PipelineAhead<Example>& Worker::Ahead() {
  if (!ahead_) {
    const bool collective = job_.strategy != proto::PARAMETER_SERVER_STRATEGY;
    ahead_ = std::make_unique<PipelineAhead<Example>>(
        kMinibatchesAhead,
        collective ? kCollectivePipelineNiceness : kParameterServerPipelineNiceness, &calls_);
  }
  return *ahead_;
}

void Worker::UpdateTeamBinding() {
  if (!job_.bind_team || ahead_ == nullptr || team_binding_failed_) return;
  if (team_binding_ == nullptr) {
    team_binding_ = std::make_unique<TeamBinding>(torch::get_num_threads());
  }
  if (!team_binding_->available()) return;
  const size_t waits = ahead_->TakeWaits();
  const bool keeps_ahead = waits <= 1;
  if (keeps_ahead == team_binding_->bound()) return;
  Status s = keeps_ahead ? team_binding_->Bind() : team_binding_->Unbind();
  if (!s.ok()) {
    spdlog::warn("LibTorch's threads are left to the kernel's scheduler: {}", s.ToString());
    team_binding_failed_ = true;
    return;
  }
  spdlog::debug("LibTorch's threads {} (the pipeline made the model wait {} times in a task)",
                keeps_ahead ? "bound to a core each" : "left to the scheduler", waits);
}

void Worker::AskingAhead() {
  std::lock_guard<std::mutex> lock(task_mu_);
  ahead_held_.emplace();
  ahead_held_->set_task_id(-1);
}

void Worker::HoldAhead(const proto::Task* task) {
  std::lock_guard<std::mutex> lock(task_mu_);
  ahead_held_.reset();
  if (task != nullptr) {
    ahead_held_.emplace();
    ahead_held_->set_task_id(task->task_id());
    ahead_held_->set_attempt(task->attempt());
  }
}

template <typename Request, typename Response, typename Method>
Status Worker::CallMaster(const char* what, Method method, const Request& request,
                          Response* response) {
  const auto deadline = std::chrono::steady_clock::now() + options_.master_patience;
  bool warned = false;
  while (true) {
    Status s = (peers_.master.get()->*method)(request, response, kMasterTimeout);
    if (s.ok() || !rpc::IsUnreachable(s)) {
      if (warned && s.ok()) spdlog::info("the master is back");
      return Annotate(s, what);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Annotate(s, StrCat(what, " (the master has been unreachable for ",
                                options_.master_patience.count() / 1000, " s)"));
    }
    if (!warned) {
      warned = true;
      spdlog::warn("{}: the master is unreachable ({}); retrying", what, std::string(s.message()));
    }
    peers_.master->Reconnect();
    std::this_thread::sleep_for(milliseconds(100));
  }
}

Status Worker::Register() {
  auto deadline = std::chrono::steady_clock::now() + options_.register_patience;
  while (true) {
    proto::RegisterWorkerRequest request;
    request.set_worker_id(options_.worker_id);
    proto::RegisterWorkerResponse response;
    Status s = peers_.master->RegisterWorker(request, &response, kMasterTimeout);
    if (s.ok()) {
      std::vector<std::string> addresses(response.ps_addresses().begin(),
                                         response.ps_addresses().end());
      ps_ = TimedServers(addresses.empty() ? nullptr : peers_.connect_ps(addresses), &timings_);
      rows_.set_servers(ps_.get());
      return absl::OkStatus();
    }
    if (!rpc::IsUnreachable(s) || std::chrono::steady_clock::now() > deadline) {
      return Annotate(s, "registering with the master");
    }
    if (stopping()) return absl::CancelledError("stopped while registering");
    if (rpc::IsUnreachable(s)) peers_.master->Reconnect();
    std::this_thread::sleep_for(milliseconds(100));
  }
}

Status Worker::LoadInitialModel() {
  // Every worker builds the same initial model; the first to initialize a
  // server wins.
  torch::manual_seed(job_seeds::InitialModel(job_.seed));
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, program_.MakeModel());
  EDL_ASSIGN_OR_RETURN(std::vector<EmbeddingImpl*> embeddings, EmbeddingsOf(*model));
  std::vector<proto::EmbeddingTableSpec> tables;
  for (EmbeddingImpl* layer : embeddings) {
    layer->set_row_source(&rows_);
    const bool known = std::any_of(tables.begin(), tables.end(), [&](const auto& t) {
      return t.name() == layer->options().name();
    });
    if (!known) tables.push_back(TableSpecOf(layer->options(), job_.seed));
  }
  model_ = std::make_unique<ShardedModel>(std::move(model), ps_ ? ps_->num_shards() : 1);
  model_->set_tables(std::move(tables));
  if (!ps_ && !embeddings.empty()) {
    return absl::FailedPreconditionError(
        StrCat("the model's embedding table '", embeddings[0]->options().name(),
               "' lives on parameter servers, and this job has none"));
  }
  if (!ps_) {
    // Evaluation and prediction jobs read the trained model's values.
    EDL_ASSIGN_OR_RETURN(proto::ModelValues values, ReadModelValues(job_.trained_model));
    return Annotate(model_->Apply(values), job_.trained_model);
  }
  versions_.assign(ps_->num_shards(), -1);
  instances_.assign(ps_->num_shards(), 0);
  awaiting_step_.assign(ps_->num_shards(), false);
  answered_.assign(ps_->num_shards(), false);
  EDL_RETURN_IF_ERROR(PullWhileServersComeUp());
  // Shards nobody has initialized (Pull left their version at -1) take this
  // worker's values; the first worker's values win, and everyone then pulls
  // the winners.
  if (std::none_of(versions_.begin(), versions_.end(), [](int64_t v) { return v < 0; })) {
    return absl::OkStatus();
  }
  std::vector<proto::InitRequest> inits(ps_->num_shards());
  for (int i = 0; i < ps_->num_shards(); ++i) {
    EDL_ASSIGN_OR_RETURN(*inits[i].mutable_values(), model_->Encode(i));
  }
  std::vector<proto::InitResponse> init_responses;
  EDL_RETURN_IF_ERROR(ps_->Init(inits, &init_responses));
  versions_.assign(ps_->num_shards(), -1);
  return Pull();
}

Status Worker::Pull(bool wait_for_steps) {
  const auto give_up = std::chrono::steady_clock::now() + kStepPatience;
  while (true) {
    std::vector<proto::PullRequest> requests(ps_->num_shards());
    bool waiting = false;
    for (int i = 0; i < ps_->num_shards(); ++i) {
      requests[i].set_known_version(versions_[i]);
      requests[i].set_known_instance(instances_[i]);
      if (wait_for_steps && awaiting_step_[i]) {
        requests[i].set_wait_ms(static_cast<int32_t>(kStepWait.count()));
        waiting = true;
      }
    }
    std::vector<proto::PullResponse> responses;
    EDL_RETURN_IF_ERROR(ps_->Pull(requests, &responses));
    for (int i = 0; i < ps_->num_shards(); ++i) {
      const proto::PullResponse& r = responses[i];
      if (!r.initialized()) continue;
      if (r.values().version() == versions_[i] && r.instance() == instances_[i]) continue;
      EDL_RETURN_IF_ERROR(model_->Apply(r.values()));
      versions_[i] = r.values().version();
      instances_[i] = r.instance();
      awaiting_step_[i] = false;  // the step was taken, or the server is another
    }
    if (!waiting ||
        std::none_of(awaiting_step_.begin(), awaiting_step_.end(), [](bool b) { return b; })) {
      return absl::OkStatus();
    }
    if (task_stopping()) return absl::CancelledError("asked to stop while waiting for a step");
    if (std::chrono::steady_clock::now() > give_up) {
      spdlog::warn(
          "a synchronous step has waited {} s for the other workers' gradients; computing the "
          "next minibatch on version {} meanwhile",
          std::chrono::duration_cast<std::chrono::seconds>(kStepPatience).count(), ModelVersion());
      awaiting_step_.assign(awaiting_step_.size(), false);
      return absl::OkStatus();
    }
  }
}

int64_t Worker::ModelVersion() const {
  int64_t version = pushed_version_;
  for (int64_t v : versions_) version = std::max(version, v);
  return version;
}

Status Worker::Reconnect() {
  spdlog::warn("lost a parameter server; waiting for it to come back");
  EDL_RETURN_IF_ERROR(Register());
  versions_.assign(ps_->num_shards(), -1);
  instances_.assign(ps_->num_shards(), 0);
  awaiting_step_.assign(ps_->num_shards(), false);
  answered_.assign(ps_->num_shards(), false);
  EDL_RETURN_IF_ERROR(PullWhileServersComeUp());
  spdlog::info("parameter servers are back");
  return absl::OkStatus();
}

Status Worker::PullWhileServersComeUp() {
  const auto deadline = std::chrono::steady_clock::now() + options_.register_patience;
  while (true) {
    Status s = Pull();
    if (s.ok() || !rpc::IsUnreachable(s) || std::chrono::steady_clock::now() > deadline) return s;
    // A server may have died again: the master knows the new address.
    std::this_thread::sleep_for(milliseconds(200));
    EDL_RETURN_IF_ERROR(Register());
  }
}

StatusOr<std::shared_ptr<const RecordFile>> Worker::OpenFile(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordFile> file, RecordFile::Open(path));
  std::shared_ptr<const RecordFile> shared(std::move(file));
  files_[path] = shared;
  return shared;
}

StatusOr<Dataset<Example>> Worker::Batches(const proto::Task& task, Mode mode, bool ahead) {
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<const RecordFile> file, OpenFile(task.file()));
  // On the training thread, the records are read (and their chunks
  // decompressed) a minibatch ahead, on a thread of their own, while the
  // model computes. A pipeline that runs ahead of the model does that on its
  // own thread already: a second one would only hand it the records one at a
  // time, two thread switches each on the cores the model computes on. The
  // pipeline's seed is the task's either way.
  Dataset<Record> records = ReadRecords(file, task.start(), task.end());
  if (!ahead) records = records.prefetch(static_cast<size_t>(job_.minibatch_size));
  records = records.with_seed(job_seeds::Pipeline(job_.seed, task.epoch(), task.task_id()));
  return calls_.Run(ModelCalls::kDatasetFn, task.task_id(), -1, [&] {
    return program_.MakeBatches(std::move(records), mode, job_.minibatch_size);
  });
}

Status Worker::TrainMinibatch(const Example& batch, const proto::MinibatchTag& tag, uint64_t seed,
                              double* loss_value, bool* nonfinite,
                              std::function<void()> while_pushing) {
  // Shards still to accept this minibatch's gradients. A shard refuses
  // gradients computed on an outdated version or on values of an earlier
  // incarnation of the server: pull, compute again (with the same seed)
  // and push to the refusing shards only. A shard that has applied this
  // minibatch before acknowledges it as a duplicate.
  std::vector<int> pending(ps_->num_shards());
  for (int i = 0; i < ps_->num_shards(); ++i) pending[i] = i;
  bool first = true;
  while (!pending.empty()) {
    // A refused minibatch is not finished: a worker asked to stop leaves
    // it to the task's next attempt (shards that took it acknowledge it
    // there as a duplicate) instead of racing the others to recompute it.
    if (!first && task_stopping()) {
      return absl::CancelledError("asked to stop while recomputing a refused minibatch");
    }
    // Time spent on this computation of the minibatch, from its pull; a
    // pull that waits for a step of the servers is waiting, not training.
    auto computing = TimeAccount::Clock::now();
    const bool waits = first && std::count(awaiting_step_.begin(), awaiting_step_.end(), true) > 0;
    // Every server answered the last push with the values after its step:
    // nothing newer to pull. A refused push pulls before it is computed again.
    const bool answered =
        first && std::all_of(answered_.begin(), answered_.end(), [](bool b) { return b; });
    answered_.assign(answered_.size(), false);
    if (!answered) EDL_RETURN_IF_ERROR(Pull(/*wait_for_steps=*/first));
    if (waits) {
      account_.AddSince(TimeAccount::Kind::kStepWait, computing);
      computing = TimeAccount::Clock::now();
    }
    first = false;
    Model& model = model_->model();
    model.zero_grad();
    model_->RestoreBuffers();
    rows_.Clear();
    torch::manual_seed(seed);
    StatusOr<torch::Tensor> forward =
        calls_.Run(ModelCalls::kForward, tag.task_id(), tag.minibatch(),
                   [&] { return program_.Forward(model, batch.features, true); });
    // A lookup of embedding rows that failed is the servers' failure.
    EDL_RETURN_IF_ERROR(rows_.TakeError(batch));
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs, std::move(forward));
    EDL_ASSIGN_OR_RETURN(torch::Tensor loss,
                         calls_.Run(ModelCalls::kLoss, tag.task_id(), tag.minibatch(),
                                    [&] { return program_.Loss(batch.labels, outputs); }));
    try {
      const ModelCalls::Scope call =
          calls_.Enter(ModelCalls::kBackward, tag.task_id(), tag.minibatch());
      loss.backward();
    } catch (const std::exception& e) {
      return program_.Annotate(
          absl::InvalidArgumentError(StrCat("backward failed: ", zoo_internal::ShortWhat(e))),
          EntryKind::kLoss);
    }
    *loss_value = loss.item<double>();
    std::optional<std::string> bad =
        std::isfinite(*loss_value) ? model_->FirstNonFinite() : std::string("the loss");
    if (!bad.has_value()) rows_.CollectGradients(&bad).IgnoreError();  // names it in `bad`
    if (bad.has_value()) {
      *nonfinite = true;
      model_->RestoreBuffers();
      // Data with a NaN in it is not divergence: the record says where.
      if (std::optional<std::string> input = FirstNonFiniteInput(batch)) {
        return absl::InvalidArgumentError(
            StrCat("minibatch ", tag.minibatch(), " of task ", tag.task_id(),
                   " gave non-finite values (loss ", *loss_value, ") from its input: ", *input,
                   " holds a NaN or an infinity. Nothing was pushed"));
      }
      return absl::InvalidArgumentError(
          StrCat("training diverged: minibatch ", tag.minibatch(), " of task ", tag.task_id(),
                 " computed on model version ", ModelVersion(), " gave non-finite values (loss ",
                 *loss_value, "); the first non-finite tensor: ", *bad, ". Nothing was pushed"));
    }

    // The gradients and buffer updates go from where they lie to the
    // servers (into the memory shared with a server on this machine), and
    // the values that answer from where they arrive into the model.
    std::vector<proto::PushRequest> requests(ps_->num_shards());
    std::vector<ShardedModel::Held> held(requests.size());
    std::vector<rpc::ParameterServers::HeldBytes> held_bytes(requests.size());
    for (int i : pending) {
      requests[i].set_worker_id(options_.worker_id);
      requests[i].set_base_version(versions_[i]);
      requests[i].set_instance(instances_[i]);
      requests[i].set_want_values(true);
      *requests[i].mutable_tag() = tag;
      EDL_RETURN_IF_ERROR(model_->FillPush(i, &requests[i], &held[i]));
      held_bytes[i] = std::move(held[i].bytes);
      rows_.FillPush(i, &requests[i]);
    }
    auto apply = [this](int, const proto::ModelValues& values, std::string_view shared) {
      return model_->Apply(values, shared);
    };
    std::vector<proto::PushResponse> responses;
    Status pushed;
    if (while_pushing) {
      // The servers take the push (and, when it completes a synchronous
      // step, run the optimizer) and the values come into the model while
      // this thread does other work; that work must not touch the servers
      // or the model.
      pusher_.Start(
          [&] { pushed = ps_->PushFrom(&requests, &responses, pending, held_bytes, apply); });
      absl::Cleanup pushed_by_now = [this] { pusher_.Wait(); };  // the push uses our locals
      std::exchange(while_pushing, nullptr)();
    } else {
      pushed = ps_->PushFrom(&requests, &responses, pending, held_bytes, apply);
    }
    EDL_RETURN_IF_ERROR(pushed);
    std::vector<int> refused;
    bool max_steps_reached = false;
    bool applied = false;
    for (int i : pending) {
      if (responses[i].accepted()) {
        if (!responses[i].duplicate()) {
          applied = true;
          model_->PushAccepted(i);
          learning_rate_ = responses[i].learning_rate();
        }
        awaiting_step_[i] = responses[i].step_pending();
        pushed_version_ = std::max(pushed_version_, responses[i].version());
        if (responses[i].has_values()) {  // in the model already
          versions_[i] = responses[i].values().version();
          answered_[i] = true;
        }
      } else {
        max_steps_reached = max_steps_reached || responses[i].max_steps_reached();
        pushed_version_ = std::max(pushed_version_, responses[i].version());
        refused.push_back(i);
      }
    }
    // Refused somewhere, it is computed again; taken by no server as new,
    // an earlier attempt of the task had it applied.
    account_.AddSince(
        refused.empty() && applied ? TimeAccount::Kind::kTrained : TimeAccount::Kind::kDiscarded,
        computing);
    if (max_steps_reached) {
      model_->RestoreBuffers();
      return absl::OutOfRangeError(
          StrCat("the model reached the job's max_steps at version ", pushed_version_));
    }
    pending = std::move(refused);
  }
  // What the servers did not take (duplicates) is not kept either.
  model_->RestoreBuffers();
  return absl::OkStatus();
}

Status Worker::Train(const proto::Task& task, proto::ReportTaskRequest* report,
                     bool started_ahead) {
  const int64_t batch_size = job_.minibatch_size;
  const int64_t minibatches = (task.end() - task.start() + batch_size - 1) / batch_size;
  UpdateTeamBinding();
  std::optional<Dataset<Example>> batches;
  if (!started_ahead) {
    EDL_ASSIGN_OR_RETURN(Dataset<Example> made, Batches(task, Mode::TRAINING));
    batches.emplace(std::move(made));
  }
  // The next minibatch of the pipeline, with LibTorch's global generator
  // seeded for it (for dataset_fns that draw from it). A pipeline seen to
  // leave that generator alone in its first pull of the task runs ahead of
  // the model from then on, on a thread of its own: it makes the next
  // minibatches while this one is computed and pushed, the same ones in
  // the same order. One that draws from it stays on this thread, where the
  // model's draws (dropout, seeded per minibatch) cannot interleave with
  // its own, and makes the next minibatch only while the servers take the
  // push; so does a pipeline of Python code, which would hold the
  // interpreter's lock against a Python model's forward. A task handed out
  // ahead had its pipeline started on that thread already (TakeNext).
  bool probed = program_.MakesBatchesInPython() || started_ahead;
  bool ahead = started_ahead;
  // The task's pipeline, when it runs ahead, ends with the task.
  auto stop_ahead = absl::MakeCleanup([&ahead, this] {
    if (ahead) ahead_->Stop();
  });
  // The next task, asked for near this one's end, is taken while a push is
  // out once this task's pipeline has ended, or when the task ends; its
  // pipeline then has the thread (in place of this task's, if that still
  // runs).
  auto take_next = [&ahead, this](bool wait) {
    std::optional<NextTask> handed;
    if (!TakeNext(wait, &handed)) return false;
    next_ = std::move(handed);
    if (next_.has_value() && next_->started) ahead = false;
    return true;
  };
  absl::Cleanup next_taken = [&take_next] { take_next(/*wait=*/true); };
  // Made ahead and taken from the thread at once, in order: once the end is
  // among them the thread is free for the next task's pipeline.
  std::deque<StatusOr<std::optional<Example>>> taken;
  bool end_taken = false;
  auto next = [&](int64_t minibatch) -> StatusOr<std::optional<Example>> {
    const ModelCalls::Scope call = calls_.Enter(ModelCalls::kPipeline, task.task_id(), minibatch);
    if (!taken.empty()) {
      StatusOr<std::optional<Example>> batch = std::move(taken.front());
      taken.pop_front();
      return batch;
    }
    if (end_taken) return std::optional<Example>();
    if (ahead) return ahead_->Next();
    torch::manual_seed(job_seeds::PipelinePull(job_.seed, task.task_id(), minibatch));
    if (probed) return batches->Next();
    probed = true;
    StatusOr<std::optional<Example>> batch = ProbedPull(&*batches, &ahead);
    if (ahead) {
      // The probe took this minibatch: the thread makes the next ones.
      Ahead().Start(std::move(*batches), task.task_id(), minibatch + 1);
      pipelines_free_ = true;
    }
    return batch;
  };
  // Every attempt's pipeline yields the same minibatches: skip those the
  // servers have applied.
  int64_t minibatch = 0;
  for (; minibatch < task.minibatches_done(); ++minibatch) {
    StatusOr<std::optional<Example>> skipped = next(minibatch);
    if (!skipped.ok()) return DatasetError(skipped.status());
    if (!skipped->has_value()) break;
  }
  report->set_minibatches_done(task.minibatches_done());
  // A task starts with a pull: other workers' steps may have come since the
  // last push of ours.
  answered_.assign(answered_.size(), false);
  // The next minibatch, when it was made while the last one was pushed.
  std::optional<StatusOr<std::optional<Example>>> prefetched;
  while (true) {
    // Stop between minibatches when asked; the rest of the task goes back.
    if (task_stopping() && minibatch < minibatches) {
      report->set_stopped(true);
      break;
    }
    StatusOr<std::optional<Example>> batch =
        prefetched.has_value() ? *std::exchange(prefetched, std::nullopt) : next(minibatch);
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    proto::MinibatchTag tag;
    tag.set_task_id(task.task_id());
    tag.set_minibatch(minibatch);
    double loss = 0;
    bool nonfinite = false;
    // The pipeline makes the next minibatch while the servers take this
    // one's gradients: the same minibatches, in the same order, with the
    // same seeds, as one after the other. One running ahead has made some
    // already: they are taken, and once its end is among them the next
    // task's pipeline runs on the thread while this task's last minibatches
    // train.
    auto prefetch = [&, following = minibatch + 1] {
      if (!ahead) {
        prefetched = next(following);
        return;
      }
      for (auto& made : ahead_->TakeReady()) taken.push_back(std::move(made));
      end_taken = !taken.empty() && taken.back().ok() && !taken.back()->has_value();
      if (end_taken && take_next(/*wait=*/false)) return;
      // Asked for a minibatch before this task's end is taken (which the
      // pipeline makes while the model is about kMinibatchesAhead + 2
      // minibatches from it), the next task is in hand when the thread is
      // free for it. Not before the last task's report is answered (asking
      // ahead gives back every task held but the one kept), nor after it
      // failed.
      const bool near_end =
          end_taken || following + static_cast<int64_t>(kMinibatchesAhead) + 2 >= minibatches;
      if (!near_end || next_.has_value() || AskedForNext() || !asks_ahead_ || !pipelines_free_ ||
          job_.max_steps > 0 || task_stopping() || !ReportAnswered() || !reported_.ok()) {
        return;
      }
      AskForNext(task);
    };
    Status trained =
        TrainMinibatch(**batch, tag, job_seeds::Minibatch(job_.seed, task.task_id(), minibatch),
                       &loss, &nonfinite, prefetch);
    report->set_nonfinite(nonfinite);
    if (trained.code() == absl::StatusCode::kCancelled && task_stopping()) {
      report->set_stopped(true);  // stopped while waiting for a step
      break;
    }
    if (absl::IsOutOfRange(trained)) {
      // The servers take no more steps: the rest of the task is not trained.
      spdlog::info("task {}: {}; stopping at minibatch {}", task.task_id(),
                   std::string(trained.message()), minibatch);
      report->set_stopped(true);
      break;
    }
    EDL_RETURN_IF_ERROR(trained);
    ++minibatch;
    minibatches_done_ = minibatch;
    report->set_minibatches_done(minibatch);
    report->set_loss_sum(report->loss_sum() + loss);
    report->set_minibatches(report->minibatches() + 1);
    report->set_records(report->records() + (**batch).labels.size(0));
  }
  report->set_model_version(ModelVersion());
  report->set_learning_rate(learning_rate_);
  return absl::OkStatus();
}

Status Worker::Evaluate(const proto::Task& task, proto::ReportTaskRequest* report) {
  if (ps_) EDL_RETURN_IF_ERROR(Pull());
  EDL_ASSIGN_OR_RETURN(auto metrics, calls_.Run(ModelCalls::kEvalMetricsFn, task.task_id(), -1,
                                                [&] { return program_.MakeMetrics(); }));
  EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, Batches(task, Mode::EVALUATION));
  torch::NoGradGuard no_grad;
  for (int64_t minibatch = 0;; ++minibatch) {
    // A stopped evaluation task is redone whole: its states count only
    // when complete.
    if (stopping()) {
      report->set_stopped(true);
      return absl::OkStatus();
    }
    StatusOr<std::optional<Example>> batch = calls_.Run(ModelCalls::kPipeline, task.task_id(),
                                                        minibatch, [&] { return batches.Next(); });
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    rows_.Clear();
    StatusOr<torch::Tensor> forward =
        calls_.Run(ModelCalls::kForward, task.task_id(), minibatch,
                   [&] { return program_.Forward(model_->model(), (**batch).features, false); });
    EDL_RETURN_IF_ERROR(rows_.TakeError(**batch));
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs, std::move(forward));
    EDL_RETURN_IF_ERROR(calls_.Run(ModelCalls::kMetrics, task.task_id(), minibatch, [&] {
      return program_.UpdateMetrics(metrics, (**batch).labels, outputs);
    }));
  }
  for (const auto& [name, metric] : metrics) {
    MetricState state = metric->state();
    proto::MetricState* m = report->add_metrics();
    m->set_name(name);
    m->set_kind(ToProto(state.kind));
    for (double v : state.values) m->add_values(v);
  }
  return absl::OkStatus();
}

Status Worker::Predict(const proto::Task& task, proto::ReportTaskRequest* report) {
  if (ps_) EDL_RETURN_IF_ERROR(Pull());
  EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, Batches(task, Mode::PREDICTION));
  torch::NoGradGuard no_grad;
  // Each row of the output, by the record it was made from: a dataset_fn
  // that shuffles in every mode still predicts each record on its own line.
  // Where the pipeline lost track of a row's record, every row follows the
  // order the pipeline yields them in.
  std::vector<std::pair<int64_t, std::string>> rows;
  std::vector<int64_t> records;
  bool tracked = true;
  rows.reserve(static_cast<size_t>(std::max<int64_t>(task.end() - task.start(), 0)));
  int64_t position = task.start();
  const std::string file = CsvField(task.file());
  for (int64_t minibatch = 0;; ++minibatch) {
    if (stopping()) {
      report->set_stopped(true);
      return absl::OkStatus();
    }
    StatusOr<std::optional<Example>> batch = calls_.Run(ModelCalls::kPipeline, task.task_id(),
                                                        minibatch, [&] { return batches.Next(); });
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    rows_.Clear();
    StatusOr<torch::Tensor> forward =
        calls_.Run(ModelCalls::kForward, task.task_id(), minibatch,
                   [&] { return program_.Forward(model_->model(), (**batch).features, false); });
    EDL_RETURN_IF_ERROR(rows_.TakeError(**batch));
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs, std::move(forward));
    torch::Tensor values = outputs.detach().to(torch::kFloat64).reshape({outputs.size(0), -1});
    auto a = values.accessor<double, 2>();
    const std::vector<RecordOrigin>& origins = (**batch).origins;
    tracked = tracked && origins.size() == static_cast<size_t>(a.size(0));
    for (int64_t r = 0; r < a.size(0); ++r, ++position) {
      records.push_back(tracked ? static_cast<int64_t>(origins[r].index) : -1);
      std::string line;
      for (int64_t c = 0; c < a.size(1); ++c) line += fmt::format(",{:.9g}", a[r][c]);
      rows.emplace_back(position, std::move(line));
    }
  }
  if (tracked) {
    for (size_t i = 0; i < rows.size(); ++i) rows[i].first = records[i];
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  auto unexpected = [&]() -> std::string {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t want = task.start() + static_cast<int64_t>(i);
      if (rows[i].first > want) return StrCat("; none for record ", want);
      if (rows[i].first < want) return StrCat("; record ", rows[i].first, " twice");
    }
    if (const int64_t n = static_cast<int64_t>(rows.size()); n < task.end() - task.start())
      return StrCat("; none for record ", task.start() + n);
    return "";
  }();
  if (static_cast<int64_t>(rows.size()) != task.end() - task.start() || !unexpected.empty()) {
    return program_.Annotate(
        absl::InvalidArgumentError(
            StrCat("in PREDICTION mode dataset_fn must yield one example per record; it yielded ",
                   rows.size(), " for ", task.end() - task.start(), " records (", task.file(), " [",
                   task.start(), ", ", task.end(), "))", unexpected)),
        EntryKind::kDatasetFn);
  }
  std::string csv;
  for (const auto& [record, values] : rows) csv += StrCat(file, ",", record, values, "\n");
  const std::string& dir = job_.predictions_dir;
  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  return WriteFileAtomically(StrCat(dir, "/task-", task.task_id(), ".csv"), csv);
}

Status Worker::RunTask(const proto::Task& task, proto::ReportTaskRequest* report,
                       bool started_ahead) {
  account_.FirstTask();
  const auto started = TimeAccount::Clock::now();
  switch (task.type()) {
    case proto::TASK_TRAINING:
      return Train(task, report, started_ahead);
    case proto::TASK_EVALUATION: {
      Status s = Evaluate(task, report);
      account_.AddSince(TimeAccount::Kind::kEvaluation, started);
      return s;
    }
    case proto::TASK_PREDICTION: {
      Status s = Predict(task, report);
      account_.AddSince(TimeAccount::Kind::kEvaluation, started);
      return s;
    }
    default:
      return absl::InvalidArgumentError(StrCat("unknown task type ", int(task.type())));
  }
}

Status Worker::Report(const proto::ReportTaskRequest& report) {
  Status s = AwaitReport();
  s.Update(Send(report));
  return s;
}

Status Worker::Send(const proto::ReportTaskRequest& task_report) {
  proto::ReportTaskRequest report = task_report;
  *report.mutable_seconds() = account_.Totals();
  proto::ReportTaskResponse ignored;
  Status s =
      CallMaster("reporting a task to the master", &MasterClient::ReportTask, report, &ignored);
  // The task was taken back (this worker was presumed lost, or a parameter
  // server went back to a checkpoint): someone else does it. Not an error.
  if (s.code() == absl::StatusCode::kFailedPrecondition && !lost_.load()) {
    spdlog::info("task {} was taken back by the master", report.task_id());
    return absl::OkStatus();
  }
  return s;
}

void Worker::ReportInBackground(proto::ReportTaskRequest report) {
  reported_.Update(AwaitReport());
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    reporting_.emplace();
    reporting_->set_task_id(report.task_id());
    reporting_->set_attempt(report.attempt());
    reporting_->set_minibatches_done(report.minibatches_done());
  }
  report_sent_ =
      std::async(std::launch::async, [this, report = std::move(report)] { return Send(report); });
}

bool Worker::ReportAnswered() {
  if (!report_sent_.valid()) return true;
  if (report_sent_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  reported_.Update(report_sent_.get());
  std::lock_guard<std::mutex> lock(task_mu_);
  reporting_.reset();
  return true;
}

Status Worker::AwaitReport() {
  if (report_sent_.valid()) report_sent_.wait();
  ReportAnswered();
  return std::exchange(reported_, absl::OkStatus());
}

void Worker::HeartbeatLoop() {
  const milliseconds lease = job_.lease;
  const milliseconds interval = std::clamp(lease / 4, milliseconds(20), kMaxHeartbeatInterval);
  auto last_beat = ModelCalls::Clock::now();
  std::unique_lock<std::mutex> lock(heartbeat_mu_);
  while (!heartbeat_cv_.wait_for(lock, interval, [this] { return heartbeat_quit_; })) {
    lock.unlock();
    const auto now = ModelCalls::Clock::now();
    // A beat that comes this late was held back by the process being
    // stopped (SIGSTOP, a suspended Slurm job), during which no call ran.
    if (now - last_beat > kStoppedGap) calls_.Shift(now - last_beat - interval);
    last_beat = now;
    if (job_.model_call_timeout.count() > 0) {
      if (std::optional<ModelCalls::Call> call = calls_.Longest();
          call && now - call->since >= job_.model_call_timeout && !ending_stuck_.exchange(true)) {
        // On a thread of its own: the heartbeats go on meanwhile, so the
        // master hears the task's failure from a worker it still knows.
        if (stuck_.joinable()) stuck_.join();
        stuck_ = std::thread([this, call = *call] {
          EndStuck(call);
          ending_stuck_ = false;  // the call returned after all
        });
      }
    }
    proto::HeartbeatRequest request;
    request.set_worker_id(options_.worker_id);
    {
      std::lock_guard<std::mutex> task_lock(task_mu_);
      request.set_task_id(task_id_);
      request.set_attempt(attempt_);
      if (ahead_held_) *request.mutable_next() = *ahead_held_;
      if (reporting_) *request.mutable_reporting() = *reporting_;
      request.set_minibatches_done(minibatches_done_.load());
    }
    *request.mutable_seconds() = account_.Totals();
    proto::HeartbeatResponse response;
    Status s = peers_.master->Heartbeat(request, &response, interval * 4);
    if (s.ok()) {
      if (response.leave() && !leave_.exchange(true)) {
        spdlog::info("the master asks this worker to leave");
      }
      if (response.task_revoked()) {
        std::lock_guard<std::mutex> task_lock(task_mu_);
        if (task_id_ == request.task_id() && attempt_ == request.attempt() &&
            !task_revoked_.exchange(true)) {
          spdlog::info(
              "task {} is no longer this worker's (another attempt finished it, or the master took "
              "it back)",
              task_id_);
        }
      }
      int64_t seen = latest_group_version_.load();
      while (response.group_version() > seen &&
             !latest_group_version_.compare_exchange_weak(seen, response.group_version())) {
      }
    } else if (rpc::IsUnreachable(s)) {
      peers_.master->Reconnect();
    } else if (s.code() == absl::StatusCode::kFailedPrecondition) {
      // The master has taken us as lost and given our work to others.
      if (!lost_.exchange(true)) {
        spdlog::error("the master no longer knows this worker: {}", std::string(s.message()));
      }
    }
    lock.lock();
  }
}

void Worker::EndStuck(const ModelCalls::Call& call) {
  const int64_t timeout = job_.model_call_timeout.count();
  std::string message = StrCat(call.Describe(), " has not returned within ", timeout,
                               " s (--model_call_timeout=", timeout, "); the worker ends");
  // The stuck call's thread, or where it runs no Python code (it waits for
  // another thread) the first of the other calls' threads that does.
  std::vector<uint64_t> threads = {call.thread};
  for (uint64_t t : calls_.Threads()) {
    if (t != call.thread) threads.push_back(t);
  }
  const std::string where = program_.Where(threads, std::chrono::seconds(2));
  if (!calls_.Overdue(call.id, job_.model_call_timeout)) {
    spdlog::info("{} returned after all, past --model_call_timeout={}", call.Describe(), timeout);
    return;
  }
  if (!where.empty()) message += StrCat(". The model's Python code is at:\n", where);
  // The task the call was for fails: the current one, or the one handed
  // out ahead whose pipeline was being made. The master takes back the
  // other when the process ends, its progress kept.
  std::optional<proto::ReportTaskRequest> report;
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    if (call.task >= 0 && call.task == task_id_) {
      report.emplace();
      report->set_attempt(attempt_);
      report->set_minibatches_done(minibatches_done_.load());
    } else if (call.task >= 0 && ahead_held_ && ahead_held_->task_id() == call.task) {
      report.emplace();
      report->set_attempt(ahead_held_->attempt());
    }
  }
  if (report) {
    report->set_worker_id(options_.worker_id);
    report->set_task_id(call.task);
    report->set_error(message);
    if (Status s = Send(*report); !s.ok()) {
      spdlog::warn("cannot report task {} failed: {}", call.task, std::string(s.message()));
    }
  }
  const Status reason = absl::DeadlineExceededError(message);
  if (options_.end_process) options_.end_process(reason);
  spdlog::error("{}", message);
  spdlog::default_logger()->flush();
  std::_Exit(1);
}

void Worker::StopHeartbeats() {
  {
    std::lock_guard<std::mutex> lock(heartbeat_mu_);
    heartbeat_quit_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

Status Worker::Run() {
  if (job_.strategy != proto::PARAMETER_SERVER_STRATEGY) return RunCollective();
  EDL_RETURN_IF_ERROR(Register());
  EDL_RETURN_IF_ERROR(LoadInitialModel());
  heartbeat_ = std::thread(&Worker::HeartbeatLoop, this);
  while (true) {
    if (lost_) return absl::AbortedError("the master took this worker as lost");
    if (stopping()) {
      Status s = AwaitReport();
      s.Update(HandBackNext());
      EDL_RETURN_IF_ERROR(s);
      spdlog::info("stopping as asked");
      return absl::OkStatus();
    }
    proto::Task task;
    bool started_ahead = false;
    if (next_.has_value()) {
      task = std::move(next_->task);
      started_ahead = next_->started;
      next_.reset();
    } else {
      // The master answers knowing how the last task ended.
      EDL_RETURN_IF_ERROR(AwaitReport());
      proto::GetTaskRequest request;
      request.set_worker_id(options_.worker_id);
      proto::GetTaskResponse response;
      EDL_RETURN_IF_ERROR(
          CallMaster("asking the master for a task", &MasterClient::GetTask, request, &response));
      task = std::move(*response.mutable_task());
      if (task.type() == proto::TASK_NONE) return absl::OkStatus();
      if (task.type() == proto::TASK_WAIT) {
        std::this_thread::sleep_for(milliseconds(50));
        continue;
      }
    }
    BeginTask(task);
    HoldAhead(nullptr);
    proto::ReportTaskRequest report = ReportOf(task);
    Status s = RunTask(task, &report, started_ahead);
    bool reconnect = false;
    if (rpc::IsUnreachable(s) && ps_ != nullptr) {
      // A parameter server is gone: hand the rest of the task back (what
      // every server applied stays applied) and wait for its relaunch.
      spdlog::warn("task {}: {}", task.task_id(), std::string(s.message()));
      report.set_stopped(true);
      reconnect = true;
    } else if (s.code() == absl::StatusCode::kFailedPrecondition) {
      // A server refused a minibatch out of order: the task was taken back
      // from us (it went back to a checkpoint). Hand back what we have.
      spdlog::info("task {}: {}", task.task_id(), std::string(s.message()));
      report.set_stopped(true);
    } else if (!s.ok()) {
      report.set_error(std::string(s.message()));
      spdlog::warn("task {} failed: {}", task.task_id(), report.error());
    }
    for (const auto& [call, histogram] : timings_.Take()) {
      rpc::HistogramToProto(histogram, &(*report.mutable_rpc_seconds())[call]);
    }
    if (s.ok() && next_.has_value()) {
      // The next task is in hand: it begins while the master records this
      // one.
      ReportInBackground(std::move(report));
      EndTask();
      continue;
    }
    Status reported = Report(report);
    EndTask();
    // The task after a failed one goes back as it came, as does the one
    // a worker giving up holds.
    if (!s.ok() || !reported.ok()) reported.Update(HandBackNext());
    EDL_RETURN_IF_ERROR(reported);
    if (reconnect) {
      const auto started = TimeAccount::Clock::now();
      Status reconnected = Reconnect();
      account_.AddSince(TimeAccount::Kind::kRecovery, started);
      EDL_RETURN_IF_ERROR(reconnected);
    }
  }
}

void Worker::AskForNext(const proto::Task& current) {
  proto::GetTaskRequest request;
  request.set_worker_id(options_.worker_id);
  request.mutable_keep()->set_task_id(current.task_id());
  request.mutable_keep()->set_attempt(current.attempt());
  AskingAhead();
  asked_ = std::async(std::launch::async, [this, request = std::move(request)] {
    Asked asked;
    asked.status = CallMaster("asking the master for the next task", &MasterClient::GetTask,
                              request, &asked.response);
    // Held from now on, as the heartbeats tell the master.
    HoldAhead(asked.handed() ? &asked.response.task() : nullptr);
    return asked;
  });
}

bool Worker::TakeNext(bool wait, std::optional<NextTask>* next) {
  if (!asked_.valid()) return false;
  if (!wait && asked_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  Asked asked = asked_.get();
  const proto::Task& task = asked.response.task();
  next->reset();
  if (!asked.handed()) {
    if (absl::IsInvalidArgument(asked.status)) {
      asks_ahead_ = false;  // a master that hands out one task at a time
      spdlog::info("{}; asking for one task at a time", std::string(asked.status.message()));
    } else if (!asked.status.ok()) {
      spdlog::warn("{}", std::string(asked.status.message()));
    }
    return true;
  }
  next->emplace(NextTask{task, false});
  if (task.type() == proto::TASK_TRAINING) {
    // A pipeline that fails to start is made again, and reports why, when
    // the task begins.
    StatusOr<Dataset<Example>> batches = Batches(task, Mode::TRAINING, /*ahead=*/true);
    if (batches.ok()) {
      Ahead().Start(std::move(*batches), task.task_id());
      (*next)->started = true;
    }
  }
  return true;
}

proto::ReportTaskRequest Worker::ReportOf(const proto::Task& task) const {
  proto::ReportTaskRequest report;
  report.set_worker_id(options_.worker_id);
  report.set_task_id(task.task_id());
  report.set_attempt(task.attempt());
  report.set_minibatches_done(task.minibatches_done());
  return report;
}

Status Worker::HandBackNext() {
  if (!next_.has_value()) return absl::OkStatus();
  if (next_->started) Ahead().Stop();
  proto::ReportTaskRequest report = ReportOf(next_->task);
  report.set_stopped(true);
  next_.reset();
  HoldAhead(nullptr);
  return Report(report);
}

// The collective group's calls (collective_trainer.cc).
template Status Worker::CallMaster(const char*, decltype(&MasterClient::Rendezvous),
                                   const proto::RendezvousRequest&, proto::RendezvousResponse*);
template Status Worker::CallMaster(const char*, decltype(&MasterClient::GroupState),
                                   const proto::GroupStateRequest&, proto::GroupStateResponse*);
template Status Worker::CallMaster(const char*, decltype(&MasterClient::GroupStore),
                                   const proto::GroupStoreRequest&, proto::GroupStoreResponse*);

}  // namespace elasticdl::worker
