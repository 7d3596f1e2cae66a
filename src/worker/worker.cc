#include "worker/worker.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/file.h"
#include "common/strings.h"
#include "rpc/grpc_util.h"
#include "rpc/job_spec.h"
#include "rpc/trained_model.h"
#include "zoo/zoo_library.h"

namespace elasticdl::worker {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMasterTimeout{30000};
// How long registration waits for the master and the parameter servers.
constexpr auto kRegisterPatience = std::chrono::seconds(120);

proto::MetricKind ToProto(MetricKind kind) {
  return kind == MetricKind::kAuc ? proto::METRIC_AUC : proto::METRIC_MEAN;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Status Worker::DatasetError(const Status& status) const {
  // Damaged records are the data's fault; anything else happened in the
  // zoo's dataset_fn.
  if (status.code() == absl::StatusCode::kDataLoss) return status;
  return program_.Annotate(status, EntryKind::kDatasetFn);
}

StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, rpc::ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library, ZooLibrary::Load(spec.zoo_library()));
  ZooProgramNames names;
  names.model_def = spec.model_def();
  names.dataset_fn = spec.dataset_fn();
  names.loss = spec.loss();
  names.optimizer = spec.optimizer();
  names.eval_metrics_fn = spec.eval_metrics_fn();
  EDL_ASSIGN_OR_RETURN(ZooProgram program,
                       ZooProgram::Resolve(std::move(library), names, spec.model_params()));
  int threads = options.num_threads > 0 ? options.num_threads : spec.worker_threads();
  torch::set_num_threads(std::max(threads, 1));
  return std::unique_ptr<Worker>(new Worker(options, std::move(spec), std::move(program)));
}

Worker::Worker(WorkerOptions options, proto::JobSpec spec, ZooProgram program)
    : options_(std::move(options)), spec_(std::move(spec)), program_(std::move(program)) {
  master_ = proto::Master::NewStub(rpc::MakeChannel(options_.master_address));
}

Status Worker::Register() {
  auto deadline = std::chrono::steady_clock::now() + kRegisterPatience;
  while (true) {
    proto::RegisterWorkerRequest request;
    request.set_worker_id(options_.worker_id);
    proto::RegisterWorkerResponse response;
    auto context = rpc::MakeContext(kMasterTimeout);
    Status s = rpc::FromGrpc(master_->RegisterWorker(context.get(), request, &response));
    if (s.ok()) {
      std::vector<std::string> addresses(response.ps_addresses().begin(),
                                         response.ps_addresses().end());
      if (!addresses.empty()) ps_ = std::make_unique<rpc::PsClient>(addresses);
      return absl::OkStatus();
    }
    if (s.code() != absl::StatusCode::kUnavailable || std::chrono::steady_clock::now() > deadline) {
      return Annotate(s, "registering with the master");
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
}

Status Worker::LoadInitialModel() {
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, program_.MakeModel());
  model_ = std::make_unique<ShardedModel>(std::move(model), ps_ ? ps_->num_shards() : 1);
  if (!ps_) {
    // Evaluation and prediction jobs read the trained model's values.
    EDL_ASSIGN_OR_RETURN(proto::ModelValues values, rpc::ReadModelValues(spec_.trained_model()));
    return Annotate(model_->Apply(values), spec_.trained_model());
  }
  versions_.assign(ps_->num_shards(), -1);
  EDL_RETURN_IF_ERROR(Pull());
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

Status Worker::Pull() {
  std::vector<proto::PullRequest> requests(ps_->num_shards());
  for (int i = 0; i < ps_->num_shards(); ++i) requests[i].set_known_version(versions_[i]);
  std::vector<proto::PullResponse> responses;
  EDL_RETURN_IF_ERROR(ps_->Pull(requests, &responses));
  for (int i = 0; i < ps_->num_shards(); ++i) {
    const proto::PullResponse& r = responses[i];
    if (!r.initialized() || r.values().version() == versions_[i]) continue;
    EDL_RETURN_IF_ERROR(model_->Apply(r.values()));
    versions_[i] = r.values().version();
  }
  return absl::OkStatus();
}

StatusOr<std::shared_ptr<const RecordFile>> Worker::OpenFile(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordFile> file, RecordFile::Open(path));
  std::shared_ptr<const RecordFile> shared(std::move(file));
  files_[path] = shared;
  return shared;
}

StatusOr<Dataset<Example>> Worker::Batches(const proto::Task& task, Mode mode) {
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<const RecordFile> file, OpenFile(task.file()));
  Dataset<Record> records = ReadRecords(file, task.start(), task.end());
  EDL_ASSIGN_OR_RETURN(Dataset<Example> examples, program_.MakeDataset(records, mode));
  return examples.batch(spec_.minibatch_size());
}

Status Worker::TrainMinibatch(const Example& batch, double* loss_value) {
  // Shards still to accept this minibatch's gradients. In sync mode a shard
  // may refuse gradients computed on an outdated version: pull, compute
  // again and push to the refusing shards only.
  std::vector<int> pending(ps_->num_shards());
  for (int i = 0; i < ps_->num_shards(); ++i) pending[i] = i;
  while (!pending.empty()) {
    EDL_RETURN_IF_ERROR(Pull());
    Model& model = model_->model();
    model.zero_grad();
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs, program_.Forward(model, batch.features, true));
    EDL_ASSIGN_OR_RETURN(torch::Tensor loss, program_.Loss(batch.labels, outputs));
    try {
      loss.backward();
    } catch (const std::exception& e) {
      return program_.Annotate(absl::InvalidArgumentError(StrCat("backward failed: ", e.what())),
                               EntryKind::kLoss);
    }
    *loss_value = loss.item<double>();

    std::vector<proto::PushRequest> requests(ps_->num_shards());
    for (int i : pending) {
      requests[i].set_worker_id(options_.worker_id);
      requests[i].set_base_version(versions_[i]);
      EDL_RETURN_IF_ERROR(model_->FillPush(i, &requests[i]));
    }
    std::vector<proto::PushResponse> responses;
    EDL_RETURN_IF_ERROR(ps_->Push(requests, &responses, pending));
    std::vector<int> refused;
    for (int i : pending) {
      if (responses[i].accepted()) {
        model_->PushAccepted(i);
        pushed_version_ = std::max(pushed_version_, responses[i].version());
      } else {
        refused.push_back(i);
      }
    }
    pending = std::move(refused);
  }
  return absl::OkStatus();
}

Status Worker::Train(const proto::Task& task, proto::ReportTaskRequest* report) {
  EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, Batches(task, Mode::TRAINING));
  while (true) {
    StatusOr<std::optional<Example>> batch = batches.Next();
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    double loss = 0;
    EDL_RETURN_IF_ERROR(TrainMinibatch(**batch, &loss));
    report->set_loss_sum(report->loss_sum() + loss);
    report->set_minibatches(report->minibatches() + 1);
    report->set_records(report->records() + (**batch).labels.size(0));
  }
  int64_t version = pushed_version_;
  for (int64_t v : versions_) version = std::max(version, v);
  report->set_model_version(version);
  return absl::OkStatus();
}

Status Worker::Evaluate(const proto::Task& task, proto::ReportTaskRequest* report) {
  if (ps_) EDL_RETURN_IF_ERROR(Pull());
  EDL_ASSIGN_OR_RETURN(auto metrics, program_.MakeMetrics());
  EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, Batches(task, Mode::EVALUATION));
  torch::NoGradGuard no_grad;
  while (true) {
    StatusOr<std::optional<Example>> batch = batches.Next();
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs,
                         program_.Forward(model_->model(), (**batch).features, false));
    EDL_RETURN_IF_ERROR(program_.UpdateMetrics(metrics, (**batch).labels, outputs));
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

Status Worker::Predict(const proto::Task& task) {
  if (ps_) EDL_RETURN_IF_ERROR(Pull());
  EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, Batches(task, Mode::PREDICTION));
  torch::NoGradGuard no_grad;
  std::string csv;
  int64_t index = task.start();
  const std::string file = CsvField(task.file());
  while (true) {
    StatusOr<std::optional<Example>> batch = batches.Next();
    if (!batch.ok()) return DatasetError(batch.status());
    if (!batch->has_value()) break;
    EDL_ASSIGN_OR_RETURN(torch::Tensor outputs,
                         program_.Forward(model_->model(), (**batch).features, false));
    torch::Tensor rows = outputs.detach().to(torch::kFloat64).reshape({outputs.size(0), -1});
    auto a = rows.accessor<double, 2>();
    for (int64_t r = 0; r < a.size(0); ++r, ++index) {
      csv += StrCat(file, ",", index);
      for (int64_t c = 0; c < a.size(1); ++c) csv += fmt::format(",{:.9g}", a[r][c]);
      csv += '\n';
    }
  }
  if (index != task.end()) {
    return program_.Annotate(
        absl::InvalidArgumentError(StrCat("in PREDICTION mode dataset_fn must yield one example "
                                          "per record, in order; it yielded ",
                                          index - task.start(), " for ", task.end() - task.start(),
                                          " records")),
        EntryKind::kDatasetFn);
  }
  std::string dir = spec_.job_dir() + "/predictions";
  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  return rpc::WriteFileAtomically(StrCat(dir, "/task-", task.task_id(), ".csv"), csv);
}

Status Worker::Run() {
  EDL_RETURN_IF_ERROR(Register());
  EDL_RETURN_IF_ERROR(LoadInitialModel());
  while (true) {
    proto::GetTaskRequest request;
    request.set_worker_id(options_.worker_id);
    proto::GetTaskResponse response;
    auto context = rpc::MakeContext(kMasterTimeout);
    EDL_RETURN_IF_ERROR(Annotate(rpc::FromGrpc(master_->GetTask(context.get(), request, &response)),
                                 "asking the master for a task"));
    const proto::Task& task = response.task();
    if (task.type() == proto::TASK_NONE) return absl::OkStatus();
    if (task.type() == proto::TASK_WAIT) {
      std::this_thread::sleep_for(milliseconds(50));
      continue;
    }
    proto::ReportTaskRequest report;
    report.set_worker_id(options_.worker_id);
    report.set_task_id(task.task_id());
    Status s;
    switch (task.type()) {
      case proto::TASK_TRAINING:
        s = Train(task, &report);
        break;
      case proto::TASK_EVALUATION:
        s = Evaluate(task, &report);
        break;
      case proto::TASK_PREDICTION:
        s = Predict(task);
        break;
      default:
        s = absl::InvalidArgumentError(StrCat("unknown task type ", int(task.type())));
    }
    // Losing a parameter server is not the task's fault: stop, so that the
    // task is given to someone else.
    if (s.code() == absl::StatusCode::kUnavailable ||
        s.code() == absl::StatusCode::kDeadlineExceeded) {
      return s;
    }
    if (!s.ok()) {
      report.set_error(std::string(s.message()));
      spdlog::warn("task {} failed: {}", task.task_id(), report.error());
    }
    proto::ReportTaskResponse ignored;
    auto report_context = rpc::MakeContext(kMasterTimeout);
    EDL_RETURN_IF_ERROR(
        Annotate(rpc::FromGrpc(master_->ReportTask(report_context.get(), report, &ignored)),
                 "reporting a task to the master"));
  }
}

}  // namespace elasticdl::worker
