#include "master/master_config.h"

#include <unistd.h>

#include <utility>

#include "common/strings.h"
#include "job/job_spec.h"
#include "job/trained_model.h"
#include "rpc/job_credentials.h"

namespace elasticdl::master {
namespace {

// Where the master listens: the cluster's master_addr ("host:port"; port 0
// or none picks a free one), else the command line's interface on this
// machine and the node's name under Slurm, which the other nodes resolve.
Status BindAddress(const proto::ClusterSpec& cluster, std::string* host, int* port) {
  if (!cluster.master_addr().empty()) {
    const std::string& addr = cluster.master_addr();
    HostPort bind = SplitHostPort(addr);
    *host = bind.host;
    *port = bind.port;
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

}  // namespace

StatusOr<MasterConfig> ConfigureMaster(const MasterOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(rpc::JobCredentials credentials, rpc::ReadJobCredentials(options.job_dir));
  return ConfigureMaster(options, spec, std::move(credentials));
}

StatusOr<MasterConfig> ConfigureMaster(const MasterOptions& options, const proto::JobSpec& spec,
                                       rpc::JobCredentials credentials) {
  MasterConfig config;
  config.spec = spec;
  config.job_dir = options.job_dir;
  config.credentials = std::move(credentials);
  config.host = options.host;
  config.port = options.port;
  EDL_RETURN_IF_ERROR(BindAddress(spec.cluster(), &config.host, &config.port));

  const proto::TaskSpec& tasks = spec.tasks();
  config.records_per_task = tasks.minibatch_size() * tasks.num_minibatches_per_task();
  if (config.records_per_task <= 0) {
    return absl::InvalidArgumentError(
        StrCat("--minibatch_size=", tasks.minibatch_size(), " and --num_minibatches_per_task=",
               tasks.num_minibatches_per_task(), ": records per task must be positive"));
  }
  TaskManagerOptions& t = config.tasks;
  t.job_type = spec.type();
  t.num_epochs = tasks.num_epochs();
  t.shuffle_seed = tasks.shuffle_seed();
  t.max_task_retries = spec.fault_tolerance().max_task_retries();
  t.evaluation_steps = tasks.evaluation_steps();
  t.minibatch_size = tasks.minibatch_size();
  t.max_steps = tasks.max_steps();
  t.early_stopping = tasks.early_stopping();
  // The version evaluated, or predicted with (said in the job's summary).
  if (spec.type() == proto::JOB_EVALUATION ||
      (spec.type() == proto::JOB_PREDICTION && !spec.model().trained_model().empty())) {
    EDL_ASSIGN_OR_RETURN(proto::TrainedModel model,
                         ReadTrainedModelRecord(spec.model().trained_model()));
    t.model_version = model.model_version();
  }

  const bool training = spec.type() == proto::JOB_TRAINING;
  // Evaluation and prediction need servers only for a model's embedding
  // tables (restored from a checkpoint).
  const int num_ps =
      training || !spec.ps().checkpoint_dir_for_init().empty() ? spec.ps().num_ps() : 0;
  const proto::UpdateRule::Mode update = spec.ps().update().mode();

  JobStateOptions& state = config.state;
  state.type = spec.type();
  state.num_ps = num_ps;
  state.workers_target = spec.workers().num_workers();
  state.max_workers = spec.workers().max_workers();
  state.wait_for_workers = spec.workers().min_workers();
  if (spec.fault_tolerance().worker_lease_ms() > 0) {
    state.worker_lease = std::chrono::milliseconds(spec.fault_tolerance().worker_lease_ms());
  }
  state.job_dir = options.job_dir;
  const bool collective = training && spec.strategy() != proto::PARAMETER_SERVER_STRATEGY;
  state.flush_at_end = training && !collective && update != proto::UpdateRule::ASYNC;
  state.collective = collective;
  // Workers in lockstep: every task of a file the same number of steps, and
  // no two tasks of the same records in one step.
  if (training && (collective || update != proto::UpdateRule::ASYNC)) {
    config.training_task_sizes = TaskSizes::kEven;
    t.lockstep = true;
  }
  state.max_nonfinite_minibatches = spec.fault_tolerance().max_nonfinite_minibatches();
  state.straggler_factor = spec.fault_tolerance().straggler_factor();
  state.backup_tasks = spec.fault_tolerance().backup_tasks();

  config.supervisor.num_ps = num_ps;
  config.supervisor.max_worker_relaunches = spec.fault_tolerance().max_worker_relaunches();
  config.supervisor.max_ps_relaunches = spec.fault_tolerance().max_ps_relaunches();
  config.supervisor.job_dir = spec.job_dir();

  cluster::BackendConfig& backend = config.backend;
  backend.kind = spec.cluster().kind().empty() ? "local" : spec.cluster().kind();
  backend.binary = spec.cluster().binary().empty() ? options.binary : spec.cluster().binary();
  backend.job_dir = options.job_dir;
  backend.job_name = spec.job_name();
  backend.partition = spec.cluster().partition();
  backend.worker_partition = spec.cluster().worker_partition();
  backend.kubernetes = spec.cluster().kubernetes();
  backend.worker_threads = spec.workers().threads();
  backend.num_workers = spec.workers().num_workers();
  backend.bind_workers = !spec.cluster().unbound_workers();
  backend.environment = options.environment;
  backend.fork_server_fd = options.fork_server_fd;

  config.observer.job_dir = options.job_dir;
  config.observer.job_name = spec.job_name();
  config.observer.host = config.host;
  config.observer.credentials = config.credentials;
  config.observer.web_dir = options.environment.web_dir;

  config.publish_group = training && !collective && update == proto::UpdateRule::SYNC_EVERY_WORKER;
  config.checkpoint_at_end = training && !collective && spec.ps().checkpoint_steps() > 0;
  config.collective = collective;
  return config;
}

}  // namespace elasticdl::master
