#include "cluster/local_backend.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

std::string Label(Role role, int id) { return StrCat(role == Role::kPs ? "ps-" : "worker-", id); }

}  // namespace

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

Status LocalBackend::Start(Role role, int id) {
  ProcessSpec spec;
  spec.label = Label(role, id);
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  spec.argv = {options_.binary.empty() ? self : options_.binary,
               role == Role::kPs ? "ps" : "worker", "--job_dir=" + options_.job_dir,
               "--master=" + options_.master_address,
               StrCat(role == Role::kPs ? "--ps_id=" : "--worker_id=", id)};
  // The job's processes share this machine's cores: OpenMP threads that
  // spin while waiting for work take cores from the others (a two-thread
  // worker next to a busy process runs several times slower). Sleep
  // instead, unless the user chose otherwise.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr)
    spec.env.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  return group_.Start(spec);
}

Status LocalBackend::StartPs(int ps_id) { return Start(Role::kPs, ps_id); }
Status LocalBackend::StartWorker(int worker_id) { return Start(Role::kWorker, worker_id); }
void LocalBackend::StopAll(std::chrono::milliseconds grace) { group_.StopAll(grace); }

}  // namespace elasticdl::cluster
