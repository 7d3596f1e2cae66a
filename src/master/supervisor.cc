#include "master/supervisor.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <utility>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl::master {

void ExitQueue::Push(const cluster::ProcessExit& exit) {
  std::lock_guard<std::mutex> lock(mu_);
  exits_.push_back(exit);
}

std::deque<cluster::ProcessExit> ExitQueue::TakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<cluster::ProcessExit> out;
  out.swap(exits_);
  return out;
}

Supervisor::Supervisor(SupervisorOptions options, JobState* state, cluster::ClusterBackend* backend,
                       ExitQueue* exits)
    : options_(std::move(options)), state_(state), backend_(backend), exits_(exits) {}

Status Supervisor::StartNew() {
  for (int i = 0; i < options_.num_ps; ++i) {
    const PsId ps(i);
    TakeExitReason(cluster::ProcessName::Ps(ps));  // an earlier job's, in a reused directory
    EDL_ASSIGN_OR_RETURN(cluster::ProcessHandle handle, backend_->StartPs(ps, {}));
    state_->PsStarted(ps, handle, false);
  }
  return absl::OkStatus();
}

Status Supervisor::Adopt() {
  for (const auto& [id, handle] : state_->ps_processes()) {
    const bool started = handle.pid > 0 || !handle.backend_id.empty();
    Status s = started ? backend_->Adopt(cluster::ProcessName::Ps(id), handle)
                       : absl::NotFoundError("never started");
    if (s.ok()) continue;
    if (s.code() != absl::StatusCode::kNotFound) return s;
    spdlog::warn("parameter server {} is gone; relaunching it", id);
    last_ps_reason_ = TakeExitReason(cluster::ProcessName::Ps(id));
    state_->PsLost(id, "gone while the master was away");
    EDL_RETURN_IF_ERROR(RelaunchPs(id));
  }
  for (const auto& [id, handle] : state_->worker_processes()) {
    // A worker that joined by itself renews its lease with the new master,
    // or loses it.
    if (handle.joined) continue;
    Status s = backend_->Adopt(cluster::ProcessName::Worker(id), handle);
    if (s.ok()) {
      running_.insert(id);
      continue;
    }
    if (s.code() != absl::StatusCode::kNotFound) return s;
    spdlog::warn("worker {} is gone", id);
    state_->WorkerLost(id, false, "gone while the master was away");
    ++to_replace_;
  }
  workers_started_ = true;
  return absl::OkStatus();
}

std::string Supervisor::TakeExitReason(const cluster::ProcessName& process) const {
  if (options_.job_dir.empty()) return "";
  const std::string path = ExitReasonFile(options_.job_dir, process.label());
  StatusOr<std::string> reason = ReadFileToString(path);
  if (!reason.ok()) return "";
  std::remove(path.c_str());
  // One paragraph, of a size for a log line.
  constexpr size_t kMaxReason = 4000;
  std::string text = std::move(*reason);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > kMaxReason) text = text.substr(0, kMaxReason) + " ...";
  return text;
}

std::string Supervisor::WithReason(std::string message, const std::string& reason) {
  if (!reason.empty()) message += StrCat("; the last one ended with: ", reason);
  return message;
}

Status Supervisor::RelaunchPs(PsId ps) {
  if (state_->ps_relaunches() >= options_.max_ps_relaunches) {
    return absl::UnavailableError(
        WithReason(StrCat("parameter server ", ps.value(), " ended and the ",
                          options_.max_ps_relaunches, " relaunches allowed are used up"),
                   last_ps_reason_));
  }
  cluster::PsLaunch launch;
  launch.restore = true;
  TakeExitReason(cluster::ProcessName::Ps(ps));  // its own, from now on
  EDL_ASSIGN_OR_RETURN(cluster::ProcessHandle handle, backend_->StartPs(ps, launch));
  state_->PsStarted(ps, handle, true);
  spdlog::info("relaunched parameter server {}; it restores its newest checkpoint", ps);
  return absl::OkStatus();
}

Status Supervisor::StartWorker(bool relaunch) {
  const WorkerId id = state_->NewWorkerId();
  EDL_ASSIGN_OR_RETURN(cluster::ProcessHandle handle, backend_->StartWorker(id));
  running_.insert(id);
  state_->WorkerStarted(id, handle, relaunch);
  if (relaunch) spdlog::info("started worker {} in place of a lost one", id);
  return absl::OkStatus();
}

Status Supervisor::HandleExit(const cluster::ProcessExit& exit) {
  switch (exit.process.role()) {
    case cluster::Role::kMaster:
      return absl::OkStatus();  // not started by a master
    case cluster::Role::kPs: {
      // Also after the last task: the model is still to be read from it.
      const PsId ps = exit.process.ps();
      last_ps_reason_ = TakeExitReason(exit.process);
      if (last_ps_reason_.empty()) last_ps_reason_ = exit.description;
      spdlog::warn("parameter server {} ended: {}", ps, exit.description);
      state_->PsLost(ps, exit.description);
      return RelaunchPs(ps);
    }
    case cluster::Role::kWorker:
      break;
  }
  const WorkerId worker = exit.process.worker();
  // A worker already taken as lost (its lease lapsed) is handled.
  if (running_.erase(worker) == 0) return absl::OkStatus();
  const bool asked_to_leave = state_->leaving(worker);
  const std::string tasks = state_->DescribeTasksOf(worker);
  // Preempted (SIGTERM) or scaled down, a worker hands its tasks back, saying
  // how far it got, before it exits with success; so does one stopped
  // between tasks. One that still held a task and was not ended by the
  // cluster ended in the middle of it (the model's code ended the process):
  // a crash like any other.
  const bool left = exit.ok && (asked_to_leave || tasks.empty() || exit.preempted);
  int requeued = state_->WorkerLost(worker, left, exit.description);
  if (state_->finished()) return absl::OkStatus();
  if (left) {
    // One that was not asked to leave is replaced by Reconcile() at no cost
    // to the relaunch budget.
    spdlog::info("worker {} left{}; {} task(s) back in the queue", worker,
                 asked_to_leave ? " as asked" : "", requeued);
    return absl::OkStatus();
  }
  // What it wrote as it ended, or else how it ended (a signal, a status),
  // and on what: the same task under every worker that crashes is the
  // task's data or the model's code for it.
  last_worker_reason_ = TakeExitReason(exit.process);
  if (last_worker_reason_.empty()) {
    last_worker_reason_ = exit.ok ? StrCat(exit.description,
                                           " in the middle of a task it did not hand back (does "
                                           "the model's code end the process, os._exit?)")
                                  : exit.description;
  }
  if (!tasks.empty()) last_worker_reason_ += StrCat(" (on ", tasks, ")");
  spdlog::warn(
      "worker {} ended: {}{}; {} task(s) back in the queue", worker,
      exit.ok ? StrCat(exit.description, " without handing its task back") : exit.description,
      tasks.empty() ? "" : StrCat(" on ", tasks), requeued);
  ++to_replace_;
  return absl::OkStatus();
}

Status Supervisor::Reconcile() {
  if (!workers_started_) {
    if (!state_->all_ps_registered()) return absl::OkStatus();
    workers_started_ = true;
    if (!backend_->starts_workers()) return absl::OkStatus();
    for (int i = 0; i < state_->workers_target(); ++i) EDL_RETURN_IF_ERROR(StartWorker(false));
    return absl::OkStatus();
  }
  // The workers the backend started and the ones that joined by themselves.
  std::set<WorkerId> members(running_.begin(), running_.end());
  for (WorkerId id : state_->joined_workers()) members.insert(id);
  std::vector<WorkerId> active;
  for (WorkerId id : members) {
    if (!state_->leaving(id)) active.push_back(id);
  }
  const int target = state_->workers_target();
  if (static_cast<int>(active.size()) > target) {
    // The newest leave first. A joined worker hears it with its heartbeat.
    for (size_t i = target; i < active.size(); ++i) {
      const WorkerId id = active[active.size() - 1 - (i - target)];
      spdlog::info("asking worker {} to leave (scaling to {})", id, target);
      state_->AskToLeave(id);
      if (running_.count(id) != 0) {
        backend_->Signal(cluster::ProcessName::Worker(id), SIGTERM).IgnoreError();
      }
    }
    to_replace_ = 0;
    return absl::OkStatus();
  }
  // Workers started elsewhere join when they do.
  if (!backend_->starts_workers()) return absl::OkStatus();
  // Crashed workers are replaced within the relaunch budget; workers that
  // left cleanly without being asked (preempted) and scaling up are free.
  for (int n = static_cast<int>(active.size()); n < target; ++n) {
    bool relaunch = to_replace_ > 0;
    if (relaunch) {
      if (!state_->worker_relaunch_allowed(options_.max_worker_relaunches)) {
        if (active.empty() && running_.empty()) {
          return absl::UnavailableError(
              WithReason(StrCat("every worker has ended and the ", options_.max_worker_relaunches,
                                " relaunches allowed are used up"),
                         last_worker_reason_));
        }
        break;
      }
      --to_replace_;
    }
    EDL_RETURN_IF_ERROR(StartWorker(relaunch));
  }
  return absl::OkStatus();
}

Status Supervisor::Tick() {
  for (const cluster::ProcessExit& exit : exits_->TakeAll()) EDL_RETURN_IF_ERROR(HandleExit(exit));
  for (WorkerId id : state_->ExpiredLeases()) {
    spdlog::warn("worker {} missed its lease; taking it as lost", id);
    // One that joined by itself is not ours to end or to replace.
    const bool ours = running_.erase(id) != 0;
    if (ours) backend_->Signal(cluster::ProcessName::Worker(id), SIGKILL).IgnoreError();
    state_->WorkerLost(id, false, "lease expired");
    if (ours) ++to_replace_;
  }
  if (state_->finished()) return absl::OkStatus();
  // A straggler hands its task back like a preempted worker; Reconcile()
  // starts another in its place.
  if (std::optional<WorkerId> slow = state_->TakeStraggler()) {
    if (running_.count(*slow) != 0) {
      backend_->Signal(cluster::ProcessName::Worker(*slow), SIGTERM).IgnoreError();
    }
  }
  return Reconcile();
}

}  // namespace elasticdl::master
