#include "cluster/local_backend.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cluster/process.h"
#include "common/strings.h"

namespace elasticdl::cluster {

std::string RoleLabel(Role role, int id) {
  return StrCat(role == Role::kPs ? "ps-" : "worker-", id);
}

LocalBackend::LocalBackend(LocalBackendOptions options, ExitCallback on_exit)
    : options_(std::move(options)),
      on_exit_(std::move(on_exit)),
      sink_(stderr),
      group_(&sink_, [this](const std::string& label, pid_t, ExitStatus status) {
        ProcessExit e;
        e.role = label.rfind("ps-", 0) == 0 ? Role::kPs : Role::kWorker;
        e.id = std::stoi(label.substr(label.find('-') + 1));
        e.ok = status.ok();
        e.description = status.ToString();
        if (on_exit_) on_exit_(e);
      }) {}

LocalBackend::~LocalBackend() = default;

StatusOr<ProcessHandle> LocalBackend::Start(Role role, int id,
                                            std::vector<std::string> extra_args) {
  ProcessSpec spec;
  spec.label = RoleLabel(role, id);
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  spec.argv = {options_.binary.empty() ? self : options_.binary,
               role == Role::kPs ? "ps" : "worker", "--job_dir=" + options_.job_dir,
               "--master=" + options_.master_address,
               StrCat(role == Role::kPs ? "--ps_id=" : "--worker_id=", id)};
  if (role == Role::kPs) spec.argv.push_back("--host=" + options_.ps_host);
  for (std::string& arg : extra_args) spec.argv.push_back(std::move(arg));
  // The processes outlive a master that dies, so a restarted one can carry
  // on with them; they label their own output.
  spec.die_with_parent_signal = 0;
  spec.inherit_output = true;
  // The job's processes share this machine's cores: OpenMP threads that
  // spin while waiting for work take cores from the others (a two-thread
  // worker next to a busy process runs several times slower). Sleep
  // instead, unless the user chose otherwise.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr)
    spec.env.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  EDL_RETURN_IF_ERROR(group_.Start(spec));
  // A process that has already ended has no pid or start time here; its
  // exit is reported anyway.
  ProcessHandle handle;
  if (std::optional<pid_t> pid = group_.pid(spec.label)) {
    handle.pid = *pid;
    handle.start_time = ProcessStartTime(*pid).value_or(0);
  }
  return handle;
}

StatusOr<ProcessHandle> LocalBackend::StartPs(int ps_id, const PsLaunch& launch) {
  std::vector<std::string> extra;
  if (launch.restore) extra.emplace_back("--restore");
  return Start(Role::kPs, ps_id, std::move(extra));
}

StatusOr<ProcessHandle> LocalBackend::StartWorker(int worker_id) {
  return Start(Role::kWorker, worker_id, {});
}

Status LocalBackend::Adopt(Role role, int id, const ProcessHandle& handle) {
  return group_.Adopt(RoleLabel(role, id), handle.pid, handle.start_time);
}

Status LocalBackend::Signal(Role role, int id, int signal) {
  return group_.Signal(RoleLabel(role, id), signal);
}

void LocalBackend::StopAll(std::chrono::milliseconds grace) { group_.StopAll(grace); }

}  // namespace elasticdl::cluster
