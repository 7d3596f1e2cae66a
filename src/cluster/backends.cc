#include "cluster/backends.h"

#include "cluster/kubernetes/kubernetes_backend.h"
#include "cluster/local_backend.h"
#include "cluster/slurm_backend.h"
#include "common/file.h"
#include "common/process_tuning.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

// `external`: parameter servers run on the master's machine, as on
// `local`; workers are started by someone else and join by themselves.
class ExternalBackend : public ClusterBackend {
 public:
  ExternalBackend(LocalBackendOptions options, ExitCallback on_exit)
      : local_(std::move(options), std::move(on_exit)) {}

  bool starts_workers() const override { return false; }
  StatusOr<ProcessHandle> StartMaster() override { return local_.StartMaster(); }
  StatusOr<ProcessHandle> StartPs(PsId ps, const PsLaunch& launch) override {
    return local_.StartPs(ps, launch);
  }
  StatusOr<ProcessHandle> StartWorker(WorkerId worker) override {
    return absl::FailedPreconditionError(
        StrCat("worker ", worker.value(),
               ": the external cluster starts no workers; start one with `elasticdl worker "
               "--master=... --credentials_file=...`"));
  }
  Status Adopt(const ProcessName& process, const ProcessHandle& handle) override {
    return local_.Adopt(process, handle);
  }
  Status Signal(const ProcessName& process, int signal) override {
    return local_.Signal(process, signal);
  }
  void StopAll(std::chrono::milliseconds grace) override { local_.StopAll(grace); }

 private:
  LocalBackend local_;
};

std::string HostOf(const std::string& address) { return SplitHostPort(address).host; }

}  // namespace

const std::vector<std::string>& ClusterKinds() {
  static const std::vector<std::string> kinds = {"local", "slurm", "kubernetes", "external"};
  return kinds;
}

StatusOr<std::unique_ptr<ClusterBackend>> MakeBackend(const BackendConfig& config,
                                                      ClusterBackend::ExitCallback on_exit) {
  std::string binary = config.binary;
  if (binary.empty()) binary = ElasticdlBinary();
  if (config.kind == "local" || config.kind == "external") {
    LocalBackendOptions local;
    local.spare_fork_server = config.fork_server_fd;
    local.binary = binary;
    local.job_dir = config.job_dir;
    local.master_address = config.master_address;
    local.ps_host = HostOf(config.master_address);
    local.output_fd = config.output_fd;
    // The job's processes share this machine's cores: OpenMP threads that
    // spin while waiting for work take cores from the others (a two-thread
    // worker next to a busy process runs several times slower). Sleep
    // instead, unless the user chose otherwise.
    if (config.environment.omp_wait_policy.empty()) {
      local.env.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
    }
    if (config.kind == "local") {
      // Workers whose LibTorch threads fill this machine's cores between
      // them each get cores of their own: the scheduler no longer moves a
      // worker's threads across cores (and their caches) to make room for
      // the servers', the master's and the pipelines' short bursts, which
      // take whichever core is waiting on a synchronous step. With cores
      // to spare, workers are left free to use them.
      if (config.bind_workers && config.num_workers >= 2 && config.worker_threads >= 1 &&
          static_cast<size_t>(config.num_workers) * config.worker_threads == AllowedCpus().size()) {
        local.worker_cpus = config.worker_threads;
      }
      return std::unique_ptr<ClusterBackend>(
          std::make_unique<LocalBackend>(std::move(local), std::move(on_exit)));
    }
    return std::unique_ptr<ClusterBackend>(
        std::make_unique<ExternalBackend>(std::move(local), std::move(on_exit)));
  }
  if (config.fork_server_fd >= 0) ::close(config.fork_server_fd);
  if (config.kind == "slurm") {
    SlurmBackendOptions slurm;
    slurm.binary = binary;
    slurm.job_dir = config.job_dir;
    slurm.master_address = config.master_address;
    slurm.job_name = config.job_name;
    slurm.partition = config.partition;
    slurm.worker_partition = config.worker_partition;
    slurm.requeue_master = config.detached_master;
    slurm.worker_cpus = config.worker_threads;
    return std::unique_ptr<ClusterBackend>(
        std::make_unique<SlurmBackend>(std::move(slurm), std::move(on_exit)));
  }
  if (config.kind == "kubernetes") {
    EDL_ASSIGN_OR_RETURN(KubeConfig kube, KubeConfigFromEnvironment(config.environment));
    EDL_ASSIGN_OR_RETURN(std::unique_ptr<HttpKubeClient> client,
                         HttpKubeClient::Create(std::move(kube)));
    KubernetesBackendOptions options;
    options.spec = config.kubernetes;
    options.job_name = config.job_name;
    options.job_dir = config.job_dir;
    options.master_address = config.master_address;
    EDL_ASSIGN_OR_RETURN(
        std::unique_ptr<KubernetesBackend> backend,
        KubernetesBackend::Create(std::move(options), std::move(client), std::move(on_exit)));
    return std::unique_ptr<ClusterBackend>(std::move(backend));
  }
  return absl::InvalidArgumentError(
      StrCat("unknown cluster '", config.kind, "': expected local, slurm, kubernetes or external"));
}

}  // namespace elasticdl::cluster
