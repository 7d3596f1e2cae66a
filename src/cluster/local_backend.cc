#include "cluster/local_backend.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "cluster/process.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/process_start.h"
#include "common/process_tuning.h"
#include "common/strings.h"

namespace elasticdl::cluster {

LocalBackend::LocalBackend(LocalBackendOptions options, ExitCallback on_exit)
    : options_(std::move(options)),
      on_exit_(std::move(on_exit)),
      sink_(stderr),
      group_(&sink_, [this](const std::string& label, pid_t, ExitStatus status) {
        std::optional<ProcessName> process = ProcessName::Parse(label);
        if (!process) return;  // every process here is started under its ProcessName's label
        if (process->role() == Role::kWorker) FreeSlot(label);
        ProcessExit e;
        e.process = *process;
        e.ok = status.ok();
        e.description = status.ToString();
        if (on_exit_) on_exit_(e);
      }) {
  if (options_.worker_cpus > 0) {
    const std::vector<int> cpus = AllowedCpus();
    const size_t width = static_cast<size_t>(options_.worker_cpus);
    for (size_t first = 0; first + width <= cpus.size(); first += width) {
      slots_.push_back({{cpus.begin() + first, cpus.begin() + first + width}, ""});
    }
  }
  if (options_.fork_server) {
    ProcessSpec server;
    server.label = "fork-server";
    server.argv = {Binary(), "fork-server", "--job_dir=" + options_.job_dir,
                   "--master=" + options_.master_address};
    server.env = options_.env;
    SetOutput(&server);
    fork_server_ =
        std::make_shared<ForkServer>(std::move(server), &sink_, options_.spare_fork_server);
  } else if (options_.spare_fork_server >= 0) {
    ::close(options_.spare_fork_server);
  }
}

void LocalBackend::SetOutput(ProcessSpec* spec) const {
  if (options_.output_fd >= 0) {
    spec->output_fd = options_.output_fd;
  } else {
    spec->inherit_output = true;
  }
}

LocalBackend::~LocalBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_reaping_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  // A job's client: the spare its first master did not take, or that
  // outlived it.
  ReapSpareForkServer(std::chrono::milliseconds(200));
}

std::string LocalBackend::Binary() const {
  return options_.binary.empty() ? ElasticdlBinary() : options_.binary;
}

void LocalBackend::ReapOrphans() {
  std::unique_lock<std::mutex> lock(mu_);
  while (
      !stop_reaping_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; })) {
    // Only this backend's masters' groups: another job run from this
    // process has children of its own to wait for.
    const std::vector<pid_t> groups = master_groups_;
    lock.unlock();
    for (pid_t pgid : groups) {
      for (;;) {
        siginfo_t info{};
        if (::waitid(P_PGID, pgid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
          break;
        }
        // The master (the group's leader) is group_'s to reap, with its
        // exit status.
        if (info.si_pid == pgid) break;
        ::waitpid(info.si_pid, nullptr, WNOHANG);
      }
    }
    lock.lock();
  }
}

StatusOr<ProcessHandle> LocalBackend::StartMaster() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaper_.joinable()) {
      // Parameter servers and workers outlive a master that dies; they
      // become ours then, for a restarted master to adopt.
      ::prctl(PR_SET_CHILD_SUBREAPER, 1);
      reaper_ = std::thread([this] { ReapOrphans(); });
    }
  }
  ProcessSpec spec;
  spec.label = ProcessName::Master().label();
  spec.argv = {Binary(), "master", "--job_dir=" + options_.job_dir};
  // Each master leads a process group holding the processes it starts;
  // whatever of them is left at the end goes with it.
  spec.new_process_group = true;
  // This process supervises the job's processes (they become its children
  // when their master dies); they stop once it is gone.
  if (StatusOr<uint64_t> start = ProcessStartTime(::getpid()); start.ok()) {
    spec.env.emplace_back(kJobSupervisorVariable, ProcessToken(::getpid(), *start));
  }
  // The master and the job's processes label their own lines.
  if (options_.output_fd >= 0) {
    spec.output_fd = options_.output_fd;
  } else {
    spec.inherit_output = true;
  }
  // The first master forks its parameter servers and workers from this
  // process's spare fork server (a job's client has one): no exec of
  // elasticdl-torch for its own. A master started again execs one.
  const int spare = options_.fork_server ? TakeSpareForkServer() : -1;
  if (spare >= 0) {
    spec.pass_fd = spare;
    spec.argv.push_back(StrCat("--fork_server_fd=", spare));
  }
  // The group's id even when the master has ended already: what it left
  // behind is still ours to reap.
  StatusOr<pid_t> started = group_.Start(spec);
  if (spare >= 0) ::close(spare);
  EDL_ASSIGN_OR_RETURN(pid_t pid, std::move(started));
  {
    std::lock_guard<std::mutex> lock(mu_);
    master_groups_.push_back(pid);
  }
  ProcessHandle handle;
  if (group_.pid(spec.label)) {
    handle.pid = pid;
    handle.start_time = ProcessStartTime(pid).value_or(0);
  }
  return handle;
}

StatusOr<ProcessHandle> LocalBackend::Start(const ProcessName& process,
                                            std::vector<std::string> extra_args) {
  const bool ps = process.role() == Role::kPs;
  ProcessSpec spec;
  spec.label = process.label();
  spec.argv = {Binary(), ps ? "ps" : "worker", "--job_dir=" + options_.job_dir,
               "--master=" + options_.master_address,
               StrCat(ps ? "--ps_id=" : "--worker_id=", process.index())};
  if (ps) spec.argv.push_back("--host=" + options_.ps_host);
  for (std::string& arg : extra_args) spec.argv.push_back(std::move(arg));
  // The processes outlive a master that dies, so a restarted one can carry
  // on with them; they label their own output.
  spec.die_with_parent_signal = 0;
  SetOutput(&spec);
  spec.env = options_.env;
  spec.fork_server = fork_server_;
  EDL_RETURN_IF_ERROR(group_.Start(spec).status());
  // A process that has already ended has no pid or start time here; its
  // exit is reported anyway.
  ProcessHandle handle;
  if (std::optional<pid_t> pid = group_.pid(spec.label)) {
    handle.pid = *pid;
    handle.start_time = ProcessStartTime(*pid).value_or(0);
  }
  return handle;
}

StatusOr<ProcessHandle> LocalBackend::StartPs(PsId ps, const PsLaunch& launch) {
  std::vector<std::string> extra;
  if (launch.restore) extra.emplace_back("--restore");
  return Start(ProcessName::Ps(ps), std::move(extra));
}

std::vector<int> LocalBackend::TakeSlot(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  // A worker started again under its label has left its slot.
  FreeSlotLocked(label);
  for (Slot& slot : slots_) {
    if (slot.holder.empty()) {
      slot.holder = label;
      return slot.cpus;
    }
  }
  return {};
}

void LocalBackend::FreeSlot(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  FreeSlotLocked(label);
}

void LocalBackend::FreeSlotLocked(const std::string& label) {
  for (Slot& slot : slots_) {
    if (slot.holder == label) slot.holder.clear();
  }
}

StatusOr<ProcessHandle> LocalBackend::StartWorker(WorkerId worker) {
  const ProcessName process = ProcessName::Worker(worker);
  std::vector<std::string> extra;
  const std::vector<int> cpus = TakeSlot(process.label());
  if (!cpus.empty()) extra.push_back("--cpus=" + FormatCpuList(cpus));
  StatusOr<ProcessHandle> started = Start(process, std::move(extra));
  if (!started.ok()) FreeSlot(process.label());
  return started;
}

Status LocalBackend::Adopt(const ProcessName& process, const ProcessHandle& handle) {
  EDL_RETURN_IF_ERROR(group_.Adopt(process.label(), handle.pid, handle.start_time));
  // A worker a master before this one bound keeps its slot.
  if (process.role() != Role::kWorker || slots_.empty()) return absl::OkStatus();
  const std::vector<int> cpus = AllowedCpus(handle.pid);
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& slot : slots_) {
    if (slot.cpus == cpus) {
      slot.holder = process.label();
      break;
    }
  }
  return absl::OkStatus();
}

Status LocalBackend::Signal(const ProcessName& process, int signal) {
  return group_.Signal(process.label(), signal);
}

void LocalBackend::StopAll(std::chrono::milliseconds grace) {
  group_.StopAll(grace);
  std::vector<pid_t> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    groups.swap(master_groups_);
  }
  if (groups.empty()) return;
  for (pid_t pgid : groups) ::kill(-pgid, SIGKILL);
  // Reap them (theirs only: not another job's); give up after a second.
  for (int i = 0; i < 100; ++i) {
    bool left = false;
    for (pid_t pgid : groups) {
      while (::waitpid(-pgid, nullptr, WNOHANG) > 0) {
      }
      left = left || ::kill(-pgid, 0) == 0;
    }
    if (!left) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace elasticdl::cluster
