#include "experiment/experiment_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <memory>
#include <thread>

#include "client/job_control.h"
#include "client/job_runner.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "experiment/experiment_journal.h"
#include "experiment/trial_check.h"
#include "job/trained_model.h"
#include "ps/checkpoint.h"

namespace elasticdl::experiment {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string LockPath(const std::string& dir) { return dir + "/client.lock"; }
std::string StopPath(const std::string& dir) { return dir + "/stop"; }

// The client's hold on an experiment: an exclusive flock(2) on
// <dir>/client.lock, which holds the client's pid. Released when the
// process ends, however it ends.
class ClientLock {
 public:
  // ALREADY_EXISTS naming the running client's pid when another holds it.
  static StatusOr<std::unique_ptr<ClientLock>> Acquire(const std::string& dir) {
    const std::string path = LockPath(dir);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return absl::InternalError(StrCat("cannot open ", path));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      StatusOr<std::string> pid = ReadFileToString(path);
      return absl::AlreadyExistsError(StrCat("the experiment in ", dir,
                                             " is being run by another client (pid ",
                                             pid.ok() ? *pid : std::string("?"), ")"));
    }
    const std::string pid = std::to_string(::getpid());
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      ::close(fd);
      return absl::InternalError(StrCat("cannot write ", path));
    }
    return std::unique_ptr<ClientLock>(new ClientLock(fd));
  }
  ~ClientLock() { ::close(fd_); }

 private:
  explicit ClientLock(int fd) : fd_(fd) {}
  const int fd_;
};

// The pid of the client running the experiment in `dir`, if one does.
std::optional<std::string> RunningClient(const std::string& dir) {
  const int fd = ::open(LockPath(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  if (!held) return std::nullopt;
  StatusOr<std::string> pid = ReadFileToString(LockPath(dir));
  return pid.ok() ? *pid : std::string("?");
}

// One rung being trained: a training job run by a thread of its own.
struct Running {
  RungRun run;
  std::string job_dir;
  std::string log_file;
  Clock::time_point started;
  // The workers the job was last asked to run (-1: not known, e.g. a
  // resumed job).
  int workers_applied = -1;
  std::atomic<bool> cancel{false};
  std::atomic<bool> done{false};
  // Set by the thread before `done`.
  Status status;
  proto::GetJobStatusResponse final_status;
  std::thread thread;
};

// The experiment's `output` is replaced only where an earlier run of it left
// the best trial's model: a trained model of the same trial. Anything else
// there (a user's folder, the working directory) is refused, and nothing of
// it is deleted.
Status CheckOutputReplaceable(const ExperimentConfig& config) {
  std::error_code ec;
  if (!fs::exists(config.output, ec)) return absl::OkStatus();
  StatusOr<proto::TrainedModel> record = ReadTrainedModelRecord(config.output);
  if (record.ok() && record->model_def() == config.trial) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat(config.path, ": output ", config.output, " exists and is not a trained model of ",
             config.trial,
             "; name a new directory (the best trial's model replaces only one of "
             "this experiment's)"));
}

class Runner {
 public:
  Runner(ExperimentConfig config, ExperimentState state, ExperimentJournal journal,
         std::vector<int64_t> rung_epochs, JobArgs base, const ExperimentOptions& options)
      : config_(std::move(config)),
        state_(std::move(state)),
        journal_(std::move(journal)),
        rung_epochs_(std::move(rung_epochs)),
        base_(std::move(base)),
        options_(options) {}

  StatusOr<ExperimentReport> Run();

 private:
  bool StopRequested() const {
    return (options_.cancel != nullptr && options_.cancel->load()) ||
           ::access(StopPath(config_.experiment_dir).c_str(), F_OK) == 0;
  }
  std::string JobDir(const RungRun& run) const {
    return StrCat(config_.experiment_dir, "/trials/", run.trial, "/rung-", run.rung);
  }
  // The job settings of a rung.
  JobArgs ArgsOf(const RungRun& run, int workers, const std::atomic<bool>* cancel) const;
  Status Start(const RungRun& run, bool journal);
  // Journals and applies the end of a rung whose thread finished.
  Status Finish(Running* r);
  // Each running trial's share of the pool: max_workers / running, the
  // remainder to the trials started first.
  int ShareOf(size_t index) const;
  void Rebalance();
  void SampleUsage(double dt);
  nlohmann::json UsageFields() const {
    return {{"busy_worker_seconds", usage_.busy_worker_seconds},
            {"pool_seconds", usage_.pool_seconds}};
  }
  Status WriteResults();
  void Say(const std::string& line) const {
    std::fprintf(options_.out, "[experiment] %s\n", line.c_str());
    std::fflush(options_.out);
  }

  const ExperimentConfig config_;
  ExperimentState state_;
  ExperimentJournal journal_;
  const std::vector<int64_t> rung_epochs_;
  const JobArgs base_;
  const ExperimentOptions& options_;
  std::list<Running> running_;
  PoolUsage usage_;
};

JobArgs Runner::ArgsOf(const RungRun& run, int workers, const std::atomic<bool>* cancel) const {
  JobArgs args = base_;
  const std::string job_dir = JobDir(run);
  args.model_zoo = config_.model_zoo;
  args.model_def = config_.trial;
  args.params = state_.searcher().hparams(run.trial).ToString();
  args.training_data = config_.training_data;
  args.validation_data = config_.validation_data;
  args.num_epochs = rung_epochs_[run.rung] - (run.rung > 0 ? rung_epochs_[run.rung - 1] : 0);
  args.num_workers = workers;
  args.job_dir = job_dir;
  args.job_name = StrCat(config_.name, "-trial-", run.trial, "-rung-", run.rung);
  args.output = job_dir + "/model";
  args.checkpoint_dir = CheckpointsDir(job_dir);
  if (args.checkpoint_steps <= 0) args.checkpoint_steps = 50;
  if (run.rung > 0)
    args.checkpoint_dir_for_init = CheckpointsDir(JobDir({run.trial, run.rung - 1}));
  // Each trial and rung its own, reproducible randomness.
  args.seed = config_.seed * 1000003 + static_cast<uint64_t>(run.trial) * 101 +
              static_cast<uint64_t>(run.rung);
  args.progress = false;
  args.detach = false;
  args.cancel = cancel;
  args.log_file = job_dir + ".log";
  return args;
}

int Runner::ShareOf(size_t index) const {
  const int n = static_cast<int>(running_.size());
  const int pool = static_cast<int>(config_.max_workers);
  return pool / n + (static_cast<int>(index) < pool % n ? 1 : 0);
}

Status Runner::Start(const RungRun& run, bool journal) {
  Running& r = running_.emplace_back();
  r.run = run;
  r.job_dir = JobDir(run);
  r.started = Clock::now();
  const int workers = ShareOf(running_.size() - 1);
  JobArgs args = ArgsOf(run, workers, &r.cancel);
  r.log_file = args.log_file;
  if (journal) {
    EDL_RETURN_IF_ERROR(journal_.Append("rung_started", {{"trial", run.trial},
                                                         {"rung", run.rung},
                                                         {"hparams", args.params},
                                                         {"epochs", args.num_epochs},
                                                         {"job_dir", r.job_dir}}));
    EDL_RETURN_IF_ERROR(state_.Apply({{"event", "rung_started"},
                                      {"trial", run.trial},
                                      {"rung", run.rung},
                                      {"job_dir", r.job_dir}},
                                     /*live=*/true));
  }
  EDL_RETURN_IF_ERROR(CreateDirectories(fs::path(r.job_dir).parent_path().string()));
  const bool prepared =
      fs::exists(JobSpecFile(r.job_dir)) && fs::exists(CredentialsFile(r.job_dir));
  if (!prepared) r.workers_applied = workers;
  Say(StrCat(prepared ? "resuming" : "starting", " trial ", run.trial, " rung ", run.rung, " (",
             args.num_epochs, " epoch(s), ", workers, " worker(s)): ", args.params, "; log ",
             r.log_file));
  r.thread = std::thread([&r, args = std::move(args), was_prepared = prepared] {
    bool prepared = was_prepared;
    if (prepared && !ps::FindNewestCompleteCheckpoint(CheckpointsDir(r.job_dir)).ok()) {
      // Stopped before its first checkpoint: nothing of it can be restored
      // (a parameter server that ended took its progress), so it starts over.
      std::error_code ec;
      fs::remove_all(r.job_dir, ec);
      prepared = false;
    }
    if (prepared) {
      // A rung the last client left: its final status if it ended, else
      // its master again, resuming from the job's journal.
      if (auto final_status = client::ReadFinalStatus(r.job_dir); final_status.ok()) {
        if (final_status->cancelled()) {
          // Stopped by `experiment stop`: its master goes on with it.
          std::error_code ec;
          fs::remove(FinalStatusFile(r.job_dir), ec);
        } else {
          r.final_status = *final_status;
          if (final_status->failed()) r.status = absl::AbortedError(final_status->message());
          r.done = true;
          return;
        }
      }
    } else {
      StatusOr<proto::JobSpec> spec = client::PrepareTraining(args);
      if (!spec.ok()) {
        r.status = spec.status();
        r.done = true;
        return;
      }
    }
    client::RunJobOptions run;
    run.job_dir = r.job_dir;
    run.progress = false;
    run.cancel = &r.cancel;
    run.log_file = r.log_file;
    StatusOr<proto::GetJobStatusResponse> status = client::RunJob(run);
    if (status.ok()) {
      r.final_status = *status;
    } else {
      r.status = status.status();
    }
    r.done = true;
  });
  return absl::OkStatus();
}

Status Runner::Finish(Running* r) {
  r->thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - r->started).count();
  const RungRun run = r->run;
  if (r->status.code() == absl::StatusCode::kCancelled) {
    Say(StrCat("trial ", run.trial, " rung ", run.rung, " stopped; `resume` runs it on"));
    return absl::OkStatus();
  }
  bool ok = r->status.ok();
  std::string message(r->status.message());
  std::optional<double> metric;
  if (ok) {
    const auto& metrics = r->final_status.eval_metrics();
    auto it = metrics.find(config_.searcher.metric);
    if (it == metrics.end()) {
      ok = false;
      message = StrCat("the job's last evaluation has no metric '", config_.searcher.metric,
                       "' (job directory ", r->job_dir, ")");
    } else if (!std::isfinite(it->second)) {
      ok = false;
      message = StrCat(config_.searcher.metric, " is ", it->second);
    } else {
      metric = it->second;
    }
  }
  nlohmann::json fields = {{"trial", run.trial}, {"rung", run.rung},
                           {"ok", ok},           {"records", r->final_status.records_done()},
                           {"seconds", seconds}, {"message", message}};
  fields["metric"] = metric ? nlohmann::json(*metric) : nlohmann::json(nullptr);
  fields.update(UsageFields());
  EDL_RETURN_IF_ERROR(journal_.Append("rung_finished", fields));
  fields["event"] = "rung_finished";
  EDL_RETURN_IF_ERROR(state_.Apply(fields, /*live=*/true));
  if (ok) {
    Say(StrCat("trial ", run.trial, " rung ", run.rung, " done: ", config_.searcher.metric, " ",
               *metric, " after ", r->final_status.records_done(), " records in ",
               fmt::format("{:.1f}", seconds), " s"));
  } else {
    Say(StrCat("trial ", run.trial, " rung ", run.rung, " failed: ", message));
  }
  return WriteResults();
}

void Runner::Rebalance() {
  // Growing is at once; shrinking waits until every running trial has its
  // master up, so that no worker leaves before another can use its core.
  bool all_up = true;
  for (const Running& r : running_) all_up = all_up && fs::exists(MasterAddressFile(r.job_dir));
  size_t index = 0;
  for (Running& r : running_) {
    const int share = ShareOf(index++);
    if (r.done || share == r.workers_applied) continue;
    if (share < r.workers_applied && !all_up) continue;
    if (!fs::exists(MasterAddressFile(r.job_dir))) continue;
    if (client::ScaleJob(r.job_dir, share, milliseconds(1000)).ok()) {
      if (r.workers_applied >= 0) {
        Say(StrCat("trial ", r.run.trial, ": ", r.workers_applied, " -> ", share, " worker(s)"));
      }
      r.workers_applied = share;
    }
  }
}

void Runner::SampleUsage(double dt) {
  if (running_.empty()) return;
  int64_t alive = 0;
  for (const Running& r : running_) {
    if (r.done) continue;
    StatusOr<proto::GetJobStatusResponse> s = client::GetJobStatus(r.job_dir, milliseconds(300));
    if (s.ok() && !s->finished()) alive += s->workers_alive();
  }
  usage_.busy_worker_seconds += dt * static_cast<double>(std::min(alive, config_.max_workers));
  usage_.pool_seconds += dt * static_cast<double>(config_.max_workers);
}

Status Runner::WriteResults() {
  return WriteFileAtomically(config_.experiment_dir + "/trials.csv",
                             TrialsCsv(state_, config_.searcher.metric));
}

StatusOr<ExperimentReport> Runner::Run() {
  const auto start = Clock::now();
  usage_ = state_.usage();
  // Interrupted rungs first, in their own job directories.
  for (const RungRun& run : state_.Unfinished()) EDL_RETURN_IF_ERROR(Start(run, false));
  auto last_sample = Clock::now();
  bool stopping = false;
  Status failure;
  while (true) {
    if (!stopping && StopRequested()) {
      stopping = true;
      Say("stopping the running trials");
      for (Running& r : running_) r.cancel = true;
    }
    for (auto it = running_.begin(); it != running_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      Status s = Finish(&*it);
      if (!s.ok() && failure.ok()) failure = s;
      it = running_.erase(it);
    }
    if (!failure.ok() && !stopping) {
      stopping = true;
      for (Running& r : running_) r.cancel = true;
    }
    Rebalance();
    while (!stopping &&
           static_cast<int64_t>(running_.size()) < config_.searcher.max_concurrent_trials) {
      std::optional<RungRun> next = state_.Next();
      if (!next) break;
      Status s = Start(*next, true);
      if (!s.ok()) {
        failure = s;
        stopping = true;
        for (Running& r : running_) r.cancel = true;
      }
      Rebalance();
    }
    if (running_.empty()) break;
    std::this_thread::sleep_for(milliseconds(250));
    const auto now = Clock::now();
    SampleUsage(std::chrono::duration<double>(now - last_sample).count());
    last_sample = now;
  }
  EDL_RETURN_IF_ERROR(failure);

  ExperimentReport report;
  report.experiment_dir = config_.experiment_dir;
  if (stopping) {
    EDL_RETURN_IF_ERROR(journal_.Append("stopped", UsageFields()));
    EDL_RETURN_IF_ERROR(state_.Apply({{"event", "stopped"}}, true));
    std::error_code ec;
    fs::remove(StopPath(config_.experiment_dir), ec);
    report.status = "stopped";
  } else {
    report.status = "finished";
  }
  bool any_completed = false;
  for (const auto& [id, row] : state_.trials()) any_completed = any_completed || row.metric;
  if (!stopping && !any_completed) {
    return absl::AbortedError(
        StrCat("every trial failed; the first: ", state_.trials().begin()->second.message, " (see ",
               config_.experiment_dir, "/trials.csv)"));
  }
  if (std::optional<RungRun> best = state_.Best()) {
    report.best_trial = best->trial;
    report.best_metric = state_.trials().at(best->trial).metric;
    if (!stopping) {
      // The best trial's trained model, as an ordinary --output directory,
      // published whole (copied into the staging directory, synced, put in
      // place in one step); what was there goes only if it is this
      // experiment's (checked again: the experiment may have run for hours).
      EDL_RETURN_IF_ERROR(CheckOutputReplaceable(config_));
      const std::string from = JobDir(*best) + "/model";
      Status published = PublishTrainedModel(config_.output, [&](const std::string& staging) {
        std::error_code ec;
        fs::copy(from, staging, fs::copy_options::recursive, ec);
        if (ec) {
          return absl::InternalError(StrCat("copying ", from, " to ", staging, ": ", ec.message()));
        }
        return absl::OkStatus();
      });
      if (!published.ok()) {
        return Annotate(published, StrCat("cannot publish ", from, " as ", config_.output));
      }
      report.output = config_.output;
    }
  }
  if (!stopping) {
    nlohmann::json fields = UsageFields();
    if (report.best_trial) {
      fields["best_trial"] = *report.best_trial;
      fields["output"] = report.output;
    }
    EDL_RETURN_IF_ERROR(journal_.Append("finished", fields));
    fields["event"] = "finished";
    EDL_RETURN_IF_ERROR(state_.Apply(fields, true));
  }
  EDL_RETURN_IF_ERROR(WriteResults());
  report.table = TrialsTable(state_, config_.searcher.metric);
  report.csv = config_.experiment_dir + "/trials.csv";
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& [id, row] : state_.trials()) report.records += row.records;
  report.usage = usage_;
  return report;
}

// The configuration, with the experiment directory the options ask for.
StatusOr<ExperimentConfig> ConfigOf(const ExperimentOptions& options) {
  EDL_ASSIGN_OR_RETURN(ExperimentConfig config, LoadExperimentConfig(options.config));
  if (!options.experiment_dir.empty()) {
    // The best model follows the directory, unless the file names its place.
    const bool default_output = config.output == config.experiment_dir + "/best_model";
    config.experiment_dir = AbsolutePath(options.experiment_dir);
    if (default_output) config.output = config.experiment_dir + "/best_model";
  }
  return config;
}

// The state the journal of `config`'s experiment describes.
StatusOr<ExperimentState> Replay(const ExperimentConfig& config,
                                 const std::vector<nlohmann::json>& events) {
  EDL_ASSIGN_OR_RETURN(ExperimentState state, ExperimentState::Create(config));
  for (const nlohmann::json& e : events) {
    Status s = state.Apply(e, /*live=*/false);
    if (!s.ok()) return Annotate(s, ExperimentJournalPath(config.experiment_dir));
  }
  return state;
}

StatusOr<ExperimentReport> Launch(const ExperimentOptions& options, bool resume) {
  EDL_ASSIGN_OR_RETURN(ExperimentConfig config, ConfigOf(options));
  const std::string& dir = config.experiment_dir;
  EDL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> events, ReadExperimentJournal(dir));
  if (!resume && !events.empty()) {
    return absl::AlreadyExistsError(
        StrCat("an experiment exists in ", dir, ": `elasticdl experiment --config=", options.config,
               " resume` goes on with it (or remove the directory to start again)"));
  }
  if (resume && events.empty()) {
    return absl::NotFoundError(
        StrCat("no experiment to resume in ", dir, " (no ", ExperimentJournalPath(dir), ")"));
  }
  if (resume && events.front().value("config", "") != config.text) {
    return absl::FailedPreconditionError(StrCat(
        options.config, " has changed since the experiment in ", dir,
        " started; resume needs the same configuration (it is in the journal's first line)"));
  }
  if (resume && events.back().value("event", "") == "finished") {
    return absl::FailedPreconditionError(
        StrCat("the experiment in ", dir, " has finished; `status` shows its trials"));
  }
  // Everything that can be checked is, before any trial runs.
  EDL_ASSIGN_OR_RETURN(JobArgs base, BaseJobArgs(config));
  EDL_ASSIGN_OR_RETURN(int64_t records, CountRecords(config.training_data,
                                                     StrCat(config.path, ": data.training_data")));
  EDL_RETURN_IF_ERROR(
      CountRecords(config.validation_data, StrCat(config.path, ": data.validation_data")).status());
  StatusOr<std::vector<int64_t>> rung_epochs = RungEpochs(config.searcher, records);
  if (!rung_epochs.ok()) return Annotate(rung_epochs.status(), config.path);
  EDL_ASSIGN_OR_RETURN(std::vector<Params> planned, PlannedTrials(config));
  EDL_RETURN_IF_ERROR(CheckTrials(config, planned));
  EDL_RETURN_IF_ERROR(CheckOutputReplaceable(config));

  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<ClientLock> lock, ClientLock::Acquire(dir));
  EDL_ASSIGN_OR_RETURN(ExperimentState state, Replay(config, events));
  EDL_ASSIGN_OR_RETURN(ExperimentJournal journal, ExperimentJournal::Open(dir));
  if (resume) {
    EDL_RETURN_IF_ERROR(journal.Append("resumed"));
  } else {
    EDL_RETURN_IF_ERROR(journal.Append(
        "started", {{"config", config.text}, {"name", config.name}, {"seed", config.seed}}));
  }
  EDL_RETURN_IF_ERROR(state.Apply({{"event", resume ? "resumed" : "started"}}, true));
  std::error_code ec;
  fs::remove(StopPath(dir), ec);  // an old request, from before this client
  Runner runner(std::move(config), std::move(state), std::move(journal), std::move(*rung_epochs),
                std::move(base), options);
  return runner.Run();
}

}  // namespace

StatusOr<ExperimentReport> RunExperiment(const ExperimentOptions& options) {
  return Launch(options, /*resume=*/false);
}

StatusOr<ExperimentReport> ResumeExperiment(const ExperimentOptions& options) {
  return Launch(options, /*resume=*/true);
}

StatusOr<std::string> ExperimentStatus(const ExperimentOptions& options) {
  EDL_ASSIGN_OR_RETURN(ExperimentConfig config, ConfigOf(options));
  const std::string& dir = config.experiment_dir;
  EDL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> events, ReadExperimentJournal(dir));
  if (events.empty()) return absl::NotFoundError(StrCat("no experiment in ", dir));
  EDL_ASSIGN_OR_RETURN(ExperimentState state, Replay(config, events));
  std::string status = state.status();
  const std::optional<std::string> client = RunningClient(dir);
  if (client) {
    status = StrCat("running (client pid ", *client, ")");
  } else if (status == "running") {
    status = "interrupted (no client runs it: `resume` goes on)";
  }
  std::string out =
      StrCat("experiment ", config.name, " in ", dir, ": ", status, "\n", state.trials().size(),
             " of ", config.searcher.max_trials, " trial(s) started; searcher ",
             SearcherKindName(config.searcher.kind), ", metric ", config.searcher.metric, "\n");
  if (state.usage().pool_seconds > 0) {
    out += fmt::format("workers busy: {:.1f}% of the pool's {:.0f} worker-seconds\n",
                       100 * state.usage().fraction(), state.usage().pool_seconds);
  }
  if (std::optional<RungRun> best = state.Best()) {
    out += StrCat("best so far: trial ", best->trial, " at rung ", best->rung, "\n");
  }
  return out + TrialsTable(state, config.searcher.metric);
}

Status StopExperiment(const ExperimentOptions& options, double wait_seconds) {
  EDL_ASSIGN_OR_RETURN(ExperimentConfig config, ConfigOf(options));
  const std::string& dir = config.experiment_dir;
  EDL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> events, ReadExperimentJournal(dir));
  if (events.empty()) return absl::NotFoundError(StrCat("no experiment in ", dir));
  if (!RunningClient(dir)) {
    const std::string last = events.back().value("event", "");
    if (last == "finished" || last == "stopped") return absl::OkStatus();
    EDL_ASSIGN_OR_RETURN(ExperimentJournal journal, ExperimentJournal::Open(dir));
    return journal.Append("stopped");
  }
  EDL_RETURN_IF_ERROR(WriteFileAtomically(StopPath(dir), "stop\n"));
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_seconds);
  while (RunningClient(dir)) {
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(StrCat(
          "asked the client of ", dir, " to stop; it still runs after ", wait_seconds, " s"));
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::experiment
