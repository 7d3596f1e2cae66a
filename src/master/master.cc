#include "master/master.h"

#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/backends.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "master/data_source.h"
#include "master/event_log.h"
#include "master/group_publisher.h"
#include "master/job_state.h"
#include "master/journal.h"
#include "master/master_service.h"
#include "master/observer.h"
#include "master/supervisor.h"
#include "rpc/grpc_util.h"
#include "rpc/job_spec.h"
#include "rpc/job_token.h"
#include "rpc/ps_client.h"
#include "rpc/trained_model.h"

namespace elasticdl::master {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// How long the results may fail to be written for want of a parameter
// server that is registered but does not answer, before the job fails.
constexpr std::chrono::seconds kResultsPatience{60};

StatusOr<std::vector<Range>> IndexData(const google::protobuf::RepeatedPtrField<std::string>& specs,
                                       const char* flag, int64_t records_per_task) {
  std::vector<Shard> shards;
  for (const std::string& spec : specs) {
    auto files = ExpandDataPath(spec);
    if (!files.ok())
      return Status(files.status().code(), StrCat(flag, ": ", files.status().message()));
    EDL_ASSIGN_OR_RETURN(std::vector<Shard> s, OpenShards(*files, flag));
    shards.insert(shards.end(), s.begin(), s.end());
  }
  return SplitIntoTasks(shards, records_per_task);
}

// Every parameter and buffer from all parameter servers.
StatusOr<proto::ModelValues> PullModel(const std::vector<std::string>& addresses,
                                       const std::string& token) {
  rpc::PsClient ps(addresses, token);
  std::vector<proto::PullRequest> requests(addresses.size());
  for (auto& r : requests) r.set_known_version(-1);
  std::vector<proto::PullResponse> responses;
  EDL_RETURN_IF_ERROR(ps.Pull(requests, &responses));
  proto::ModelValues all;
  for (const proto::PullResponse& r : responses) {
    if (!r.initialized()) return absl::FailedPreconditionError("a parameter server has no model");
    all.set_version(std::max(all.version(), r.values().version()));
    for (const auto& t : r.values().parameters()) *all.add_parameters() = t;
    for (const auto& t : r.values().buffers()) *all.add_buffers() = t;
  }
  // Every shard declares every table.
  *all.mutable_embedding_tables() = responses.front().values().embedding_tables();
  return all;
}

// The first tensor of `values` holding a NaN or an infinity; empty if none.
std::string FirstNonFinite(const proto::ModelValues& values) {
  auto scan = [](const proto::Tensor& t) {
    const std::string& bytes = t.content();
    auto all_finite = [&bytes](auto zero) {
      using T = decltype(zero);
      for (size_t at = 0; at + sizeof(T) <= bytes.size(); at += sizeof(T)) {
        T v;
        std::memcpy(&v, bytes.data() + at, sizeof(T));
        if (!std::isfinite(v)) return false;
      }
      return true;
    };
    if (t.dtype() == proto::DT_FLOAT32) return all_finite(float{});
    if (t.dtype() == proto::DT_FLOAT64) return all_finite(double{});
    return true;
  };
  for (const auto* tensors : {&values.parameters(), &values.buffers()}) {
    for (const proto::Tensor& t : *tensors) {
      if (!scan(t)) return t.name();
    }
  }
  return "";
}

Status CopyTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(StrCat("copying ", from, " to ", to, ": ", ec.message()));
  return absl::OkStatus();
}

Status WriteOutputModel(const proto::JobSpec& spec, const std::vector<std::string>& ps,
                        const std::string& token) {
  EDL_ASSIGN_OR_RETURN(proto::ModelValues values, PullModel(ps, token));
  if (std::string bad = FirstNonFinite(values); !bad.empty()) {
    return absl::DataLossError(StrCat("'", bad, "' holds non-finite values at model version ",
                                      values.version(), "; the model is not written"));
  }
  proto::TrainedModel record;
  record.set_zoo_identity(spec.model().zoo_identity());
  record.set_model_def(spec.model().model_def());
  record.set_model_def_params(spec.model().params());
  record.set_params_filename(rpc::kParametersFile);
  record.set_input_function(spec.model().dataset_fn());
  record.set_loss(spec.model().loss());
  record.set_optimizer(spec.model().optimizer());
  record.set_eval_metrics_fn(spec.model().eval_metrics_fn());
  record.set_model_zoo(spec.model().model_zoo());
  record.set_zoo_commit(spec.model().zoo_commit());
  record.set_image(spec.cluster().kubernetes().image());
  record.set_model_version(values.version());
  record.set_seed(spec.seed());
  record.set_has_embedding_tables(values.embedding_tables_size() > 0);
  *record.mutable_optimizer_config() = spec.model().optimizer_config();
  record.set_lr_schedule(spec.model().lr_schedule_description());
  if (values.embedding_tables_size() > 0) {
    // The tables stay where they are big: each server writes its rows.
    const std::string dir = spec.output() + "/" + rpc::kEmbeddingsDir;
    std::error_code ec;
    fs::remove_all(dir, ec);  // an earlier model's tables
    if (ec) return absl::InternalError(StrCat("cannot remove ", dir, ": ", ec.message()));
    rpc::PsClient client(ps, token);
    std::vector<proto::ExportResponse> exported;
    // One version directory for all: the model's version.
    EDL_RETURN_IF_ERROR(client.Export(dir, values.version(), &exported));
  }
  EDL_RETURN_IF_ERROR(rpc::WriteTrainedModel(spec.output(), record, values));
  return CopyTree(spec.job_dir() + "/" + rpc::kZooDir, spec.output() + "/" + rpc::kZooDir);
}

// Concatenates the workers' prediction parts in input order under a header.
Status MergePredictions(const proto::JobSpec& spec,
                        const std::vector<std::pair<Range, TaskId>>& tasks) {
  std::string out_path = spec.output();
  if (!HasSuffix(out_path, ".csv")) {
    EDL_RETURN_IF_ERROR(CreateDirectories(out_path));
    out_path += "/predictions.csv";
  }
  std::string body;
  size_t columns = 0;
  for (const auto& [range, id] : tasks) {
    EDL_ASSIGN_OR_RETURN(std::string part, ReadFileToString(StrCat(
                                               spec.job_dir(), "/predictions/task-", id, ".csv")));
    if (columns == 0 && !part.empty()) {
      std::string first = part.substr(0, part.find('\n'));
      // Columns after file and index; a quoted file name has no bare comma
      // count we can trust, so count from the right.
      columns = std::count(first.begin(), first.end(), ',') - 1;
      if (!first.empty() && first[0] == '"') {
        columns = std::count(first.begin() + first.rfind('"'), first.end(), ',') - 1;
      }
    }
    body += part;
  }
  std::string header = "file,index";
  for (size_t i = 0; i < columns; ++i) header += StrCat(",output_", i);
  return WriteFileAtomically(out_path, header + "\n" + body);
}

// The results of a job whose tasks are done: the last checkpoint (a later
// job starts from it), the trained model, the merged predictions.
// UNAVAILABLE when a parameter server cannot be reached.
Status WriteResults(const proto::JobSpec& spec, JobState* state, const std::string& token,
                    Observer* observer) {
  if (spec.type() == proto::JOB_TRAINING && spec.ps().checkpoint_steps() > 0) {
    rpc::PsClient ps(state->ps_addresses(), token);
    std::vector<proto::FlushResponse> flushed;
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(ps.Flush(&flushed, /*checkpoint=*/true),
                                     "writing the last checkpoint");
  }
  if (spec.type() == proto::JOB_TRAINING && !spec.output().empty()) {
    Status s = WriteOutputModel(spec, state->ps_addresses(), token);
    if (s.ok() && observer != nullptr) s = observer->CopyEventFiles(spec.output());
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(s, "writing the trained model");
    spdlog::info("trained model written to {}", spec.output());
  }
  if (spec.type() == proto::JOB_PREDICTION) {
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(MergePredictions(spec, state->prediction_tasks()),
                                     "writing predictions");
    spdlog::info("predictions written to {}", spec.output());
  }
  return absl::OkStatus();
}

std::string Describe(const Evaluation& ev) {
  std::string s;
  for (const auto& [name, value] : ev.metrics) s += fmt::format(" {}={:.6f}", name, value);
  return s;
}

Status WriteStatus(const std::string& job_dir, const proto::GetJobStatusResponse& status) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(status, &text);
  return WriteFileAtomically(FinalStatusFile(job_dir), text);
}

Status Run(const MasterOptions& options);

}  // namespace

Status RunMaster(const MasterOptions& options) {
  Status outcome = Run(options);
  // A job that could not start (unreadable data, no port) has no status yet:
  // leave one, so the client can say why.
  std::error_code ec;
  if (!outcome.ok() && !fs::exists(FinalStatusFile(options.job_dir), ec)) {
    proto::GetJobStatusResponse status;
    status.set_finished(true);
    status.set_failed(true);
    status.set_message(std::string(outcome.message()));
    WriteStatus(options.job_dir, status).IgnoreError();
  }
  return outcome;
}

namespace {

// "host:port" -> port; 0 when there is none.
int PortOf(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

// Where the master listens: the cluster's master_addr ("host:port"; port 0
// or none picks a free one), else 127.0.0.1 on this machine and the node's
// name under Slurm, which the other nodes resolve.
Status BindAddress(const proto::ClusterSpec& cluster, std::string* host, int* port) {
  if (!cluster.master_addr().empty()) {
    const std::string& addr = cluster.master_addr();
    size_t colon = addr.rfind(':');
    *host = addr.substr(0, colon);
    *port = colon == std::string::npos ? 0 : PortOf(addr);
    if (host->empty()) {
      return absl::InvalidArgumentError(StrCat("--master_addr=", addr, ": expected HOST:PORT"));
    }
    return absl::OkStatus();
  }
  if (cluster.kind() == "slurm") {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) {
      return absl::InternalError("gethostname failed");
    }
    *host = name;
  }
  return absl::OkStatus();
}

void LogEvaluations(JobState* state, EventLog* events, size_t* logged) {
  std::vector<Evaluation> evaluations = state->evaluations();
  for (; *logged < evaluations.size(); ++*logged) {
    const Evaluation& ev = evaluations[*logged];
    spdlog::info("evaluation at model version {}:{}", ev.model_version, Describe(ev));
    events->Append("evaluation", {{"model_version", ev.model_version}, {"metrics", ev.metrics}});
  }
}

Status Run(const MasterOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, rpc::ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(std::string token, rpc::ReadJobToken(options.job_dir));
  const proto::TaskSpec& tasks = spec.tasks();
  const int64_t per_task = tasks.minibatch_size() * tasks.num_minibatches_per_task();
  if (per_task <= 0) return absl::InvalidArgumentError("records per task must be positive");
  EDL_ASSIGN_OR_RETURN(std::vector<Range> training,
                       IndexData(tasks.training_data(), "--training_data", per_task));
  EDL_ASSIGN_OR_RETURN(std::vector<Range> validation,
                       IndexData(tasks.validation_data(), "--validation_data", per_task));
  EDL_ASSIGN_OR_RETURN(std::vector<Range> prediction,
                       IndexData(tasks.prediction_data(), "--prediction_data", per_task));

  TaskManagerOptions task_options;
  task_options.job_type = spec.type();
  task_options.num_epochs = tasks.num_epochs();
  task_options.shuffle_seed = tasks.shuffle_seed();
  task_options.max_task_retries = spec.fault_tolerance().max_task_retries();
  task_options.evaluation_steps = tasks.evaluation_steps();
  task_options.minibatch_size = tasks.minibatch_size();
  task_options.max_steps = tasks.max_steps();
  task_options.early_stopping = tasks.early_stopping();
  if (spec.type() == proto::JOB_EVALUATION) {
    EDL_ASSIGN_OR_RETURN(proto::TrainedModel model,
                         rpc::ReadTrainedModelRecord(spec.model().trained_model()));
    task_options.model_version = model.model_version();
  }
  // Evaluation and prediction need servers for a model's embedding tables.
  const int num_ps =
      spec.type() == proto::JOB_TRAINING || !spec.ps().checkpoint_dir_for_init().empty()
          ? spec.ps().num_ps()
          : 0;

  // A journal means an earlier master of this job died: resume its job.
  EDL_ASSIGN_OR_RETURN(std::optional<proto::MasterJournal> journal, ReadJournal(options.job_dir));
  std::string host = options.host;
  int port = options.port;
  EDL_RETURN_IF_ERROR(BindAddress(spec.cluster(), &host, &port));
  if (journal) {
    // Workers and parameter servers keep calling the old address.
    port = PortOf(journal->master_address());
  }
  MasterService service(nullptr, token);
  std::string address;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<grpc::Server> server,
                       rpc::StartServer(host, port, {&service}, &address, kMaxMasterRequestBytes));

  ExitQueue exits;
  cluster::BackendConfig backend_config;
  backend_config.kind = spec.cluster().kind().empty() ? "local" : spec.cluster().kind();
  backend_config.binary =
      spec.cluster().binary().empty() ? options.binary : spec.cluster().binary();
  backend_config.job_dir = options.job_dir;
  backend_config.job_name = spec.job_name();
  backend_config.master_address = address;
  backend_config.partition = spec.cluster().partition();
  backend_config.kubernetes = spec.cluster().kubernetes();
  backend_config.worker_threads = spec.workers().threads();
  EDL_ASSIGN_OR_RETURN(
      std::unique_ptr<cluster::ClusterBackend> backend,
      options.make_backend(backend_config,
                           [&exits](const cluster::ProcessExit& e) { exits.Push(e); }));

  JobStateOptions state_options;
  state_options.type = spec.type();
  state_options.num_ps = num_ps;
  state_options.workers_target = spec.workers().num_workers();
  if (spec.fault_tolerance().worker_lease_ms() > 0) {
    state_options.worker_lease =
        std::chrono::milliseconds(spec.fault_tolerance().worker_lease_ms());
  }
  state_options.job_dir = options.job_dir;
  state_options.master_address = address;
  const proto::UpdateRule::Mode update = spec.ps().update().mode();
  state_options.flush_at_end =
      spec.type() == proto::JOB_TRAINING && update != proto::UpdateRule::ASYNC;
  state_options.max_nonfinite_minibatches = spec.fault_tolerance().max_nonfinite_minibatches();
  if (!backend->starts_workers()) state_options.wait_for_workers = spec.workers().num_workers();
  EventLog events(EventLogFile(options.job_dir));
  std::unique_ptr<JobState> state;
  if (journal) {
    EDL_ASSIGN_OR_RETURN(
        TaskManager tasks,
        TaskManager::FromLedger(task_options, std::move(training), std::move(validation),
                                prediction, journal->ledger()));
    state = std::make_unique<JobState>(state_options, std::move(tasks), &events, *journal);
  } else {
    state = std::make_unique<JobState>(
        state_options,
        TaskManager(task_options, std::move(training), std::move(validation), prediction), &events);
  }
  service.set_state(state.get());
  // The dashboard is for people: a job goes on without it.
  ObserverOptions observer_options;
  observer_options.job_dir = options.job_dir;
  observer_options.job_name = spec.job_name();
  observer_options.host = host;
  observer_options.token = token;
  StatusOr<std::unique_ptr<Observer>> observer =
      Observer::Start(observer_options, &events, state.get());
  if (!observer.ok()) {
    spdlog::warn("no dashboard for this job: {}", std::string(observer.status().message()));
  }
  EDL_RETURN_IF_ERROR(WriteFileAtomically(MasterAddressFile(options.job_dir), address));
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  events.Append("master_started", {{"resumed", journal.has_value()},
                                   {"pid", getpid()},
                                   {"address", address},
                                   {"host", hostname},
                                   {"dashboard", observer.ok() ? (*observer)->url() : ""}});
  spdlog::info("master serving on {}; job {}, seed {}{}", address, spec.job_name(), spec.seed(),
               journal ? " (resumed from its journal)" : "");
  if (observer.ok()) spdlog::info("dashboard at {}", (*observer)->url());

  if (!backend->starts_workers()) {
    spdlog::info("waiting for {} worker(s) to join: elasticdl worker --master={} --token_file={}",
                 spec.workers().num_workers(), address, rpc::JobTokenPath(options.job_dir));
  }
  SupervisorOptions supervisor_options;
  supervisor_options.num_ps = num_ps;
  supervisor_options.max_worker_relaunches = spec.fault_tolerance().max_worker_relaunches();
  supervisor_options.max_ps_relaunches = spec.fault_tolerance().max_ps_relaunches();
  Supervisor supervisor(supervisor_options, state.get(), backend.get(), &exits);

  Status outcome = journal ? supervisor.Adopt() : supervisor.StartNew();
  auto fail = [&](Status s) {
    if (outcome.ok()) outcome = std::move(s);
    state->Fail(std::string(outcome.message()));
  };
  if (!outcome.ok()) state->Fail(std::string(outcome.message()));
  // Synchronous training: the gradients still waiting for a step when
  // training ends are applied before the model is read.
  auto flush_servers = [&] {
    if (!state->NeedsFlush()) return;
    rpc::PsClient ps(state->ps_addresses(), token);
    std::vector<proto::FlushResponse> flushed;
    Status s = ps.Flush(&flushed);
    if (s.ok()) {
      state->Flushed();
    } else {
      spdlog::warn("applying the last gradients: {}; retrying", std::string(s.message()));
    }
  };
  // Synchronous steps of the group wait for the workers that train.
  std::optional<GroupPublisher> group;
  if (spec.type() == proto::JOB_TRAINING && update == proto::UpdateRule::SYNC_EVERY_WORKER) {
    group.emplace(token);
  }
  // A resumed job's earlier evaluations are in the log already.
  size_t evaluations_logged = journal ? state->evaluations().size() : 0;
  auto last_journal_write = std::chrono::steady_clock::now();
  // Runs until the results are written: a parameter server that ends after
  // the last task (before the model is read) is relaunched like any other,
  // and its restore may reopen tasks, so the job trains on until it can be
  // read whole.
  std::optional<std::chrono::steady_clock::time_point> results_failing_since;
  while (outcome.ok()) {
    if (options.cancel != nullptr && options.cancel->load()) {
      fail(absl::CancelledError("job cancelled"));
      break;
    }
    Status s = supervisor.Tick();
    if (!s.ok()) fail(s);
    if (group) group->Tick(state.get());
    flush_servers();
    LogEvaluations(state.get(), &events, &evaluations_logged);
    if (observer.ok()) (*observer)->Tick();
    if (std::chrono::steady_clock::now() - last_journal_write > milliseconds(500)) {
      state->FlushJournal().IgnoreError();
      last_journal_write = std::chrono::steady_clock::now();
    }
    if (outcome.ok() && state->failure()) outcome = absl::AbortedError(*state->failure());
    if (!outcome.ok()) break;
    if (state->finished() && state->all_ps_registered() && !state->NeedsFlush()) {
      Status written =
          WriteResults(spec, state.get(), token, observer.ok() ? observer->get() : nullptr);
      if (written.ok()) break;
      const auto now = std::chrono::steady_clock::now();
      if (!results_failing_since) results_failing_since = now;
      if (!rpc::IsUnreachable(written) || now - *results_failing_since > kResultsPatience) {
        fail(written);
        break;
      }
      spdlog::warn("{}; trying again", std::string(written.message()));
      std::this_thread::sleep_for(milliseconds(500));
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  LogEvaluations(state.get(), &events, &evaluations_logged);
  // Workers see the end of the job and leave by themselves; give them a
  // moment, then stop everyone.
  backend->StopAll(milliseconds(outcome.ok() ? 3000 : 1000));

  proto::GetJobStatusResponse final_status;
  state->GetStatus(&final_status);
  if (!outcome.ok()) {
    final_status.set_failed(true);
    final_status.set_message(std::string(outcome.message()));
    final_status.set_cancelled(outcome.code() == absl::StatusCode::kCancelled);
  }
  final_status.set_finished(true);
  WriteStatus(options.job_dir, final_status).IgnoreError();
  events.Append("job_finished",
                {{"failed", final_status.failed()}, {"message", final_status.message()}});
  server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  return outcome;
}

}  // namespace

}  // namespace elasticdl::master
