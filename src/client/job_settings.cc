#include "client/job_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/stop_settings.h"
#include "cluster/backends.h"
#include "cluster/kubernetes/kube_config.h"
#include "cluster/kubernetes/pod_manifests.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/seed.h"
#include "elasticdl/zoo/lr_schedule.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// The most workers a local job runs, per core of its machine (tests and
// trials oversubscribe; thousands of processes only stall the machine).
constexpr int64_t kLocalWorkersPerCore = 16;

std::vector<JobSetting> MakeSettings() {
  using A = JobArgs;
  constexpr unsigned kTrain = kTrainCmd;
  constexpr unsigned kAll = kAllCmds;
  std::vector<JobSetting> all;
  // Each group is a section of the command's --help.
  const auto group = [&all](const char* name, std::initializer_list<JobSetting> settings) {
    for (JobSetting s : settings) {
      s.group = name;
      all.push_back(s);
    }
  };
  group(
      "Model",
      {
          {"--model_zoo", &A::model_zoo,
           "The model zoo's C++ sources: a directory, or a Git URL (https, http, git or file) with "
           "an optional #branch, #tag or #commit",
           kAll, kTrain},
          {"--model_def", &A::model_def,
           "The model entry, e.g. mnist.mnist_functional_api.custom_model", kAll, kTrain},
          {"--dataset_fn,--input_fn", &A::dataset_fn,
           "dataset_fn (or seed 002's input_fn) entry; default: the model class's default_input, "
           "else the model file's input_fn or dataset_fn"},
          {"--loss", &A::loss, "Loss entry; default: the model class's default_loss, else loss"},
          {"--optimizer", &A::optimizer,
           "Optimizer entry; default: the model class's default_optimizer, else optimizer"},
          {"--eval_metrics_fn", &A::eval_metrics_fn,
           "Evaluation metrics entry; default: the model class's default_eval_metrics, else "
           "eval_metrics_fn if the model file has one"},
          {"--learning_rate_schedule", &A::learning_rate_schedule,
           "Learning-rate schedule entry (optional; --lr_schedule replaces it)", kTrain},
          {"--lr_schedule", &A::lr_schedule,
           "Learning rate by model version: [warmup=W,] then one of step=N,gamma=G | "
           "milestones=A:B:...,gamma=G | exponential=N,rate=R[,staircase=true] | "
           "cosine=T[,min_lr=M][,periodic=true] | linear=T,start_factor=S[,end_factor=E] | "
           "polynomial=T[,power=P] (S in (0, 1], E in [0, 1], P above 0), e.g. "
           "\"warmup=100,cosine=2000,min_lr=0.0001\"; later phases after ';', each at=N "
           "and the same keys, running from version N on the versions since (at=N alone: "
           "lr0), e.g. \"linear=5,start_factor=0.01;at=5,cosine=95\"",
           kTrain},
          {"--params", &A::params,
           "Model parameters, e.g. \"hidden_units=[10, 100, 20, 5], learning_rate=0.01\""},
          {"--trained_model", &A::trained_model, "The model: a directory written by train --output",
           kInferenceCmds},
          {"--checkpoint_dir_for_init", &A::checkpoint_dir_for_init,
           "The newest complete checkpoint in this directory (any number of shards): train starts "
           "from it; evaluate and predict use its parameters with --model_zoo and --model_def"},
      });
  group("Data", {
                    {"--training_data", &A::training_data,
                     "Record files: a file, a directory or a glob (several: comma-separated)",
                     kTrain, kTrain},
                    {"--validation_data", &A::validation_data,
                     "Record files evaluated during and after training, or by evaluate",
                     kTrain | kEvaluateCmd, kEvaluateCmd},
                    {"--prediction_data,--data", &A::prediction_data, "Record files to predict",
                     kPredictCmd, kPredictCmd},
                });
  group(
      "Tasks and evaluation",
      {
          {"--minibatch_size", &A::minibatch_size, "Records per minibatch", kAll, 0, 1, 1 << 30},
          {"--num_minibatches_per_task", &A::num_minibatches_per_task, "Minibatches per task", kAll,
           0, 1, 1 << 30},
          {"--num_epochs", &A::num_epochs, "Passes over the training data", kTrain, 0, 1},
          {"--evaluation_steps", &A::evaluation_steps,
           "Evaluate every this many model versions (0: at the end only)", kTrain, 0, 0, kInt64Max},
          {"--max_steps", &A::max_steps,
           "Stop training when the model version reaches this (0: train every epoch)", kTrain, 0, 0,
           kInt64Max},
          {"--early_stopping", &A::early_stopping,
           "Stop training when an evaluation metric stops improving: "
           "metric=NAME,mode=max|min,patience=N[,min_delta=D] (needs --evaluation_steps and "
           "--validation_data)",
           kTrain},
          {"--shuffle_seed", &A::shuffle_seed,
           "Seed of the per-epoch task order (default: derived from --seed)", kTrain},
          {"--seed", &A::seed,
           "Seed of every random choice: initial parameters, task order, dataset_fn shuffles, "
           "dropout",
           kTrain},
      });
  group("Training strategy",
        {
            {"--distribution_strategy", &A::distribution_strategy,
             "ParameterServerStrategy (servers hold the model; the default), AllreduceStrategy "
             "(every "
             "worker holds the model and gradients are all-reduced; dense models) or Local (one "
             "worker trains alone)",
             kTrain},
            {"--num_ps_pods", &A::num_ps_pods,
             "Parameter server shards (ParameterServerStrategy; default 1)", kTrain, 0, 1, 1024},
            {"--use_async", &A::use_async,
             "true: asynchronous updates, each gradient a step of its own", kTrain},
            {"--grads_to_wait", &A::grads_to_wait,
             "Synchronous mode: gradients averaged per step (default: one of every worker training "
             "at "
             "the time)",
             kTrain},
            {"--sync_version_tolerance", &A::sync_version_tolerance,
             "Synchronous mode: how many versions old a gradient may be", kTrain},
            {"--max_staleness", &A::max_staleness,
             "Asynchronous mode: how many versions old a gradient may be (-1: any)", kTrain, 0, -1},
            {"--lr_staleness_modulation", &A::lr_staleness_modulation,
             "Asynchronous mode: scale gradients by 1 / (1 + staleness)", kTrain},
        });
  group("Workers", {
                       {"--num_workers", &A::num_workers, "Worker processes", kAll, 0, 1, 1 << 20},
                       {"--max_workers", &A::max_workers,
                        "The most workers `elasticdl job scale` may ask for (0: 4 per core here on "
                        "the local and "
                        "external clusters, 1024 on Slurm and Kubernetes; at least --num_workers)",
                        kTrain, 0, 0, 1 << 20},
                       {"--min_workers", &A::min_workers,
                        "Training begins once this many workers run; the others join as they "
                        "start (0: 1 on Slurm and Kubernetes, --num_workers on the local and "
                        "external clusters; --num_workers: wait for all, gang scheduling)",
                        kAll, 0, 0, 1 << 20},
                       {"--num_threads", &A::num_threads,
                        "LibTorch threads per worker (0: the cores divided among the workers)",
                        kAll, 0, 0, 4096},
                   });
  group(
      "Fault tolerance",
      {
          {"--checkpoint_steps", &A::checkpoint_steps,
           "Checkpoint the parameter servers every this many versions (0: only the initial model)",
           kTrain, 0, 0, kInt64Max},
          {"--checkpoint_dir", &A::checkpoint_dir,
           "Where checkpoints go (default: <job_dir>/checkpoints)", kTrain},
          {"--keep_checkpoint_max", &A::keep_checkpoint_max,
           "Checkpoints kept per parameter server (0: all)", kTrain},
          {"--worker_lease_ms", &A::worker_lease_ms,
           "A worker not heard from for this long is taken as lost", kAll, 0, 100},
          {"--max_task_retries", &A::max_task_retries,
           "Failures a task may have before the job fails"},
          {"--max_worker_relaunches", &A::max_worker_relaunches,
           "Crashed workers relaunched before the job gives up"},
          {"--max_ps_relaunches", &A::max_ps_relaunches,
           "Parameter-server relaunches before the job fails", kTrain},
          {"--max_master_restarts", &A::max_master_restarts,
           "Restarts of a master that died before the job fails"},
          {"--max_nonfinite_minibatches", &A::max_nonfinite_minibatches,
           "Minibatches with a non-finite loss or gradient before the job fails", kTrain},
          {"--straggler_factor", &A::straggler_factor,
           "A worker whose minibatches take this many times the others' median (three or more "
           "workers) leaves and is replaced (0: never)",
           kTrain, 0, 0, 1000},
          {"--backup_tasks", &A::backup_tasks,
           "true: near the end of training, an idle worker takes a second attempt of a task "
           "whose worker trains over 3 times (and 10 ms a minibatch) slower; the first to finish "
           "wins",
           kTrain},
          {"--model_call_timeout", &A::model_call_timeout,
           "Seconds a call into the model's code on a worker (making a minibatch with dataset_fn, "
           "forward, the loss, backward, the metrics) may run: one that has not returned by then "
           "ends the worker, which logs where a Python model's code is; its task fails and the "
           "worker is relaunched (0: never)",
           kAll, 0, 0, 1 << 30},
      });
  group(
      "Cluster",
      {
          {"--job_dir", &A::job_dir,
           "Directory for the job's spec and intermediate files (default: a new one under "
           "$TMPDIR/elasticdl-jobs-$UID)"},
          {"--job_name", &A::job_name, "Name of the job (default: the job directory's name)"},
          {"--cluster", &A::cluster,
           "Where the job runs: local (processes here), slurm (a Slurm cluster: SLURM_CONF, else "
           "/etc/slurm/slurm.conf), kubernetes (pods: $KUBECONFIG, else ~/.kube/config, else the "
           "pod's service account) or external (workers join with `elasticdl worker "
           "--master=HOST:PORT --credentials_file=FILE`)"},
          {"--master_addr", &A::master_addr,
           "HOST:PORT the master binds and advertises (default 127.0.0.1 here, the node's name "
           "under Slurm; port 0: any free one)"},
          {"--partition", &A::partition,
           "Slurm partition of the master and parameter servers, and of the workers unless "
           "--priority is given (default: the cluster's); it should be one nothing preempts"},
          {"--priority", &A::priority,
           "Slurm: high or low; the workers run in the partition --priority_partitions names for "
           "it, where a high-priority job's workers may preempt a low-priority job's (a preempted "
           "worker hands its task back and the master submits another, which starts when Slurm "
           "has room)"},
          {"--priority_partitions", &A::priority_partitions,
           "Slurm: the partitions of --priority=high and --priority=low"},
          {"--insecure_transport", &A::insecure_transport,
           "true: the job's processes call one another in plaintext, authenticated by the job's "
           "token alone (default: mutual TLS with certificates of a CA of the job's own)",
           kAll},
          {"--bind_workers", &A::bind_workers,
           "true (default): on the local cluster each worker runs on cores of its own when the "
           "workers' threads (--num_workers x --num_threads) fill this machine's cores, and on "
           "any cluster a worker with exactly as many cores as threads gives each thread a core "
           "of its own while its input pipeline keeps ahead of the model; false leaves every "
           "thread to the kernel's scheduler",
           kAll},
          {"--local_sockets", &A::local_sockets,
           "false: processes on one machine call one another over TCP too (default: through Unix "
           "sockets in the job directory, which only the job's user can enter)",
           kAll},
          {"--detach", &A::detach,
           "Slurm: return once submitted; `elasticdl job status JOB_DIR` follows the job", kAll, 0,
           0, 0, /*is_switch=*/true},
      });
  group(
      "Kubernetes",
      {
          {"--image_name", &A::image_name,
           "Kubernetes: the image every pod runs (elasticdl on its PATH; `elasticdl zoo build` "
           "makes one holding the model zoo)"},
          {"--namespace", &A::k8s_namespace,
           "Kubernetes: the namespace of the job's pods (default: the kubeconfig context's, else "
           "default)"},
          {"--master_resource_request", &A::master_resource_request,
           "Kubernetes: the master pod's resource requests, e.g. cpu=1,memory=2048Mi"},
          {"--master_resource_limit", &A::master_resource_limit,
           "Kubernetes: the master pod's resource limits"},
          {"--ps_resource_request", &A::ps_resource_request,
           "Kubernetes: each parameter-server pod's resource requests"},
          {"--ps_resource_limit", &A::ps_resource_limit,
           "Kubernetes: each parameter-server pod's resource limits"},
          {"--worker_resource_request", &A::worker_resource_request,
           "Kubernetes: each worker pod's resource requests, e.g. cpu=2,memory=4096Mi,gpu=1"},
          {"--worker_resource_limit", &A::worker_resource_limit,
           "Kubernetes: each worker pod's resource limits"},
          {"--volume", &A::volume,
           "Kubernetes: volumes every pod mounts, host_path=/data,mount_path=/data or "
           "claim_name=PVC,mount_path=/data[,read_only=true] (several: ';'-separated); the job "
           "directory, data and outputs must be on them"},
          {"--image_pull_policy", &A::image_pull_policy,
           "Kubernetes: Always, IfNotPresent or Never"},
          {"--restart_policy", &A::restart_policy,
           "Kubernetes: the master pod's restart policy, Never (the client starts a new master "
           "pod) "
           "or OnFailure (the kubelet also restarts a crashed master in place)"},
          {"--envs", &A::envs, "Kubernetes: environment of every pod, e.g. \"K1=v1,K2=v2\""},
          {"--cluster_spec", &A::cluster_spec,
           "Kubernetes: a YAML file {pod: {...}, service: {...}} of merge patches applied to every "
           "pod and service (node selectors, tolerations, a service account, labels)"},
          {"--worker_pod_priority", &A::worker_pod_priority,
           "Kubernetes: the priority class of worker pods (a low one lets the cluster preempt "
           "them; a preempted worker hands its task back)"},
          {"--yaml", &A::yaml,
           "Kubernetes: write the master's pod and service to this file (for kubectl apply) "
           "instead of submitting them"},
      });
  group("Output",
        {
            {"--output", &A::output,
             "train: write the trained model to this directory (default: none); predict: the CSV "
             "file of predictions (or a directory for predictions.csv)",
             kTrain | kPredictCmd, kPredictCmd},
            {"!--no_progress", &A::progress, "Do not show a progress bar", kAll, 0, 0, 0,
             /*is_switch=*/true},
        });
  return all;
}

bool IsGiven(const JobArgs& args, const JobSetting::Field& field) {
  return std::visit(
      [&args](auto member) -> bool {
        using T = std::decay_t<decltype(args.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return !(args.*member).empty();
        } else if constexpr (std::is_same_v<T, std::optional<int64_t>> ||
                             std::is_same_v<T, std::optional<uint64_t>>) {
          return (args.*member).has_value();
        } else {
          return true;
        }
      },
      field);
}

// The integer value of `field`, if it holds a signed one.
std::optional<int64_t> SignedValue(const JobArgs& args, const JobSetting::Field& field) {
  if (auto* m = std::get_if<int64_t JobArgs::*>(&field)) return args.**m;
  if (auto* m = std::get_if<std::optional<int64_t> JobArgs::*>(&field)) return args.**m;
  return std::nullopt;
}

Status CheckMasterAddr(const std::string& addr) {
  if (addr.empty()) return absl::OkStatus();
  size_t colon = addr.rfind(':');
  const std::string port = colon == std::string::npos ? "" : addr.substr(colon + 1);
  if (colon == 0 || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) > 65535) {
    return absl::InvalidArgumentError(
        StrCat("--master_addr=", addr, ": expected HOST:PORT (port 0: any free one)"));
  }
  return absl::OkStatus();
}

// A job's name names its default directory (under the jobs root) and leads
// its log lines and its dashboard's title.
Status CheckJobName(const std::string& name) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (control || name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        StrCat("--job_name=", absl::CHexEscape(name),
               ": a job's name names its directory and leads its log lines: no '/', no control "
               "characters, not '.' or '..'"));
  }
  return absl::OkStatus();
}

int32_t Int32(int64_t checked) { return static_cast<int32_t>(checked); }

// "K1=v1,K2=v2" -> names and values, in order.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvs(const std::string& envs) {
  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]*$");
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(envs, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (!std::regex_match(kv.first, kName) || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat("--envs=", envs, ": '", std::string(item), "' is not NAME=VALUE"));
    }
    out.push_back(kv);
  }
  return out;
}

// The Slurm partition of the workers: the one --priority_partitions names
// for --priority, or "" (the job's --partition).
StatusOr<std::string> WorkerPartition(const JobArgs& args) {
  const bool default_partitions = args.priority_partitions == JobArgs().priority_partitions;
  if (args.cluster != "slurm") {
    if (!args.priority.empty()) {
      return absl::InvalidArgumentError(
          "--priority needs --cluster=slurm (on Kubernetes, --worker_pod_priority names a "
          "priority class)");
    }
    if (!default_partitions) {
      return absl::InvalidArgumentError("--priority_partitions needs --cluster=slurm");
    }
    return std::string();
  }
  std::map<std::string, std::string> partitions;
  for (absl::string_view pair : absl::StrSplit(args.priority_partitions, ',')) {
    std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || (kv[0] != "high" && kv[0] != "low") || kv[1].empty()) {
      return absl::InvalidArgumentError(
          StrCat("--priority_partitions=", args.priority_partitions, ": '", pair,
                 "' is not high=PARTITION or low=PARTITION (e.g. high=high,low=low)"));
    }
    if (!partitions.emplace(kv[0], kv[1]).second) {
      return absl::InvalidArgumentError(StrCat("--priority_partitions=", args.priority_partitions,
                                               ": ", kv[0], " is given twice"));
    }
  }
  if (args.priority.empty()) return std::string();
  if (args.priority != "high" && args.priority != "low") {
    return absl::InvalidArgumentError(
        StrCat("--priority=", args.priority, ": expected high or low"));
  }
  auto it = partitions.find(args.priority);
  if (it == partitions.end()) {
    return absl::InvalidArgumentError(StrCat("--priority=", args.priority,
                                             ": --priority_partitions=", args.priority_partitions,
                                             " names no partition for ", args.priority));
  }
  return it->second;
}

// The Kubernetes flags: given only with --cluster=kubernetes, and valid.
Status CheckKubernetesArgs(const JobArgs& args, JobCommand command) {
  const std::pair<const char*, const std::string*> only_kubernetes[] = {
      {"--image_name", &args.image_name},
      {"--namespace", &args.k8s_namespace},
      {"--master_resource_request", &args.master_resource_request},
      {"--master_resource_limit", &args.master_resource_limit},
      {"--ps_resource_request", &args.ps_resource_request},
      {"--ps_resource_limit", &args.ps_resource_limit},
      {"--worker_resource_request", &args.worker_resource_request},
      {"--worker_resource_limit", &args.worker_resource_limit},
      {"--volume", &args.volume},
      {"--envs", &args.envs},
      {"--cluster_spec", &args.cluster_spec},
      {"--worker_pod_priority", &args.worker_pod_priority},
      {"--yaml", &args.yaml}};
  if (args.cluster != "kubernetes") {
    for (const auto& [flag, value] : only_kubernetes) {
      if (!value->empty())
        return absl::InvalidArgumentError(StrCat(flag, " needs --cluster=kubernetes"));
    }
    return absl::OkStatus();
  }
  if (args.image_name.empty() && (command == JobCommand::kTrain || args.trained_model.empty())) {
    return absl::InvalidArgumentError(
        "--cluster=kubernetes needs --image_name (an image with elasticdl on its PATH; "
        "`elasticdl zoo build` makes one; evaluate and predict default to the trained model's)");
  }
  if (!args.master_addr.empty()) {
    return absl::InvalidArgumentError(
        "--master_addr: on Kubernetes the master binds its pod's address");
  }
  static const std::regex kDnsLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  const std::string name =
      !args.job_name.empty()
          ? args.job_name
          : (args.job_dir.empty() ? "train"
                                  : fs::path(AbsolutePath(args.job_dir)).filename().string());
  if (!std::regex_match(name, kDnsLabel) || name.size() > 40) {
    return absl::InvalidArgumentError(StrCat(
        args.job_name.empty() ? "the job's name (the job directory's): '" : "--job_name=", name,
        args.job_name.empty() ? "'" : "",
        ": on Kubernetes it names pods and services: lower-case letters, digits and '-', "
        "at most 40 characters"));
  }
  if (!args.k8s_namespace.empty() && !std::regex_match(args.k8s_namespace, kDnsLabel)) {
    return absl::InvalidArgumentError(
        StrCat("--namespace=", args.k8s_namespace, ": not a namespace name"));
  }
  if (args.image_pull_policy != "Always" && args.image_pull_policy != "IfNotPresent" &&
      args.image_pull_policy != "Never") {
    return absl::InvalidArgumentError(StrCat("--image_pull_policy=", args.image_pull_policy,
                                             ": expected Always, IfNotPresent or Never"));
  }
  if (args.restart_policy != "Never" && args.restart_policy != "OnFailure") {
    return absl::InvalidArgumentError(
        StrCat("--restart_policy=", args.restart_policy,
               ": expected Never or OnFailure (the master pod's; the master relaunches its "
               "parameter servers and workers itself)"));
  }
  if (args.volume.empty()) {
    return absl::InvalidArgumentError(
        "--cluster=kubernetes needs --volume: the job directory, the data and the outputs must "
        "be on storage every pod mounts at the path this machine sees them "
        "(host_path=/data,mount_path=/data or claim_name=PVC,mount_path=/data)");
  }
  EDL_RETURN_IF_ERROR(cluster::ParseVolumes(args.volume).status());
  EDL_RETURN_IF_ERROR(ParseEnvs(args.envs).status());
  const std::pair<const char*, const std::string*> resources[] = {
      {"--master_resource_request", &args.master_resource_request},
      {"--master_resource_limit", &args.master_resource_limit},
      {"--ps_resource_request", &args.ps_resource_request},
      {"--ps_resource_limit", &args.ps_resource_limit},
      {"--worker_resource_request", &args.worker_resource_request},
      {"--worker_resource_limit", &args.worker_resource_limit}};
  for (const auto& [flag, value] : resources) {
    EDL_RETURN_IF_ERROR(cluster::ParseResources(*value, flag).status());
  }
  if (!args.cluster_spec.empty()) {
    EDL_RETURN_IF_ERROR(cluster::ReadClusterSpecOverlay(args.cluster_spec).status());
  }
  return absl::OkStatus();
}

// The pods' side of a Kubernetes job (the flags are checked).
StatusOr<proto::KubernetesSpec> KubernetesSpecOf(const JobArgs& args) {
  proto::KubernetesSpec k8s;
  std::string ns = args.k8s_namespace;
  if (ns.empty()) {
    // The context's, as kubectl's; without a configuration (writing
    // --yaml elsewhere) the default.
    StatusOr<cluster::KubeConfig> config = cluster::KubeConfigFromEnvironment(ReadEnvironment());
    ns = config.ok() ? config->ns : "default";
    if (!config.ok()) {
      fmt::print(stderr, "note: namespace \"default\" (no --namespace, and {})\n",
                 std::string(config.status().message()));
    }
  }
  k8s.set_namespace_(ns);
  k8s.set_image(args.image_name);
  k8s.set_image_pull_policy(args.image_pull_policy);
  k8s.set_restart_policy(args.restart_policy);
  auto resources = [](const std::string& request, const std::string& limit, const char* role,
                      proto::PodResources* out) -> Status {
    EDL_ASSIGN_OR_RETURN(auto requests,
                         cluster::ParseResources(request, StrCat("--", role, "_resource_request")));
    EDL_ASSIGN_OR_RETURN(auto limits,
                         cluster::ParseResources(limit, StrCat("--", role, "_resource_limit")));
    out->mutable_requests()->insert(requests.begin(), requests.end());
    out->mutable_limits()->insert(limits.begin(), limits.end());
    return absl::OkStatus();
  };
  EDL_RETURN_IF_ERROR(resources(args.master_resource_request, args.master_resource_limit, "master",
                                k8s.mutable_master_resources()));
  EDL_RETURN_IF_ERROR(resources(args.ps_resource_request, args.ps_resource_limit, "ps",
                                k8s.mutable_ps_resources()));
  EDL_RETURN_IF_ERROR(resources(args.worker_resource_request, args.worker_resource_limit, "worker",
                                k8s.mutable_worker_resources()));
  EDL_ASSIGN_OR_RETURN(std::vector<proto::PodVolume> volumes, cluster::ParseVolumes(args.volume));
  for (const proto::PodVolume& v : volumes) *k8s.add_volumes() = v;
  EDL_ASSIGN_OR_RETURN(auto envs, ParseEnvs(args.envs));
  for (const auto& [name, value] : envs) {
    k8s.add_env_names(name);
    k8s.add_env_values(value);
  }
  k8s.set_worker_priority_class(args.worker_pod_priority);
  if (!args.cluster_spec.empty()) {
    EDL_ASSIGN_OR_RETURN(std::string overlay, cluster::ReadClusterSpecOverlay(args.cluster_spec));
    k8s.set_overlay_json(overlay);
  }
  return k8s;
}

proto::UpdateRule UpdateRuleOf(const JobArgs& args) {
  proto::UpdateRule rule;
  bool async = args.use_async;
  if (args.grads_to_wait == 0) {
    // The spelling of asynchronous training before --use_async.
    fmt::print(stderr, "note: --grads_to_wait=0 is read as --use_async=true\n");
    async = true;
  }
  if (async) {
    rule.set_mode(proto::UpdateRule::ASYNC);
    rule.set_max_version_lag(Int32(args.max_staleness));
    rule.set_lr_staleness_modulation(args.lr_staleness_modulation);
  } else {
    rule.set_mode(args.grads_to_wait ? proto::UpdateRule::SYNC_FIXED
                                     : proto::UpdateRule::SYNC_EVERY_WORKER);
    rule.set_grads_to_wait(Int32(args.grads_to_wait.value_or(0)));
    rule.set_max_version_lag(Int32(args.sync_version_tolerance));
  }
  return rule;
}

StatusOr<proto::DistributionStrategy> StrategyOf(const std::string& name) {
  if (name == "ParameterServerStrategy") return proto::PARAMETER_SERVER_STRATEGY;
  if (name == "AllreduceStrategy") return proto::ALLREDUCE_STRATEGY;
  if (name == "Local") return proto::LOCAL_STRATEGY;
  return absl::InvalidArgumentError(
      StrCat("--distribution_strategy=", name,
             ": expected ParameterServerStrategy, AllreduceStrategy or Local"));
}

Status CheckStrategy(const JobArgs& args) {
  EDL_ASSIGN_OR_RETURN(proto::DistributionStrategy strategy,
                       StrategyOf(args.distribution_strategy));
  if (strategy == proto::PARAMETER_SERVER_STRATEGY) return absl::OkStatus();
  const std::string flag = "--distribution_strategy=" + args.distribution_strategy;
  if (args.num_ps_pods.has_value()) {
    return absl::InvalidArgumentError(StrCat(
        "--num_ps_pods=", *args.num_ps_pods, " with ", flag,
        ": the workers hold the model, without parameter servers (models with Embedding layers "
        "need ParameterServerStrategy)"));
  }
  if (args.use_async || args.grads_to_wait.has_value()) {
    return absl::InvalidArgumentError(
        StrCat(args.use_async ? "--use_async" : "--grads_to_wait", " with ", flag,
               ": its steps are synchronous, one minibatch of every worker each"));
  }
  if (strategy == proto::LOCAL_STRATEGY && args.num_workers != 1) {
    return absl::InvalidArgumentError(StrCat("--num_workers=", args.num_workers, " with ", flag,
                                             ": Local trains in one worker (AllreduceStrategy "
                                             "trains in several)"));
  }
  return absl::OkStatus();
}

}  // namespace

unsigned CommandBit(JobCommand command) {
  switch (command) {
    case JobCommand::kTrain:
      return kTrainCmd;
    case JobCommand::kEvaluate:
      return kEvaluateCmd;
    case JobCommand::kPredict:
      return kPredictCmd;
  }
  return 0;
}

const std::vector<JobSetting>& JobSettings() {
  static const std::vector<JobSetting> settings = MakeSettings();
  return settings;
}

std::string FlagName(const JobSetting& setting) {
  std::string flags = setting.flags;
  std::string name = flags.substr(0, flags.find(','));
  if (!name.empty() && name[0] == '!') name.erase(0, 1);
  return name;
}

Status CheckJobArgs(const JobArgs& args, JobCommand command) {
  const unsigned bit = CommandBit(command);
  for (const JobSetting& s : JobSettings()) {
    if ((s.commands & bit) == 0) continue;
    const std::string flag = FlagName(s);
    if ((s.required & bit) != 0 && !IsGiven(args, s.field)) {
      return absl::InvalidArgumentError(StrCat(flag, " is required"));
    }
    std::optional<int64_t> v = SignedValue(args, s.field);
    if (v && *v < s.min) {
      return absl::InvalidArgumentError(StrCat(flag, "=", *v, ": must be at least ", s.min));
    }
    if (v && *v > s.max) {
      return absl::InvalidArgumentError(StrCat(flag, "=", *v, ": must be at most ", s.max));
    }
  }
  EDL_RETURN_IF_ERROR(CheckJobName(args.job_name));
  const auto& kinds = cluster::ClusterKinds();
  if (std::find(kinds.begin(), kinds.end(), args.cluster) == kinds.end()) {
    return absl::InvalidArgumentError(
        StrCat("--cluster=", args.cluster, ": expected ", absl::StrJoin(kinds, ", ")));
  }
  EDL_RETURN_IF_ERROR(CheckMasterAddr(args.master_addr));
  if (!args.partition.empty() && args.cluster != "slurm") {
    return absl::InvalidArgumentError("--partition needs --cluster=slurm");
  }
  if (args.detach && args.cluster != "slurm" && args.cluster != "kubernetes") {
    return absl::InvalidArgumentError(
        "--detach needs --cluster=slurm or kubernetes (a local job's master runs under its "
        "client)");
  }
  EDL_RETURN_IF_ERROR(CheckKubernetesArgs(args, command));
  EDL_RETURN_IF_ERROR(WorkerPartition(args).status());
  if (args.cluster == "local") {
    // Processes of this machine: a typo's 100000 would fork until it stalls.
    const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    const int64_t most = kLocalWorkersPerCore * cores;
    for (const auto& [flag, n] : {std::pair{"--num_workers", args.num_workers},
                                  std::pair{"--max_workers", args.max_workers}}) {
      if (n > most) {
        return absl::InvalidArgumentError(
            StrCat(flag, "=", n, ": the local cluster runs at most ", most, " workers (",
                   kLocalWorkersPerCore, " per core of this machine's ", cores,
                   "); --cluster=slurm, kubernetes or external runs more"));
      }
    }
  }
  if (args.max_workers > 0 && args.max_workers < args.num_workers) {
    return absl::InvalidArgumentError(
        StrCat("--max_workers=", args.max_workers, " is below --num_workers=", args.num_workers));
  }
  if (args.min_workers > args.num_workers) {
    return absl::InvalidArgumentError(StrCat("--min_workers=", args.min_workers,
                                             " is above --num_workers=", args.num_workers,
                                             ": the job would wait for workers it never starts"));
  }
  if (command == JobCommand::kTrain) {
    EDL_RETURN_IF_ERROR(CheckStrategy(args));
    if (args.use_async && args.grads_to_wait.value_or(0) > 0) {
      return absl::InvalidArgumentError(
          StrCat("--grads_to_wait=", *args.grads_to_wait,
                 " makes synchronous steps, but --use_async=true: drop one of them"));
    }
    if (args.evaluation_steps > 0 && args.validation_data.empty()) {
      return absl::InvalidArgumentError(StrCat("--evaluation_steps=", args.evaluation_steps,
                                               " needs --validation_data to evaluate on"));
    }
    if (!args.lr_schedule.empty()) {
      EDL_RETURN_IF_ERROR_WITH_CONTEXT(LearningRateSchedule::Parse(args.lr_schedule).status(),
                                       StrCat("--lr_schedule=", args.lr_schedule));
    }
    return CheckEarlyStopping(args);
  }
  if (args.trained_model.empty() == args.checkpoint_dir_for_init.empty()) {
    return absl::InvalidArgumentError(
        "name the model's parameters once: --trained_model=DIR (written by train --output), or "
        "--checkpoint_dir_for_init=DIR (a training job's checkpoints) with --model_zoo and "
        "--model_def");
  }
  if (!args.checkpoint_dir_for_init.empty()) {
    if (args.model_zoo.empty()) {
      return absl::InvalidArgumentError("--model_zoo is required with --checkpoint_dir_for_init");
    }
    if (args.model_def.empty()) {
      return absl::InvalidArgumentError("--model_def is required with --checkpoint_dir_for_init");
    }
  }
  return absl::OkStatus();
}

StatusOr<proto::JobSpec> JobSpecOf(const JobArgs& args, JobCommand command) {
  EDL_RETURN_IF_ERROR(CheckJobArgs(args, command));
  proto::JobSpec spec;
  spec.set_type(command == JobCommand::kTrain      ? proto::JOB_TRAINING
                : command == JobCommand::kEvaluate ? proto::JOB_EVALUATION
                                                   : proto::JOB_PREDICTION);
  spec.set_seed(args.seed);
  spec.set_output(AbsolutePath(args.output));

  proto::TaskSpec* tasks = spec.mutable_tasks();
  if (command == JobCommand::kTrain) {
    for (absl::string_view s : absl::StrSplit(args.training_data, ',', absl::SkipEmpty())) {
      tasks->add_training_data(AbsolutePath(std::string(s)));
    }
  }
  if (command != JobCommand::kPredict) {
    for (absl::string_view s : absl::StrSplit(args.validation_data, ',', absl::SkipEmpty())) {
      tasks->add_validation_data(AbsolutePath(std::string(s)));
    }
  } else {
    for (absl::string_view s : absl::StrSplit(args.prediction_data, ',', absl::SkipEmpty())) {
      tasks->add_prediction_data(AbsolutePath(std::string(s)));
    }
  }
  tasks->set_minibatch_size(args.minibatch_size);
  tasks->set_num_minibatches_per_task(args.num_minibatches_per_task);
  tasks->set_num_epochs(args.num_epochs);
  tasks->set_evaluation_steps(args.evaluation_steps);
  if (command == JobCommand::kTrain) {
    tasks->set_max_steps(args.max_steps);
    if (!args.early_stopping.empty()) {
      EDL_ASSIGN_OR_RETURN(*tasks->mutable_early_stopping(),
                           ParseEarlyStopping(args.early_stopping));
    }
  }
  tasks->set_shuffle_seed(args.shuffle_seed.value_or(job_seeds::TaskOrder(args.seed)));

  if (command == JobCommand::kTrain) {
    proto::PsSpec* ps = spec.mutable_ps();
    EDL_ASSIGN_OR_RETURN(proto::DistributionStrategy strategy,
                         StrategyOf(args.distribution_strategy));
    spec.set_strategy(strategy);
    ps->set_num_ps(
        strategy == proto::PARAMETER_SERVER_STRATEGY ? Int32(args.num_ps_pods.value_or(1)) : 0);
    *ps->mutable_update() = UpdateRuleOf(args);
    ps->set_checkpoint_steps(args.checkpoint_steps);
    ps->set_checkpoint_dir(AbsolutePath(args.checkpoint_dir));
    ps->set_keep_checkpoint_max(Int32(args.keep_checkpoint_max));
    ps->set_checkpoint_dir_for_init(AbsolutePath(args.checkpoint_dir_for_init));
  }

  proto::WorkerSpec* workers = spec.mutable_workers();
  workers->set_num_workers(Int32(args.num_workers));
  int64_t threads = args.num_threads;
  if (threads == 0) {
    threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / args.num_workers);
  }
  workers->set_threads(Int32(threads));
  int64_t max_workers = args.max_workers;
  if (max_workers == 0) {
    const bool here = args.cluster == "local" || args.cluster == "external";
    max_workers =
        here ? 4 * static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())) : 1024;
  }
  workers->set_max_workers(Int32(std::max(max_workers, args.num_workers)));
  int64_t min_workers = args.min_workers;
  if (min_workers == 0) {
    // Workers pend on a shared cluster: train with the first. Here they all
    // start at once, and a seed's runs begin with the same group.
    const bool shared = args.cluster == "slurm" || args.cluster == "kubernetes";
    min_workers = shared ? 1 : args.num_workers;
  }
  workers->set_min_workers(Int32(min_workers));

  proto::FaultTolerance* ft = spec.mutable_fault_tolerance();
  ft->set_worker_lease_ms(Int32(args.worker_lease_ms));
  ft->set_max_task_retries(Int32(args.max_task_retries));
  ft->set_max_worker_relaunches(Int32(args.max_worker_relaunches));
  ft->set_max_ps_relaunches(Int32(args.max_ps_relaunches));
  ft->set_max_master_restarts(Int32(args.max_master_restarts));
  ft->set_max_nonfinite_minibatches(Int32(args.max_nonfinite_minibatches));
  ft->set_straggler_factor(Int32(args.straggler_factor));
  ft->set_backup_tasks(args.backup_tasks);
  ft->set_model_call_timeout_s(Int32(args.model_call_timeout));

  proto::ClusterSpec* cluster = spec.mutable_cluster();
  cluster->set_kind(args.cluster);
  cluster->set_master_addr(args.master_addr);
  cluster->set_partition(args.partition);
  EDL_ASSIGN_OR_RETURN(std::string worker_partition, WorkerPartition(args));
  cluster->set_worker_partition(worker_partition);
  cluster->set_unbound_workers(!args.bind_workers);
  if (args.cluster == "kubernetes") {
    EDL_ASSIGN_OR_RETURN(*cluster->mutable_kubernetes(), KubernetesSpecOf(args));
  }
  cluster->set_binary(ElasticdlBinary());
  return spec;
}

}  // namespace elasticdl::client

namespace elasticdl::client {

Status CheckPodPaths(const proto::JobSpec& spec) {
  if (spec.cluster().kind() != "kubernetes") return absl::OkStatus();
  const auto& volumes = spec.cluster().kubernetes().volumes();
  auto mounted = [&volumes](const std::string& path) {
    for (const proto::PodVolume& v : volumes) {
      const fs::path relative = fs::path(path).lexically_relative(v.mount_path());
      if (!relative.empty() && *relative.begin() != "..") return true;
    }
    return false;
  };
  std::vector<std::pair<std::string, std::string>> paths = {
      {"--job_dir", spec.job_dir()},
      {"--output", spec.output()},
      {"--checkpoint_dir", spec.ps().checkpoint_dir()},
      {"--checkpoint_dir_for_init", spec.ps().checkpoint_dir_for_init()},
      {"--trained_model", spec.model().trained_model()}};
  for (const std::string& p : spec.tasks().training_data())
    paths.emplace_back("--training_data", p);
  for (const std::string& p : spec.tasks().validation_data()) {
    paths.emplace_back("--validation_data", p);
  }
  for (const std::string& p : spec.tasks().prediction_data()) {
    paths.emplace_back("--prediction_data", p);
  }
  for (const auto& [flag, path] : paths) {
    if (path.empty() || path.find("://") != std::string::npos || mounted(path)) continue;
    return absl::InvalidArgumentError(
        StrCat(flag, "=", path,
               ": the job's pods would not see it: put it under a --volume mount_path (the "
               "pods mount it where this machine sees it)"));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::client
