#include "cluster/slurm_backend.h"

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <set>

#include "cluster/command.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

using std::chrono::milliseconds;

// "sbatch: error: invalid partition specified: x\nsbatch: error: ..." ->
// one line.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : absl::StripTrailingAsciiWhitespace(text))
    out += c == '\n' ? "; " : std::string(1, c);
  return out;
}

Status Scancel(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), args.begin(), args.end());
  EDL_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv));
  if (!r.ok()) return absl::UnavailableError(StrCat("scancel: ", OneLine(r.err)));
  return absl::OkStatus();
}

// scancel --signal=TERM; its complaints, but those about jobs that have
// already ended, in one line.
void AskToStop(const std::vector<std::string>& ids) {
  StatusOr<CommandResult> r = RunCommand({"scancel", "--signal=TERM", absl::StrJoin(ids, ",")});
  if (!r.ok()) {
    spdlog::warn("asking Slurm jobs {} to stop: {}", absl::StrJoin(ids, ","),
                 std::string(r.status().message()));
    return;
  }
  if (r->ok()) return;
  // scancel exits non-zero for a listed job that has already ended ("Invalid
  // job id specified"), and signals the others all the same; it may also
  // exit non-zero saying nothing, for a job that ended while it ran.
  std::string complaints;
  for (absl::string_view line : absl::StrSplit(r->err, '\n', absl::SkipWhitespace())) {
    if (absl::StrContains(line, "Invalid job id specified")) continue;
    absl::StrAppend(&complaints, complaints.empty() ? "" : "; ", line);
  }
  if (r->exit_code == -1) complaints = "scancel timed out or was killed";
  if (!complaints.empty()) {
    spdlog::warn("asking Slurm jobs {} to stop: {}", absl::StrJoin(ids, ","), complaints);
  }
}

}  // namespace

bool SlurmStateIsFinal(const std::string& state) {
  return !(state == "PENDING" || state == "RUNNING" || state == "CONFIGURING" ||
           state == "COMPLETING" || state == "SUSPENDED" || state == "REQUEUED" ||
           state == "REQUEUE_HOLD" || state == "REQUEUE_FED" || state == "RESIZING" ||
           state == "SIGNALING" || state == "STAGE_OUT" || state == "STOPPED" ||
           state == "RESV_DEL_HOLD");
}

StatusOr<std::vector<SlurmJobState>> QuerySlurmJobs(const std::vector<std::string>& ids) {
  std::vector<SlurmJobState> out;
  if (ids.empty()) return out;
  EDL_ASSIGN_OR_RETURN(CommandResult r,
                       RunCommand({"squeue", "--noheader", "--states=all", "--format=%i|%T|%r|%N",
                                   "--jobs=" + absl::StrJoin(ids, ",")}));
  if (!r.ok()) {
    // squeue refuses a list of ids none of which it knows any more.
    if (r.err.find("Invalid job id") != std::string::npos) return out;
    return absl::UnavailableError(StrCat("squeue: ", OneLine(r.err)));
  }
  size_t start = 0;
  while (start < r.out.size()) {
    size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    std::string line = r.out.substr(start, end - start);
    start = end + 1;
    std::vector<std::string> f;
    size_t at = 0;
    for (size_t bar; (bar = line.find('|', at)) != std::string::npos; at = bar + 1) {
      f.push_back(line.substr(at, bar - at));
    }
    f.push_back(line.substr(at));
    if (f.size() < 4) continue;
    out.push_back({f[0], f[1], f[2], f[3]});
  }
  return out;
}

StatusOr<std::string> SubmitSlurmJob(const std::string& name, const std::string& output,
                                     const std::string& partition, int cpus,
                                     const std::string& command,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--job-name=" + name,
                                   "--output=" + output,
                                   "--open-mode=append",
                                   "--ntasks=1",
                                   StrCat("--cpus-per-task=", std::max(1, cpus))};
  if (!partition.empty()) argv.push_back("--partition=" + partition);
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--wrap=exec srun --ntasks=1 " + command);
  StatusOr<CommandResult> r = RunCommand(argv);
  if (!r.ok()) {
    return absl::FailedPreconditionError(
        StrCat(r.status().message(), " (is Slurm's client installed and on PATH?)"));
  }
  if (!r->ok()) {
    return absl::FailedPreconditionError(
        StrCat("Slurm refused job ", name, ": ", OneLine(r->err.empty() ? r->out : r->err)));
  }
  // --parsable: "<id>" or "<id>;<cluster>".
  std::string id(absl::StripTrailingAsciiWhitespace(r->out));
  id = id.substr(0, id.find(';'));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    return absl::InternalError(StrCat("sbatch printed no job id: ", OneLine(r->out)));
  }
  return id;
}

SlurmBackend::SlurmBackend(SlurmBackendOptions options, ExitCallback on_exit)
    : options_(std::move(options)), on_exit_(std::move(on_exit)) {
  watcher_ = std::thread([this] { Watch(); });
}

SlurmBackend::~SlurmBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  watcher_.join();
}

StatusOr<ProcessHandle> SlurmBackend::Submit(const ProcessName& process, const std::string& args,
                                             int cpus) {
  const bool master = process.role() == Role::kMaster;
  const bool worker = process.role() == Role::kWorker;
  const std::string& partition =
      worker && !options_.worker_partition.empty() ? options_.worker_partition : options_.partition;
  const bool requeue = master && options_.requeue_master;
  const std::string label = process.label();
  EDL_RETURN_IF_ERROR(CreateDirectories(log_dir()));
  // The master's Slurm job is named as the job; the others after it.
  const std::string name = master ? options_.job_name : StrCat(options_.job_name, "-", label);
  EDL_ASSIGN_OR_RETURN(std::string job_id,
                       SubmitSlurmJob(name, StrCat(log_dir(), "/", label, ".log"), partition, cpus,
                                      StrCat(ShellQuote(options_.binary), " ", args),
                                      {"--export=ALL,OMP_WAIT_POLICY=PASSIVE",
                                       requeue ? "--requeue" : "--no-requeue"}));
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.insert_or_assign(job_id, Job{process});
  }
  changed_.notify_all();
  if (!master) spdlog::info("{} submitted as Slurm job {}", label, job_id);
  ProcessHandle handle;
  handle.backend_id = job_id;
  return handle;
}

std::string SlurmBackend::log_dir() const { return LogsDir(options_.job_dir); }

std::string SlurmBackend::Describe(const ProcessHandle& handle) const {
  return StrCat("Slurm job ", handle.backend_id);
}

StatusOr<ProcessHandle> SlurmBackend::StartMaster() {
  EDL_ASSIGN_OR_RETURN(
      ProcessHandle handle,
      Submit(ProcessName::Master(), StrCat("master --job_dir=", ShellQuote(options_.job_dir)), 1));
  // For `scancel $(cat <job_dir>/slurm_job_id)`.
  EDL_RETURN_IF_ERROR(WriteFileAtomically(options_.job_dir + "/slurm_job_id", handle.backend_id));
  return handle;
}

// The process binds on its node's name, which the other nodes resolve.
std::string SlurmBackend::RoleArgs(const char* role) const {
  return StrCat(role, " --job_dir=", ShellQuote(options_.job_dir),
                " --master=", ShellQuote(options_.master_address));
}

StatusOr<ProcessHandle> SlurmBackend::StartPs(PsId ps, const PsLaunch& launch) {
  return Submit(ProcessName::Ps(ps),
                StrCat(RoleArgs("ps"), " --ps_id=", ps.value(), " --host=\"$(hostname)\"",
                       launch.restore ? " --restore" : ""),
                options_.ps_cpus);
}

StatusOr<ProcessHandle> SlurmBackend::StartWorker(WorkerId worker) {
  return Submit(ProcessName::Worker(worker),
                StrCat(RoleArgs("worker"), " --worker_id=", worker.value()), options_.worker_cpus);
}

Status SlurmBackend::Adopt(const ProcessName& process, const ProcessHandle& handle) {
  if (handle.backend_id.empty()) return absl::NotFoundError("no Slurm job");
  EDL_ASSIGN_OR_RETURN(std::vector<SlurmJobState> states, QuerySlurmJobs({handle.backend_id}));
  if (states.empty() || SlurmStateIsFinal(states[0].state)) {
    return absl::NotFoundError(StrCat("Slurm job ", handle.backend_id, " has ended"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.insert_or_assign(handle.backend_id, Job{process});
  }
  changed_.notify_all();
  return absl::OkStatus();
}

std::vector<std::string> SlurmBackend::Ids(const ProcessName& process) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [job_id, job] : jobs_) {
    if (job.process == process) ids.push_back(job_id);
  }
  return ids;
}

Status SlurmBackend::Signal(const ProcessName& process, int signal) {
  std::vector<std::string> ids = Ids(process);
  if (ids.empty()) return absl::NotFoundError(StrCat(process.label(), ": no Slurm job"));
  if (signal == SIGTERM) {
    // To the job step. Slurm refuses to signal a job still pending, which
    // has done nothing: cancel it.
    Status s = Scancel({"--signal=TERM", absl::StrJoin(ids, ",")});
    if (s.ok()) return s;
  }
  return Cancel(ids);
}

Status SlurmBackend::Cancel(const std::vector<std::string>& ids) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& job_id : ids) {
      if (auto job = jobs_.find(job_id); job != jobs_.end()) job->second.cancelled = true;
    }
  }
  return Scancel({absl::StrJoin(ids, ",")});
}

void SlurmBackend::StopAll(milliseconds grace) {
  // Those already cancelled (a lapsed lease's SIGKILL) get no SIGTERM and
  // are not cancelled again: on a lost node they stay COMPLETING until
  // Slurm gives the node up.
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job_id, job] : jobs_) {
      if (!job.cancelled) ids.push_back(job_id);
    }
  }
  // Slurm refuses to signal a job still pending, which has done nothing:
  // it is cancelled at once.
  std::set<std::string> pending;
  if (StatusOr<std::vector<SlurmJobState>> states = QuerySlurmJobs(ids); states.ok()) {
    for (const SlurmJobState& state : *states) {
      if (state.state == "PENDING") pending.insert(state.id);
    }
  }
  if (!pending.empty()) {
    Cancel({pending.begin(), pending.end()}).IgnoreError();
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&pending](const std::string& id) { return pending.count(id) != 0; }),
              ids.end());
  }
  if (!ids.empty()) AskToStop(ids);
  auto wait_until = [this](std::chrono::steady_clock::time_point deadline, bool all) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_until(lock, deadline, [this, all] {
      for (const auto& [job_id, job] : jobs_) {
        if (all || !job.cancelled) return false;
      }
      return true;
    });
  };
  if (!wait_until(std::chrono::steady_clock::now() + grace, false) && PollOnce() > 0) {
    // Those that ended since the watcher last looked are reported now, not
    // named here.
    std::vector<std::string> labels;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ids.clear();
      for (const auto& [job_id, job] : jobs_) {
        if (job.cancelled) continue;
        ids.push_back(job_id);
        labels.push_back(StrCat(job.process.label(), " (Slurm job ", job_id, ")"));
      }
    }
    if (!ids.empty()) {
      spdlog::warn("{} not ended {} ms after SIGTERM; cancelling", absl::StrJoin(labels, ", "),
                   grace.count());
      Cancel(ids).IgnoreError();
    }
  }
  if (!wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(30), true)) {
    std::lock_guard<std::mutex> lock(mu_);
    spdlog::warn("Slurm jobs {} have not ended yet",
                 absl::StrJoin(jobs_, ",", [](std::string* out, const auto& entry) {
                   out->append(entry.first);
                 }));
  }
}

size_t SlurmBackend::PollOnce() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [job_id, job] : jobs_) ids.push_back(job_id);
  }
  if (ids.empty()) return 0;
  StatusOr<std::vector<SlurmJobState>> states = QuerySlurmJobs(ids);
  if (!states.ok()) {
    // The controller may be restarting: the jobs count as running.
    spdlog::warn("asking Slurm about the job's processes: {}",
                 std::string(states.status().message()));
    return ids.size();
  }
  std::map<std::string, const SlurmJobState*> by_id;
  for (const SlurmJobState& s : *states) by_id[s.id] = &s;
  std::vector<ProcessExit> exits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : ids) {
      auto job = jobs_.find(id);
      if (job == jobs_.end()) continue;
      auto it = by_id.find(id);
      // Unknown to squeue: purged after it ended.
      std::string state = it == by_id.end() ? "GONE" : it->second->state;
      if (!SlurmStateIsFinal(state)) continue;
      ProcessExit e;
      e.process = job->second.process;
      e.ok = state == "COMPLETED" || state == "PREEMPTED" ||
             (state == "CANCELLED" && job->second.cancelled);
      e.cancelled = state == "CANCELLED" && !job->second.cancelled;
      e.preempted = state == "PREEMPTED";
      e.description = StrCat("Slurm job ", id, " ", state);
      if (it != by_id.end() && it->second->reason != "None" && !it->second->reason.empty()) {
        e.description += StrCat(" (", it->second->reason, ")");
      }
      if (it != by_id.end() && !it->second->node.empty()) {
        e.description += " on " + it->second->node;
      }
      exits.push_back(e);
      jobs_.erase(job);
    }
  }
  for (const ProcessExit& e : exits) {
    if (on_exit_) on_exit_(e);
  }
  if (!exits.empty()) changed_.notify_all();
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void SlurmBackend::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (jobs_.empty()) {
      changed_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      continue;
    }
    lock.unlock();
    PollOnce();
    lock.lock();
    changed_.wait_for(lock, options_.poll, [this] { return stopping_; });
  }
}

}  // namespace elasticdl::cluster
