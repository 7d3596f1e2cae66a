#include "master/job_state.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/strings.h"
#include "dashboard/job_view.h"
#include "master/journal.h"
#include "master/journal_writer.h"
#include "rpc/histogram_codec.h"

namespace elasticdl::master {
namespace {

TaskAttempt AttemptOf(const proto::HeldTask& held) {
  return TaskAttempt{TaskId(held.task_id()), held.attempt()};
}

// How long the collective group's first version waits for the workers the
// master started (one that does not come is left for a later version).
constexpr std::chrono::seconds kFirstGroupPatience{15};

// A pace in seconds per minibatch for people: "1.15 ms", "0.842 s", "1234 s".
std::string Pace(double seconds) {
  if (seconds >= 100) return fmt::format("{:.0f} s", seconds);
  return seconds >= 0.1 ? fmt::format("{:.3g} s", seconds)
                        : fmt::format("{:.3g} ms", seconds * 1000);
}

// A task_dispatched event's fields.
nlohmann::json DispatchedFields(WorkerId worker, const proto::Task& task) {
  return {{"task", task.task_id()},
          {"worker", worker.value()},
          {"attempt", task.attempt()},
          {"type", TaskTypeName(task.type())},
          {"minibatches_done", task.minibatches_done()},
          {"redispatch", task.attempt() > 1}};
}

}  // namespace

JobState::JobState(JobStateOptions options, TaskManager tasks, EventLog* events)
    : options_(std::move(options)),
      events_(events),
      tasks_(std::move(tasks)),
      members_(options_.num_ps, options_.workers_target, options_.worker_lease) {
  samples_.emplace_back(Now(), 0);
  tasks_.set_parallelism(members_.workers_target());
  if (!options_.job_dir.empty()) {
    tasks_.TrackChanges();
    JournalWriter::Source source;
    source.snapshot = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return std::make_pair(JournalLocked(), changes_);
    };
    source.changes = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return std::make_pair(JournalChangesLocked(), changes_);
    };
    journal_ = std::make_unique<JournalWriter>(
        options_.job_dir, std::move(source), [this](const Status& failure) {
          spdlog::error("{}", std::string(failure.message()));
          Fail(std::string(failure.message()));
        });
  }
}

JobState::~JobState() = default;

JobState::JobState(JobStateOptions options, TaskManager tasks, EventLog* events,
                   const proto::MasterJournal& journal)
    : JobState(std::move(options), std::move(tasks), events) {
  const Clock::time_point now = Now();
  members_.Restore(journal, now);
  tasks_.set_parallelism(members_.workers_target());
  master_restarts_ = journal.master_restarts() + 1;
  // Running workers send their totals again with their next heartbeat.
  worker_time_.RestoreGone(journal.worker_seconds_gone());
  dispatched_any_ = true;
  // Above every generation an earlier master published; every running
  // worker is taken as training until it asks for a task.
  group_ = TrainingGroup(static_cast<int64_t>(master_restarts_) << 32);
  for (const proto::JournalProcess& p : journal.workers()) group_.Join(WorkerId(p.id()));
  training_begun_ = true;
  samples_.clear();
  samples_.emplace_back(now, tasks_.records_done());
  std::lock_guard<std::mutex> lock(mu_);
  ChangedLocked();
}

void JobState::Event(const std::string& event, const nlohmann::json& fields) {
  if (events_ != nullptr) events_->Append(event, fields);
}

proto::MasterJournal JobState::JournalLocked() {
  proto::MasterJournal journal;
  ScalarsLocked(&journal);
  *journal.mutable_ledger() = tasks_.TakeLedger();
  members_.WorkersTo(&journal);
  return journal;
}

proto::JournalChanges JobState::JournalChangesLocked() {
  proto::JournalChanges changes;
  ScalarsLocked(changes.mutable_scalars());
  tasks_.TakeChanges(changes.mutable_ledger());
  // Workers are few beside tasks: compared with what was written.
  members_.WorkerChangesTo(&changes);
  return changes;
}

void JobState::ScalarsLocked(proto::MasterJournal* journal) const {
  journal->set_master_address(options_.master_address);
  members_.ScalarsTo(journal);
  journal->set_master_restarts(master_restarts_);
  *journal->mutable_worker_seconds_gone() = worker_time_.gone();
}

uint64_t JobState::ChangedLocked() {
  progress_unwritten_ = false;
  ++changes_;
  if (journal_ != nullptr) journal_->Request(changes_);
  return changes_;
}

Status JobState::Durable(uint64_t change) {
  if (change == 0 || journal_ == nullptr) return absl::OkStatus();
  return journal_->WaitDurable(change);
}

bool JobState::NeedsFlush() {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.flush_at_end && !flushed_ && !failure_ && members_.all_ps_registered() &&
         tasks_.training_finished();
}

void JobState::Flushed() {
  std::lock_guard<std::mutex> lock(mu_);
  flushed_ = true;
  Event("flushed", nlohmann::json::object());
}

Status JobState::FlushJournal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (progress_unwritten_) ChangedLocked();
  }
  return journal_ != nullptr ? journal_->status() : absl::OkStatus();
}

Status JobState::RegisterPs(const proto::RegisterPsRequest& request) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_RETURN_IF_ERROR(members_.PsRegistered(PsId(request.ps_id()), request.address()));
    int reopened = 0;
    if (request.restored()) {
      std::vector<proto::TaskProgress> applied(request.applied().begin(), request.applied().end());
      reopened = tasks_.PsRestored(applied);
      // Restored servers lost any flush; reopened training ends with another.
      flushed_ = false;
      spdlog::info("parameter server {} restored version {}; {} task(s) to redo (in part)",
                   request.ps_id(), request.restored_version(), reopened);
    }
    Event("ps_registered", {{"ps", request.ps_id()},
                            {"address", request.address()},
                            {"restored", request.restored()},
                            {"version", request.restored_version()},
                            {"reopened", reopened}});
    change = ChangedLocked();
  }
  return Durable(change);
}

Status JobState::RegisterWorker(const proto::RegisterWorkerRequest& request,
                                proto::RegisterWorkerResponse* response) {
  const WorkerId worker(request.worker_id());
  std::lock_guard<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
  if (!members_.all_ps_registered()) {
    return absl::UnavailableError(StrCat("waiting for parameter servers (",
                                         members_.registered_ps(), " of ", members_.num_ps(),
                                         " registered)"));
  }
  if (members_.Register(worker)) {
    Event("worker_registered", {{"worker", worker.value()}});
  }
  for (const std::string& address : members_.ps_addresses()) response->add_ps_addresses(address);
  return absl::OkStatus();
}

Status JobState::GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response) {
  const WorkerId worker(request.worker_id());
  std::optional<TaskAttempt> keep;
  if (request.has_keep()) {
    // The next task, asked for while the current one trains: the worker
    // begins it once the current one ends, its report on the way.
    keep = AttemptOf(request.keep());
  }
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
    change = GetTaskLocked(worker, keep, response->mutable_task());
    // Only a worker handed a training task is waited for by synchronous steps;
    // one asking ahead trains its current task still, whatever the answer.
    const bool training = response->task().type() == proto::TASK_TRAINING || keep.has_value();
    if (training && !training_begun_) {
      // The first steps wait for the workers there when training begins;
      // the others (still pending on a busy cluster) join with their first
      // task.
      for (WorkerId w : group_.members()) {
        if (!members_.registered(w)) group_.Leave(w);
      }
    }
    // Before training begins, a worker told to wait (for --min_workers, for
    // a server) stays in the group it joined when it started: the first
    // steps wait for it, whichever worker's first task goes out first.
    if (training || training_begun_) group_.Set(worker, training);
    training_begun_ = training_begun_ || training;
  }
  // The task is the worker's once the journal says so.
  return Durable(change);
}

uint64_t JobState::GetTaskLocked(WorkerId worker, std::optional<TaskAttempt> keep,
                                 proto::Task* task) {
  if (failure_) {
    task->set_type(proto::TASK_NONE);
    return 0;
  }
  const bool ps_missing = !members_.all_ps_registered();
  const bool awaiting_flush =
      options_.flush_at_end && !flushed_ && tasks_.training_finished() && !tasks_.finished();
  // Workers this job started and lost before they registered are not waited
  // for (their replacements are).
  const int awaited =
      options_.job_starts_workers
          ? std::min(options_.wait_for_workers, static_cast<int>(members_.workers().size()))
          : options_.wait_for_workers;
  const bool awaiting_workers = !dispatched_any_ && members_.registered_workers() < awaited;
  if (awaiting_workers && !ps_missing && !told_awaiting_workers_) {
    told_awaiting_workers_ = true;
    spdlog::info(
        "the first tasks go out once {} workers have registered (--min_workers); {} so "
        "far",
        awaited, members_.registered_workers());
  }
  if (ps_missing || awaiting_flush || awaiting_workers || members_.leaving(worker)) {
    task->set_type(tasks_.finished() ? proto::TASK_NONE : proto::TASK_WAIT);
    return 0;
  }
  // A worker works on one task at a time: asking for another, it holds
  // none but the one it keeps. Anything else the ledger still has it hold
  // (a report lost with a master that died) goes back to the queue,
  // progress kept.
  tasks_.RecoverWorker(worker, keep);
  *task = tasks_.Next(worker, /*ahead=*/keep.has_value());
  // A backup attempt is for a worker with nothing else to do.
  if (task->type() == proto::TASK_WAIT && !keep && BackupLocked(worker, task)) {
    return ChangedLocked();
  }
  if (task->type() == proto::TASK_NONE || task->type() == proto::TASK_WAIT) return 0;
  if (!dispatched_any_) {
    spdlog::info("the first task goes out with {} of {} workers registered",
                 members_.registered_workers(), members_.workers_target());
    Event("tasks_began",
          {{"workers", members_.registered_workers()}, {"min_workers", options_.wait_for_workers}});
  }
  dispatched_any_ = true;
  // A task handed out ahead is timed from the first heartbeat that names it
  // as the worker's current one (Heartbeat).
  if (!keep) on_task_[worker] = {TaskId(task->task_id()), Now(), task->minibatches_done(), Now()};
  nlohmann::json fields = DispatchedFields(worker, *task);
  if (keep) fields["ahead_of"] = keep->task.value();
  Event("task_dispatched", fields);
  return ChangedLocked();
}

bool JobState::BackupLocked(WorkerId worker, proto::Task* task) {
  if (!options_.backup_tasks || options_.collective) return false;
  const std::optional<double> mine = worker_time_.PaceOf(worker);
  if (!mine) return false;
  std::optional<TaskManager::BackupCandidate> best;
  double best_seconds = 0;
  double best_pace = 0;
  for (const TaskManager::BackupCandidate& c : tasks_.BackupCandidates(worker)) {
    std::optional<double> pace = worker_time_.PaceOf(c.holder);
    auto on = on_task_.find(c.holder);
    if (on != on_task_.end() && on->second.task == c.task &&
        c.minibatches_done >= on->second.minibatches_done) {
      const OnTask& t = on->second;
      const double held = std::chrono::duration<double>(t.heard - t.since).count();
      const double at_least =
          held / static_cast<double>(c.minibatches_done - t.minibatches_done + 1);
      pace = std::max(pace.value_or(0), at_least);
    }
    // At a few milliseconds a minibatch, a holder the machine schedules a
    // little later is several times slower, and a second attempt saves no
    // time (in synchronous training it only changes the steps).
    if (!pace || *pace <= kBackupPaceFactor * *mine || *pace - *mine < WorkerTime::kMinLag ||
        members_.leaving(c.holder)) {
      continue;
    }
    const double seconds = static_cast<double>(c.minibatches_left) * *pace;
    if (!best || seconds > best_seconds) {
      best = c;
      best_seconds = seconds;
      best_pace = *pace;
    }
  }
  if (!best) return false;
  *task = tasks_.Backup(worker, best->task);
  if (task->type() != proto::TASK_TRAINING) return false;
  on_task_[worker] = {TaskId(task->task_id()), Now(), task->minibatches_done(), Now()};
  group_.Leave(best->holder);
  spdlog::info(
      "task {}: worker {} takes a backup attempt from minibatch {} (worker {} trains {:.3f} s "
      "per minibatch, worker {} {:.3f} s)",
      task->task_id(), worker, task->minibatches_done(), best->holder, best_pace, worker, *mine);
  nlohmann::json fields = DispatchedFields(worker, *task);
  fields["backup_of"] = best->holder.value();
  fields["holder_seconds_per_minibatch"] = best_pace;
  fields["seconds_per_minibatch"] = *mine;
  Event("task_dispatched", fields);
  return true;
}

Status JobState::ReportTask(const proto::ReportTaskRequest& report) {
  const WorkerId worker(report.worker_id());
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
    if (report.has_seconds()) worker_time_.Update(worker, report.seconds(), Now());
    proto::ReportTaskRequest request = report;
    const std::vector<TaskId> held = tasks_.HeldBy(worker);
    if (report.nonfinite() && !report.error().empty() &&
        std::find(held.begin(), held.end(), TaskId(report.task_id())) != held.end()) {
      // Divergence is the model's, not the task's: the task is retried like
      // a stopped one, and the job fails after too many.
      Event("nonfinite", {{"task", report.task_id()}, {"error", report.error()}});
      if (++nonfinite_minibatches_ > options_.max_nonfinite_minibatches && !failure_) {
        failure_ = StrCat(report.error(), " (", nonfinite_minibatches_,
                          " minibatches with non-finite values; --max_nonfinite_minibatches=",
                          options_.max_nonfinite_minibatches, ")");
      }
      spdlog::warn("task {}: {}", report.task_id(), report.error());
      request.clear_error();
      request.set_stopped(true);
    }
    const bool was_stopped = !tasks_.stop_reason().empty();
    std::vector<WorkerId> overtaken;
    if (!tasks_.Report(worker, request, &overtaken)) {
      return absl::FailedPreconditionError(StrCat("worker ", request.worker_id(),
                                                  " does not hold task ", request.task_id(),
                                                  " (attempt ", request.attempt(), ")"));
    }
    if (!was_stopped && !tasks_.stop_reason().empty()) {
      spdlog::info("training stops: {}", tasks_.stop_reason());
      Event("training_stopped",
            {{"reason", tasks_.stop_reason()}, {"model_version", tasks_.model_version()}});
    }
    nlohmann::json fields = {{"task", request.task_id()},
                             {"worker", request.worker_id()},
                             {"minibatches_done", request.minibatches_done()},
                             {"error", request.error()}};
    // A backup attempt finished first, or the attempt it backed up did: the
    // other stops at its next heartbeat.
    if (!overtaken.empty()) {
      nlohmann::json workers = nlohmann::json::array();
      for (WorkerId w : overtaken) workers.push_back(w.value());
      fields["overtook"] = std::move(workers);
    }
    if (!request.stopped() && request.error().empty() && request.minibatches() > 0) {
      // A training task's mean loss at the version it left the model at: a
      // point of the loss curve.
      fields["loss"] = request.loss_sum() / static_cast<double>(request.minibatches());
      fields["model_version"] = request.model_version();
      fields["records"] = request.records();
      if (request.learning_rate() > 0) fields["learning_rate"] = request.learning_rate();
    }
    // The worker's calls to the servers since its last report: the known
    // calls, in the dashboard's buckets.
    nlohmann::json rpc_seconds = nlohmann::json::object();
    for (const auto& [call, h] : request.rpc_seconds()) {
      Histogram histogram = rpc::HistogramFromProto(h);
      if ((call == "pull" || call == "pull_rows" || call == "push") &&
          histogram.bounds == LatencyBounds() && histogram.count > 0) {
        rpc_seconds[call] = dashboard::LatencyHistogramToJson(histogram);
      }
    }
    if (!rpc_seconds.empty()) fields["rpc_seconds"] = std::move(rpc_seconds);
    Event(request.stopped() ? "task_stopped" : "task_done", fields);
    samples_.emplace_back(Now(), tasks_.records_done());
    while (samples_.size() > 2 &&
           samples_.back().first - samples_[1].first > std::chrono::seconds(10)) {
      samples_.pop_front();
    }
    change = ChangedLocked();
  }
  return Durable(change);
}

Status JobState::Heartbeat(const proto::HeartbeatRequest& request,
                           proto::HeartbeatResponse* response) {
  const WorkerId worker(request.worker_id());
  const TaskId task(request.task_id());
  std::lock_guard<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
  members_.Register(worker);
  if (request.has_seconds()) worker_time_.Update(worker, request.seconds(), Now());
  response->set_leave(members_.leaving(worker));
  if (options_.collective) response->set_group_version(collective_.version());
  // After a master restart, tasks the journal has this worker hold but it
  // is not working on go back to the queue. A task it works on but no
  // longer holds (another attempt finished it; taken back) it stops.
  std::optional<TaskAttempt> next;
  if (request.has_next()) next = AttemptOf(request.next());
  std::optional<TaskAttempt> reporting;
  if (request.has_reporting()) reporting = AttemptOf(request.reporting());
  const bool holds = tasks_.ReconcileWorker(worker, task, request.attempt(), next, reporting);
  response->set_task_revoked(request.task_id() >= 0 && !holds);
  auto on = on_task_.find(worker);
  if (holds && on != on_task_.end() && on->second.task == task) {
    on->second.heard = Now();
  } else if (holds) {
    // A task handed out ahead, begun since.
    on_task_[worker] = {task, Now(), request.minibatches_done(), Now()};
  }
  if (request.task_id() >= 0 &&
      tasks_.Progress(worker, task, request.attempt(), request.minibatches_done())) {
    progress_unwritten_ = true;
  }
  // A task whose report is on its way has no minibatches left to back up.
  if (reporting && tasks_.Progress(worker, reporting->task, reporting->attempt,
                                   request.reporting().minibatches_done())) {
    progress_unwritten_ = true;
  }
  return absl::OkStatus();
}

Status JobState::Rendezvous(const proto::RendezvousRequest& request,
                            proto::RendezvousResponse* response) {
  const WorkerId worker(request.worker_id());
  if (!options_.collective) {
    return absl::FailedPreconditionError("this job's workers do not form a collective group");
  }
  std::lock_guard<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
  if (request.leave()) {
    collective_.Leave(worker);
    if (!request.job_error().empty() && !failure_ && !tasks_.finished()) {
      failure_ = request.job_error();
    }
    return absl::OkStatus();
  }
  members_.Register(worker);
  EDL_RETURN_IF_ERROR(collective_.Join(worker, request.failed_version(), response));
  if (!collective_formed_) {
    // The first version waits for --min_workers members, even if the
    // backend has not started them all yet (or for kFirstGroupPatience), as
    // the first training task waits for --min_workers registered workers:
    // on the local backend every worker (a seed's runs begin with the same
    // group), on Slurm and Kubernetes the ones that run while the others
    // pend, who join with later versions. Without --min_workers, every
    // worker started so far.
    if (!first_rendezvous_) first_rendezvous_ = Now();
    const std::vector<WorkerId> members = collective_.members();
    size_t expected = static_cast<size_t>(std::max(options_.wait_for_workers, 0));
    if (expected == 0) {
      for (WorkerId w : members_.workers()) expected += members_.leaving(w) ? 0 : 1;
    }
    if (members.size() < expected && Now() - *first_rendezvous_ < kFirstGroupPatience) {
      response->set_world_size(0);  // ask again
      return absl::OkStatus();
    }
    collective_formed_ = true;
  }
  Event("group_version", {{"worker", worker.value()},
                          {"version", response->version()},
                          {"rank", response->rank()},
                          {"world_size", response->world_size()}});
  return absl::OkStatus();
}

Status JobState::GroupStore(const proto::GroupStoreRequest& request,
                            proto::GroupStoreResponse* response) {
  const WorkerId worker(request.worker_id());
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
  }
  // May wait for a key: not under the state's lock.
  return collective_.Store(worker, request, response);
}

Status JobState::GroupState(const proto::GroupStateRequest& request,
                            proto::GroupStateResponse* response) {
  const WorkerId worker(request.worker_id());
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EDL_RETURN_IF_ERROR(members_.Touch(worker, Now()));
    if (request.group_version() != collective_.version()) {
      return absl::FailedPreconditionError(
          StrCat("collective group version ", request.group_version(), " is over"));
    }
    // Work counted on a newer model than the group's is lost with the
    // workers that held it: redo it.
    if (!request.from_checkpoint() && request.model_version() >= tasks_.model_version()) {
      return absl::OkStatus();
    }
    std::vector<proto::TaskProgress> applied(request.applied().begin(), request.applied().end());
    const int reopened = tasks_.PsRestored(applied);
    response->set_reopened(reopened);
    spdlog::info(
        "the collective group goes on from model version {}{}; {} task(s) to redo "
        "(in part)",
        request.model_version(), request.from_checkpoint() ? " (a checkpoint)" : "", reopened);
    Event("group_state_restored", {{"version", request.model_version()},
                                   {"from_checkpoint", request.from_checkpoint()},
                                   {"reopened", reopened}});
    change = ChangedLocked();
  }
  return Durable(change);
}

Status JobState::Scale(const proto::ScaleRequest& request, proto::ScaleResponse* response) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (request.num_workers() < 0) {
      return absl::InvalidArgumentError(
          StrCat("--num_workers must be 0 or more, not ", request.num_workers()));
    }
    if (options_.type != proto::JOB_TRAINING && request.num_workers() == 0) {
      return absl::InvalidArgumentError("a job needs at least one worker");
    }
    if (options_.max_workers > 0 && request.num_workers() > options_.max_workers) {
      return absl::InvalidArgumentError(
          StrCat("--num_workers=", request.num_workers(),
                 ": more than the job's --max_workers=", options_.max_workers));
    }
    members_.set_workers_target(request.num_workers());
    tasks_.set_parallelism(request.num_workers());
    response->set_num_workers(request.num_workers());
    Event("scaled", {{"workers_target", request.num_workers()}});
    change = ChangedLocked();
  }
  return Durable(change);
}

double JobState::ThroughputLocked() {
  if (samples_.size() < 2) return 0;
  double seconds =
      std::chrono::duration<double>(samples_.back().first - samples_.front().first).count();
  return seconds > 0 ? (samples_.back().second - samples_.front().second) / seconds : 0;
}

void JobState::GetStatus(proto::GetJobStatusResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  response->set_type(options_.type);
  response->set_epoch(std::max<int64_t>(tasks_.epoch(), 0));
  response->set_num_epochs(tasks_.num_epochs());
  response->set_records_done(tasks_.records_done());
  response->set_records_total(tasks_.records_total());
  response->set_model_version(tasks_.model_version());
  response->set_recent_loss(tasks_.recent_loss());
  response->set_training_seconds(tasks_.training_seconds());
  response->set_records_per_second(ThroughputLocked());
  response->set_workers_alive(members_.registered_workers());
  response->set_workers_target(members_.workers_target());
  response->set_worker_losses(members_.worker_losses());
  response->set_ps_relaunches(members_.ps_relaunches());
  response->set_master_restarts(master_restarts_);
  *response->mutable_worker_seconds() = worker_time_.Total();
  bool failed = failure_.has_value() || tasks_.failure().has_value();
  // Done tasks are not yet a finished job: its results are written after.
  response->set_finished(failed || (tasks_.finished() && results_written_));
  response->set_failed(failed);
  if (failure_) {
    response->set_message(*failure_);
  } else if (tasks_.failure()) {
    response->set_message(*tasks_.failure());
  } else if (!tasks_.stop_reason().empty()) {
    response->set_stop_reason(tasks_.stop_reason());
    response->set_message(StrCat("training stopped early (", tasks_.stop_reason(), ") after ",
                                 tasks_.records_done(), " of the ", tasks_.records_total(),
                                 " records of ", tasks_.num_epochs(), " epoch",
                                 tasks_.num_epochs() == 1 ? "" : "s"));
  }
  if (!tasks_.evaluations().empty()) {
    const Evaluation& ev = tasks_.evaluations().back();
    response->set_eval_model_version(ev.model_version);
    for (const auto& [name, value] : ev.metrics) (*response->mutable_eval_metrics())[name] = value;
  }
}

nlohmann::json JobState::LiveStatus() {
  proto::GetJobStatusResponse status;
  GetStatus(&status);
  nlohmann::json live = dashboard::StatusToJson(status);
  std::lock_guard<std::mutex> lock(mu_);
  live["tasks"] = {{"todo", tasks_.queued()}, {"doing", tasks_.held()}};
  nlohmann::json leases = nlohmann::json::object();
  for (const auto& [id, ms] : members_.silence_ms(Now())) {
    leases[std::to_string(id.value())] = ms;
  }
  live["leases"] = std::move(leases);
  return live;
}

Status JobState::Join(const proto::JoinRequest& request, proto::JoinResponse* response) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const WorkerId id = members_.WorkerJoined(request.pid(), Now());
    if (!training_begun_) group_.Join(id);
    Event("worker_joined",
          {{"worker", id.value()}, {"host", request.host()}, {"pid", request.pid()}});
    change = ChangedLocked();
    response->set_worker_id(id.value());
    response->set_job_dir(options_.job_dir);
  }
  return Durable(change);
}

std::vector<WorkerId> JobState::joined_workers() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.joined_workers();
}

WorkerId JobState::NewWorkerId() {
  std::lock_guard<std::mutex> lock(mu_);
  ChangedLocked();
  return members_.NewWorkerId();
}

void JobState::WorkerStarted(WorkerId worker, const cluster::ProcessHandle& handle, bool relaunch) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    members_.WorkerStarted(worker, handle, relaunch, Now());
    if (!training_begun_) group_.Join(worker);
    Event("worker_started", {{"worker", worker.value()},
                             {"pid", handle.pid},
                             {"backend_id", handle.backend_id},
                             {"relaunch", relaunch}});
    change = ChangedLocked();
  }
  // A journal that cannot be written fails the job (the writer's callback).
  Durable(change).IgnoreError();
}

int JobState::WorkerLost(WorkerId worker, bool clean, const std::string& how) {
  uint64_t change = 0;
  int requeued = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // How long nothing had come from it (past the lease, when that is how
    // it was lost), said with the event.
    const std::optional<int64_t> silent_ms = members_.silence_ms(worker, Now());
    if (!members_.Remove(worker, clean)) return 0;
    worker_time_.Gone(worker, /*lost=*/!clean, Now());
    group_.Leave(worker);
    collective_.Leave(worker);
    requeued = tasks_.RecoverWorker(worker);
    on_task_.erase(worker);
    if (clean) {
      Event("worker_left", {{"worker", worker.value()}, {"how", how}, {"requeued", requeued}});
    } else {
      Event("worker_lost", {{"worker", worker.value()},
                            {"how", how},
                            {"requeued", requeued},
                            {"silent_ms", silent_ms.value_or(0)}});
    }
    change = ChangedLocked();
  }
  Durable(change).IgnoreError();  // a failure fails the job
  return requeued;
}

bool JobState::diverged() {
  std::lock_guard<std::mutex> lock(mu_);
  return nonfinite_minibatches_ > options_.max_nonfinite_minibatches;
}

void JobState::NoteModelVersion(int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.NoteModelVersion(version);
}

std::string JobState::DescribeTasksOf(WorkerId worker) {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.DescribeHeldBy(worker);
}

std::vector<WorkerId> JobState::ExpiredLeases() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.ExpiredLeases(Now());
}

std::vector<WorkerId> JobState::workers() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.workers();
}

TrainingGroup JobState::training_group() {
  std::lock_guard<std::mutex> lock(mu_);
  return group_;
}

bool JobState::leaving(WorkerId worker) {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.leaving(worker);
}

void JobState::AskToLeave(WorkerId worker) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!members_.AskToLeave(worker)) return;
    Event("worker_leaving", {{"worker", worker.value()}});
    change = ChangedLocked();
  }
  // A journal that cannot be written fails the job (the writer's callback).
  Durable(change).IgnoreError();
}

std::optional<WorkerId> JobState::TakeStraggler() {
  uint64_t change = 0;
  std::optional<WorkerTime::Straggler> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.straggler_factor <= 0 || tasks_.training_finished()) return std::nullopt;
    std::vector<WorkerId> candidates;
    for (WorkerId w : members_.workers()) {
      if (!members_.leaving(w)) candidates.push_back(w);
    }
    found = worker_time_.FindStraggler(candidates, options_.straggler_factor);
    if (!found || !members_.AskToLeave(found->worker)) return std::nullopt;
    Event("straggler", {{"worker", found->worker.value()},
                        {"seconds_per_minibatch", found->pace},
                        {"others", found->others}});
    Event("worker_leaving", {{"worker", found->worker.value()}});
    change = ChangedLocked();
  }
  spdlog::warn(
      "worker {} is a straggler: {} per minibatch against the others' {}; it leaves and "
      "another takes its place",
      found->worker, Pace(found->pace), Pace(found->others));
  Durable(change).IgnoreError();  // a failure fails the job
  return found->worker;
}

int JobState::workers_target() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.workers_target();
}

bool JobState::worker_relaunch_allowed(int max_relaunches) {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.worker_relaunch_allowed(max_relaunches);
}

void JobState::PsStarted(PsId ps, const cluster::ProcessHandle& handle, bool relaunch) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    members_.PsStarted(ps, handle, relaunch);
    Event("ps_started", {{"ps", ps.value()},
                         {"pid", handle.pid},
                         {"backend_id", handle.backend_id},
                         {"relaunch", relaunch}});
    change = ChangedLocked();
  }
  // A journal that cannot be written fails the job (the writer's callback).
  Durable(change).IgnoreError();
}

void JobState::PsLost(PsId ps, const std::string& how) {
  uint64_t change = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    members_.PsLost(ps);
    Event("ps_lost", {{"ps", ps.value()}, {"how", how}});
    change = ChangedLocked();
  }
  // A journal that cannot be written fails the job (the writer's callback).
  Durable(change).IgnoreError();
}

int JobState::ps_relaunches() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.ps_relaunches();
}

void JobState::Fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_ && !tasks_.finished()) failure_ = message;
}

std::vector<std::pair<PsId, cluster::ProcessHandle>> JobState::ps_processes() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.ps_processes();
}

std::vector<std::pair<WorkerId, cluster::ProcessHandle>> JobState::worker_processes() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.worker_processes();
}

bool JobState::all_ps_registered() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.all_ps_registered();
}

std::vector<std::string> JobState::ps_addresses() {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.ps_addresses();
}

bool JobState::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.has_value() || tasks_.finished();
}

bool JobState::trained_model_ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.training_finished() && members_.all_ps_registered() &&
         (!options_.flush_at_end || flushed_);
}

void JobState::ResultsWritten() {
  std::lock_guard<std::mutex> lock(mu_);
  results_written_ = true;
}

bool JobState::training_finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.training_finished();
}

std::optional<std::string> JobState::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_ ? failure_ : tasks_.failure();
}

std::vector<Evaluation> JobState::evaluations() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.evaluations();
}

std::vector<std::pair<Range, TaskId>> JobState::prediction_tasks() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.prediction_tasks();
}

int64_t JobState::model_version() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.model_version();
}

std::pair<int64_t, int64_t> JobState::progress() {
  std::lock_guard<std::mutex> lock(mu_);
  return {tasks_.records_done(), tasks_.records_total()};
}

}  // namespace elasticdl::master
