#include "master/master.h"

#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "master/data_source.h"
#include "master/journal.h"
#include "master/results.h"
#include "ps/checkpoint.h"
#include "rpc/grpc_util.h"
#include "rpc/job_token.h"

namespace elasticdl::master {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// How long one call to the servers for the results may take.
constexpr std::chrono::seconds kServerCallTimeout{60};
// A failed job's last checkpoint is not waited for long: its servers may
// be what failed it.
constexpr std::chrono::seconds kFailureCheckpointTimeout{10};
// How long the processes have after SIGTERM, at the end of a job that
// succeeded and of one that did not, before they are forced.
constexpr std::chrono::seconds kCleanEndGrace{10};
constexpr std::chrono::seconds kFailedEndGrace{1};

StatusOr<std::vector<Range>> IndexData(const google::protobuf::RepeatedPtrField<std::string>& specs,
                                       const char* flag, int64_t records_per_task,
                                       TaskSizes sizes = TaskSizes::kFullFirst) {
  std::vector<Shard> shards;
  for (const std::string& spec : specs) {
    auto files = ExpandDataPath(spec);
    if (!files.ok())
      return Status(files.status().code(), StrCat(flag, ": ", files.status().message()));
    EDL_ASSIGN_OR_RETURN(std::vector<Shard> s, OpenShards(*files, flag));
    shards.insert(shards.end(), s.begin(), s.end());
  }
  int64_t records = 0;
  for (const Shard& shard : shards) records += shard.num_records;
  if (!shards.empty() && records == 0) {
    return absl::InvalidArgumentError(
        StrCat(flag, "=", absl::StrJoin(specs, ","), ": its ", shards.size(),
               shards.size() == 1 ? " file holds" : " files hold", " no records"));
  }
  return SplitIntoTasks(shards, records_per_task, sizes);
}

// The job's tasks: new, or as the journal of an earlier master left them.
StatusOr<TaskManager> MakeTasks(const MasterConfig& config,
                                const std::optional<proto::MasterJournal>& journal) {
  const proto::TaskSpec& tasks = config.spec.tasks();
  const int64_t per_task = config.records_per_task;
  EDL_ASSIGN_OR_RETURN(
      std::vector<Range> training,
      IndexData(tasks.training_data(), "--training_data", per_task, config.training_task_sizes));
  EDL_ASSIGN_OR_RETURN(std::vector<Range> validation,
                       IndexData(tasks.validation_data(), "--validation_data", per_task));
  EDL_ASSIGN_OR_RETURN(std::vector<Range> prediction,
                       IndexData(tasks.prediction_data(), "--prediction_data", per_task));
  if (journal) {
    return TaskManager::FromLedger(config.tasks, std::move(training), std::move(validation),
                                   prediction, journal->ledger());
  }
  return TaskManager(config.tasks, std::move(training), std::move(validation), prediction);
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

std::string HostName() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

Master::Master(MasterConfig config, MasterPeers peers, bool resumed)
    : config_(std::move(config)),
      peers_(std::move(peers)),
      resumed_(resumed),
      service_(nullptr, config_.credentials.token, &changes_),
      events_(EventLogFile(config_.job_dir)) {}

Master::~Master() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
}

StatusOr<std::unique_ptr<Master>> Master::Start(MasterConfig config, MasterPeers peers) {
  if (!peers.connect_ps) peers.connect_ps = rpc::GrpcParameterServers(config.credentials);
  // A journal means an earlier master of this job died: resume its job. On
  // the same host it takes the old address, which workers and parameter
  // servers keep calling; on another (a Slurm node lost with it), or when
  // something else took the port meanwhile, they find the new one in the
  // job directory.
  EDL_ASSIGN_OR_RETURN(std::optional<proto::MasterJournal> journal, ReadJournal(config.job_dir));
  if (journal) {
    const HostPort before = SplitHostPort(journal->master_address());
    if (before.host == config.host || config.host.empty()) config.port = before.port;
  }
  EDL_ASSIGN_OR_RETURN(TaskManager tasks, MakeTasks(config, journal));

  std::unique_ptr<Master> m(new Master(std::move(config), std::move(peers), journal.has_value()));
  const MasterConfig& c = m->config_;
  // Calls are answered UNAVAILABLE until the job's state exists, which
  // needs the address the server got.
  StatusOr<std::unique_ptr<grpc::Server>> server = rpc::StartServer(
      c.host, c.port, {&m->service_}, &m->address_, c.credentials, kMaxMasterRequestBytes);
  if (!server.ok() && m->resumed_ && c.port != 0) {
    spdlog::warn("{}; serving on another port (the job's processes look for it in {})",
                 std::string(server.status().message()), MasterAddressFile(c.job_dir));
    server = rpc::StartServer(c.host, 0, {&m->service_}, &m->address_, c.credentials,
                              kMaxMasterRequestBytes);
  }
  EDL_RETURN_IF_ERROR(server.status());
  m->server_ = std::move(server).value();
  cluster::BackendConfig backend_config = c.backend;
  backend_config.master_address = m->address_;
  ExitQueue* exits = &m->exits_;
  Doorbell* changes = &m->changes_;
  EDL_ASSIGN_OR_RETURN(
      m->backend_,
      m->peers_.make_backend(backend_config, [exits, changes](const cluster::ProcessExit& e) {
        exits->Push(e);
        changes->Ring();
      }));

  JobStateOptions state_options = c.state;
  state_options.master_address = m->address_;
  state_options.clock = m->peers_.clock;
  // A spec without --min_workers: the first worker, or all of them where
  // others start them.
  state_options.job_starts_workers = m->backend_->starts_workers();
  if (state_options.wait_for_workers == 0) {
    state_options.wait_for_workers = state_options.job_starts_workers ? 1 : c.state.workers_target;
  }
  m->state_ =
      journal ? std::make_unique<JobState>(state_options, std::move(tasks), &m->events_, *journal)
              : std::make_unique<JobState>(state_options, std::move(tasks), &m->events_);
  m->service_.set_state(m->state_.get());

  ObserverOptions observer_options = c.observer;
  observer_options.connect_ps = m->peers_.connect_ps;
  StatusOr<std::unique_ptr<Observer>> observer =
      Observer::Start(observer_options, &m->events_, m->state_.get());
  if (observer.ok()) {
    m->observer_ = std::move(*observer);
    Observer* observer = m->observer_.get();
    m->service_.set_dashboard(observer->url(), [observer] { return observer->NewLoginUrl(); });
  } else {
    spdlog::warn("no dashboard for this job: {}", std::string(observer.status().message()));
  }
  EDL_RETURN_IF_ERROR(WriteFileAtomically(MasterAddressFile(c.job_dir), m->address_));
  m->events_.Append("master_started", {{"resumed", m->resumed_},
                                       {"pid", getpid()},
                                       {"address", m->address_},
                                       {"host", HostName()},
                                       {"dashboard", m->observer_ ? m->observer_->url() : ""}});
  spdlog::info("master serving on {}; job {}, seed {}{}", m->address_, c.spec.job_name(),
               c.spec.seed(), m->resumed_ ? " (resumed from its journal)" : "");
  if (m->observer_) {
    // No link here: the page asks for a login, which the client prints (a
    // one-time link), as `elasticdl job status` does.
    const std::string& url = m->observer_->url();
    const size_t scheme = url.find("://");
    spdlog::info("dashboard serving on {}; its login link: `elasticdl job status {}`",
                 scheme == std::string::npos ? url : url.substr(scheme + 3), c.job_dir);
  }
  if (!m->backend_->starts_workers()) {
    spdlog::info(
        "waiting for {} worker(s) to join: elasticdl worker --master={} --credentials_file={}",
        c.state.workers_target, m->address_, CredentialsFile(c.job_dir));
  }

  m->supervisor_ =
      std::make_unique<Supervisor>(c.supervisor, m->state_.get(), m->backend_.get(), &m->exits_);
  m->launched_ = m->resumed_ ? m->supervisor_->Adopt() : m->supervisor_->StartNew();
  if (c.publish_group) m->group_.emplace(m->peers_.connect_ps);
  // A resumed job's earlier evaluations are in the log already, but those
  // a master killed between its journal's commit and its next loop never
  // logged: they are logged now.
  if (m->resumed_) {
    m->evaluations_logged_ =
        std::min(m->events_.Count("evaluation"), m->state_->evaluations().size());
  }
  m->last_journal_write_ = m->peers_.clock->Now();
  return m;
}

std::unique_ptr<rpc::ParameterServers> Master::Servers(milliseconds timeout) {
  return peers_.connect_ps(state_->ps_addresses(), timeout);
}

void Master::FlushServers() {
  if (!state_->NeedsFlush()) return;
  std::vector<proto::FlushResponse> flushed;
  Status s = Servers(kServerCallTimeout)->Flush(&flushed, /*checkpoint=*/false);
  if (s.ok()) {
    // A step of the gradients that waited for one is a version of its own.
    for (const proto::FlushResponse& shard : flushed) state_->NoteModelVersion(shard.version());
    state_->Flushed();
  } else {
    spdlog::warn("applying the last gradients: {}; retrying", std::string(s.message()));
  }
}

void Master::LogEvaluations() {
  std::vector<Evaluation> evaluations = state_->evaluations();
  for (; evaluations_logged_ < evaluations.size(); ++evaluations_logged_) {
    const Evaluation& ev = evaluations[evaluations_logged_];
    spdlog::info("evaluation at model version {}:{}", ev.model_version, Describe(ev));
    events_.Append("evaluation", {{"model_version", ev.model_version}, {"metrics", ev.metrics}});
  }
}

StatusOr<bool> Master::WriteResults() {
  const proto::JobSpec& spec = config_.spec;
  Status written;
  // Every task went through a worker and not one step was taken: the
  // model's dataset_fn gave the workers no example to train on.
  if (const int64_t records = state_->progress().first;
      spec.type() == proto::JOB_TRAINING && state_->model_version() == 0 && records > 0) {
    return absl::FailedPreconditionError(
        StrCat("no minibatch was trained: the model is still at version 0 after its ", records,
               " training records went through the workers; does dataset_fn drop every example "
               "(a filter)?"));
  }
  if (spec.type() == proto::JOB_TRAINING) {
    Observer* observer = observer_.get();
    auto add_files = [observer](const std::string& dir) {
      return observer != nullptr ? observer->CopyEventFiles(dir) : Status();
    };
    written = config_.collective
                  ? WriteCollectiveTrainingResults(spec, state_->model_version(), add_files)
                  : WriteTrainingResults(spec, config_.checkpoint_at_end,
                                         Servers(kServerCallTimeout).get(), add_files);
    if (written.ok() && !spec.output().empty()) {
      spdlog::info("trained model written to {}", spec.output());
    }
  } else if (spec.type() == proto::JOB_PREDICTION) {
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(MergePredictions(spec, state_->prediction_tasks()),
                                     "writing predictions");
    spdlog::info("predictions written to {}", spec.output());
  }
  if (written.ok()) {
    state_->ResultsWritten();
    return true;
  }
  // A parameter server that ends after the last task (before the model is
  // read) is relaunched like any other, and its restore may reopen tasks:
  // the job trains on until the model can be read whole.
  const Clock::time_point now = peers_.clock->Now();
  if (!results_failing_since_) results_failing_since_ = now;
  if (!rpc::IsUnreachable(written) || now - *results_failing_since_ > config_.results_patience) {
    return written;
  }
  spdlog::warn("{}; trying again", std::string(written.message()));
  return false;
}

Status Master::KeepTrainedModel(const Status& failure) {
  const proto::JobSpec& spec = config_.spec;
  // (AllreduceStrategy's workers write the model's last checkpoint, which
  // the model is read from, only as they leave.)
  if (failure.ok() || absl::IsCancelled(failure) || spec.type() != proto::JOB_TRAINING ||
      config_.collective) {
    return failure;
  }
  if (!state_->trained_model_ready()) return KeepTrainingSoFar(failure);
  if (spec.output().empty()) return failure;
  StatusOr<bool> written = WriteResults();
  if (!written.ok() || !*written) {
    spdlog::warn(
        "the trained model is not written either: {}",
        written.ok() ? "it cannot be read whole now" : std::string(written.status().message()));
    return failure;
  }
  return Status(failure.code(),
                StrCat(failure.message(), " (training had finished: the trained model, version ",
                       state_->model_version(), ", is written to ", spec.output(), ")"));
}

Status Master::KeepTrainingSoFar(const Status& failure) {
  const proto::JobSpec& spec = config_.spec;
  // A diverged model is not one to go on from.
  if (state_->training_finished() || state_->diverged() || !state_->all_ps_registered()) {
    return failure;
  }
  std::vector<proto::FlushResponse> flushed;
  const Status written = Servers(kFailureCheckpointTimeout)->Flush(&flushed, /*checkpoint=*/true);
  if (!written.ok()) {
    spdlog::warn("the model as trained so far is not checkpointed: {}",
                 std::string(written.message()));
  }
  // Each server checkpoints the version it holds, and those may differ
  // (workers push until they are stopped; asynchronous steps): a new job
  // starts from the newest version every server wrote, which may be older.
  const std::string dir = spec.ps().checkpoint_dir().empty() ? CheckpointsDir(spec.job_dir())
                                                             : spec.ps().checkpoint_dir();
  StatusOr<ps::CompleteCheckpoint> newest = ps::FindNewestCompleteCheckpoint(dir);
  if (!newest.ok() || newest->version == 0) return failure;  // only the initial model
  return Status(failure.code(), StrCat(failure.message(), " (the model as trained so far, version ",
                                       newest->version,
                                       ", is checkpointed: a new job starts from it with "
                                       "--checkpoint_dir_for_init=",
                                       dir, ")"));
}

Status Master::Tick() {
  EDL_RETURN_IF_ERROR(supervisor_->Tick());
  if (group_) group_->Tick(state_.get());
  FlushServers();
  LogEvaluations();
  if (observer_) observer_->Tick();
  const Clock::time_point now = peers_.clock->Now();
  if (now - last_journal_write_ > config_.journal_every) {
    // A journal that cannot be written fails the job through the state.
    state_->FlushJournal().IgnoreError();
    last_journal_write_ = now;
  }
  if (std::optional<std::string> failure = state_->failure()) {
    return absl::AbortedError(*failure);
  }
  return absl::OkStatus();
}

Status Master::Run(const std::atomic<bool>* cancel) {
  Status outcome = launched_;
  // A failure to write the results is the job's last: nothing is written
  // again after it.
  bool writing_failed = false;
  while (outcome.ok()) {
    const auto tick_began = std::chrono::steady_clock::now();
    if (cancel != nullptr && cancel->load()) {
      outcome = absl::CancelledError("job cancelled");
      break;
    }
    outcome = Tick();
    if (!outcome.ok()) break;
    if (state_->finished() && state_->all_ps_registered() && !state_->NeedsFlush()) {
      StatusOr<bool> written = WriteResults();
      if (!written.ok()) {
        outcome = written.status();
        writing_failed = true;
        break;
      }
      if (*written) break;
      std::this_thread::sleep_for(milliseconds(500));
    }
    // Until something changes (or the idle tick, for leases and cadences),
    // and at most one pass a tick however often the job changes.
    changes_.WaitFor(config_.idle_tick);
    std::this_thread::sleep_until(tick_began + config_.tick);
  }
  if (!writing_failed) outcome = KeepTrainedModel(outcome);
  if (!outcome.ok()) state_->Fail(std::string(outcome.message()));
  LogEvaluations();
  // Workers leave by themselves, servers on SIGTERM. After a success they
  // get the longer grace: on a loaded node an orderly exit can take seconds,
  // and a process forced to end counts as cancelled in a cluster's
  // accounting. StopAll waits for them, up to a limit of the backend's own
  // after the grace.
  backend_->StopAll(outcome.ok() ? kCleanEndGrace : kFailedEndGrace);

  proto::GetJobStatusResponse final_status;
  state_->GetStatus(&final_status);
  if (!outcome.ok()) {
    final_status.set_failed(true);
    final_status.set_message(std::string(outcome.message()));
    final_status.set_cancelled(outcome.code() == absl::StatusCode::kCancelled);
  }
  final_status.set_finished(true);
  if (Status written = WriteStatus(config_.job_dir, final_status); !written.ok()) {
    // The client reads the end from here instead: serve it until it has.
    // It asks once a second (every 200 ms with a progress bar), each call
    // given 500 ms: on a loaded machine several may go unanswered.
    spdlog::warn("cannot leave the final status: {}", std::string(written.message()));
    service_.WaitForFinishedStatusRead(milliseconds(10000));
  }
  events_.Append("job_finished",
                 {{"failed", final_status.failed()}, {"message", final_status.message()}});
  server_->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  return outcome;
}

Status RunMaster(const MasterOptions& options, const std::atomic<bool>* cancel) {
  Status outcome;
  StatusOr<MasterConfig> config = ConfigureMaster(options);
  if (config.ok()) {
    StatusOr<std::unique_ptr<Master>> master = Master::Start(std::move(*config), MasterPeers());
    outcome = master.ok() ? (*master)->Run(cancel) : master.status();
  } else {
    outcome = config.status();
  }
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

}  // namespace elasticdl::master
