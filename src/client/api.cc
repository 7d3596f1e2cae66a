// Train, Evaluate and Predict: validate the string parameters, snapshot and
// build the model zoo, check its entries in this process (so that a missing
// entry or a throwing factory is reported before any process starts), write
// the job spec and run the job.
#include "elasticdl/api.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "client/job_runner.h"
#include "cluster/backends.h"
#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/seed.h"
#include "ps/checkpoint.h"
#include "rpc/job_spec.h"
#include "rpc/job_token.h"
#include "rpc/trained_model.h"
#include "zoo/zoo_builder.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"
#include "zoo/zoo_sources.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& value, int64_t min) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0) {
    return absl::InvalidArgumentError(StrCat("--", flag, "=", value, ": expected an integer"));
  }
  if (v < min) {
    return absl::InvalidArgumentError(StrCat("--", flag, "=", value, ": must be at least ", min));
  }
  return v;
}

StatusOr<uint64_t> ParseSeed(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0) {
    return absl::InvalidArgumentError(
        StrCat("--", flag, "=", value, ": expected a non-negative integer below 2^64"));
  }
  return static_cast<uint64_t>(v);
}

StatusOr<bool> ParseBool(const std::string& flag, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  return absl::InvalidArgumentError(StrCat("--", flag, "=", value, ": expected true or false"));
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Status Require(const std::string& value, const char* flag) {
  if (value.empty()) return absl::InvalidArgumentError(StrCat("--", flag, " is required"));
  return absl::OkStatus();
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

StatusOr<std::string> MakeJobDir(const JobArgs& args, const std::string& kind) {
  std::string dir = args.job_dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    auto now = std::chrono::system_clock::now().time_since_epoch();
    dir = StrCat(
        tmp ? tmp : "/tmp", "/elasticdl-jobs/", args.job_name.empty() ? kind : args.job_name, "-",
        std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), "-", ::getpid());
  }
  dir = Absolute(dir);
  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  return dir;
}

// Copies the zoo's sources into the job directory: the job (and the trained
// model) use exactly what was there at submission.
Status SnapshotZoo(const std::string& zoo, const std::string& to) {
  std::error_code ec;
  if (!fs::is_directory(zoo, ec)) {
    return absl::InvalidArgumentError(StrCat("--model_zoo=", zoo, ": not a directory"));
  }
  fs::remove_all(to, ec);
  for (auto it = fs::recursive_directory_iterator(zoo, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::string ext = it->path().extension().string();
    if (ext != ".cc" && ext != ".h" && ext != ".md") continue;
    fs::path rel = fs::relative(it->path(), zoo);
    fs::create_directories((fs::path(to) / rel).parent_path(), ec);
    fs::copy_file(it->path(), fs::path(to) / rel, fs::copy_options::overwrite_existing, ec);
    if (ec) break;
  }
  if (ec) return absl::InternalError(StrCat("copying the model zoo ", zoo, ": ", ec.message()));
  return absl::OkStatus();
}

// Builds and checks the zoo and fills the spec's model fields.
Status PrepareModel(const JobArgs& args, const std::string& zoo_sources, proto::JobSpec* spec) {
  const std::string snapshot = spec->job_dir() + "/" + rpc::kZooDir;
  EDL_RETURN_IF_ERROR(SnapshotZoo(zoo_sources, snapshot));
  ZooBuildOptions build;
  build.zoo_dir = snapshot;
  StatusOr<BuiltZoo> built = BuildZoo(build);
  if (!built.ok()) {
    // Name the user's directory, not the job's copy of it.
    std::string message(built.status().message());
    for (size_t at; (at = message.find(snapshot)) != std::string::npos;) {
      message.replace(at, snapshot.size(), zoo_sources);
    }
    return Status(built.status().code(), message);
  }
  BuiltZoo zoo = std::move(*built);
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library, ZooLibrary::Load(zoo.library_path));
  ZooProgramNames names;
  names.model_def = args.model_def;
  names.dataset_fn = args.dataset_fn;
  names.loss = args.loss;
  names.optimizer = args.optimizer;
  names.eval_metrics_fn = args.eval_metrics_fn;
  EDL_ASSIGN_OR_RETURN(ZooProgram program, ZooProgram::Resolve(library, names, args.params));
  EDL_RETURN_IF_ERROR(program.MakeModel().status());
  EDL_ASSIGN_OR_RETURN(OptimizerSpec optimizer, program.Optimizer());
  if (!spec->mutable_optimizer_config()->ParseFromString(SerializeOptimizer(optimizer))) {
    return absl::InternalError("cannot encode the optimizer");
  }
  spec->set_model_zoo(Absolute(zoo_sources));
  spec->set_zoo_identity(zoo.identity);
  spec->set_zoo_library(zoo.library_path);
  spec->set_model_def(args.model_def);
  spec->set_model_params(args.params);
  spec->set_dataset_fn(args.dataset_fn);
  spec->set_loss(args.loss);
  spec->set_optimizer(args.optimizer);
  spec->set_eval_metrics_fn(args.eval_metrics_fn);
  return absl::OkStatus();
}

// --cluster, --master_addr, --partition, --detach.
Status ClusterOf(const JobArgs& args, proto::ClusterSpec* cluster) {
  const auto& kinds = cluster::ClusterKinds();
  if (std::find(kinds.begin(), kinds.end(), args.cluster) == kinds.end()) {
    return absl::InvalidArgumentError(
        StrCat("--cluster=", args.cluster, ": expected local, slurm or external"));
  }
  cluster->set_kind(args.cluster);
  if (!args.master_addr.empty()) {
    size_t colon = args.master_addr.rfind(':');
    const std::string port = colon == std::string::npos ? "" : args.master_addr.substr(colon + 1);
    if (colon == 0 || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
        port.size() > 5 || std::stoi(port) > 65535) {
      return absl::InvalidArgumentError(StrCat("--master_addr=", args.master_addr,
                                               ": expected HOST:PORT (port 0: any free one)"));
    }
    cluster->set_master_addr(args.master_addr);
  }
  if (!args.partition.empty() && args.cluster != "slurm") {
    return absl::InvalidArgumentError("--partition needs --cluster=slurm");
  }
  if (args.detach && args.cluster != "slurm") {
    return absl::InvalidArgumentError(
        "--detach needs --cluster=slurm (a local job's master runs under its client)");
  }
  cluster->set_partition(args.partition);
  std::error_code ec;
  cluster->set_binary(fs::read_symlink("/proc/self/exe", ec).string());
  return absl::OkStatus();
}

StatusOr<proto::JobSpec> CommonSpec(const JobArgs& args, proto::JobType type) {
  proto::JobSpec spec;
  spec.set_type(type);
  EDL_ASSIGN_OR_RETURN(int64_t minibatch, ParseInt("minibatch_size", args.minibatch_size, 1));
  EDL_ASSIGN_OR_RETURN(int64_t per_task,
                       ParseInt("num_minibatches_per_task", args.num_minibatches_per_task, 1));
  EDL_ASSIGN_OR_RETURN(int64_t epochs, ParseInt("num_epochs", args.num_epochs, 1));
  EDL_ASSIGN_OR_RETURN(int64_t eval_steps, ParseInt("evaluation_steps", args.evaluation_steps, 0));
  EDL_ASSIGN_OR_RETURN(int64_t workers, ParseInt("num_workers", args.num_workers, 1));
  EDL_ASSIGN_OR_RETURN(int64_t ps, ParseInt("num_ps_pods", args.num_ps_pods, 1));
  EDL_ASSIGN_OR_RETURN(bool use_async, ParseBool("use_async", args.use_async));
  int64_t grads_to_wait = 0;  // one gradient of every training worker
  if (!args.grads_to_wait.empty()) {
    EDL_ASSIGN_OR_RETURN(grads_to_wait, ParseInt("grads_to_wait", args.grads_to_wait, 0));
    if (grads_to_wait == 0) {
      // The spelling of asynchronous training before --use_async.
      fmt::print(stderr, "note: --grads_to_wait=0 is read as --use_async=true\n");
      use_async = true;
    } else if (use_async) {
      return absl::InvalidArgumentError(
          StrCat("--grads_to_wait=", args.grads_to_wait,
                 " makes synchronous steps, but --use_async=true: drop one of them"));
    }
  }
  EDL_ASSIGN_OR_RETURN(int64_t tolerance,
                       ParseInt("sync_version_tolerance", args.sync_version_tolerance, 0));
  EDL_ASSIGN_OR_RETURN(int64_t max_staleness, ParseInt("max_staleness", args.max_staleness, -1));
  EDL_ASSIGN_OR_RETURN(int64_t max_nonfinite,
                       ParseInt("max_nonfinite_minibatches", args.max_nonfinite_minibatches, 0));
  EDL_ASSIGN_OR_RETURN(uint64_t job_seed, ParseSeed("seed", args.seed));
  EDL_ASSIGN_OR_RETURN(int64_t threads, ParseInt("num_threads", args.num_threads, 0));
  if (threads == 0) {
    threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / workers);
  }
  EDL_ASSIGN_OR_RETURN(int64_t retries, ParseInt("max_task_retries", args.max_task_retries, 0));
  EDL_ASSIGN_OR_RETURN(int64_t relaunches,
                       ParseInt("max_worker_relaunches", args.max_worker_relaunches, 0));
  uint64_t shuffle_seed = job_seeds::TaskOrder(job_seed);
  if (!args.shuffle_seed.empty()) {
    EDL_ASSIGN_OR_RETURN(shuffle_seed, ParseSeed("shuffle_seed", args.shuffle_seed));
  }
  EDL_ASSIGN_OR_RETURN(int64_t checkpoint_steps,
                       ParseInt("checkpoint_steps", args.checkpoint_steps, 0));
  EDL_ASSIGN_OR_RETURN(int64_t keep_checkpoints,
                       ParseInt("keep_checkpoint_max", args.keep_checkpoint_max, 0));
  EDL_ASSIGN_OR_RETURN(int64_t lease_ms, ParseInt("worker_lease_ms", args.worker_lease_ms, 100));
  EDL_ASSIGN_OR_RETURN(int64_t ps_relaunches,
                       ParseInt("max_ps_relaunches", args.max_ps_relaunches, 0));
  EDL_RETURN_IF_ERROR(ParseInt("max_master_restarts", args.max_master_restarts, 0).status());
  spec.set_checkpoint_steps(checkpoint_steps);
  if (!args.checkpoint_dir.empty()) spec.set_checkpoint_dir(Absolute(args.checkpoint_dir));
  spec.set_keep_checkpoint_max(static_cast<int>(keep_checkpoints));
  if (!args.checkpoint_dir_for_init.empty()) {
    spec.set_checkpoint_dir_for_init(Absolute(args.checkpoint_dir_for_init));
  }
  spec.set_worker_lease_ms(static_cast<int>(std::min<int64_t>(lease_ms, 1 << 30)));
  spec.set_max_ps_relaunches(static_cast<int>(ps_relaunches));
  spec.set_minibatch_size(minibatch);
  spec.set_num_minibatches_per_task(per_task);
  spec.set_num_epochs(epochs);
  spec.set_evaluation_steps(eval_steps);
  spec.set_num_workers(static_cast<int>(workers));
  spec.set_num_ps(static_cast<int>(ps));
  spec.set_use_async(use_async);
  spec.set_grads_to_wait(static_cast<int>(std::min<int64_t>(grads_to_wait, 1 << 30)));
  spec.set_sync_version_tolerance(static_cast<int>(std::min<int64_t>(tolerance, 1 << 30)));
  spec.set_max_staleness(static_cast<int>(std::min<int64_t>(max_staleness, 1 << 30)));
  spec.set_max_nonfinite_minibatches(static_cast<int>(std::min<int64_t>(max_nonfinite, 1 << 30)));
  EDL_ASSIGN_OR_RETURN(bool modulation,
                       ParseBool("lr_staleness_modulation", args.lr_staleness_modulation));
  spec.set_lr_staleness_modulation(modulation);
  spec.set_seed(job_seed);
  spec.set_worker_threads(static_cast<int>(threads));
  spec.set_max_task_retries(static_cast<int>(retries));
  spec.set_max_worker_relaunches(static_cast<int>(relaunches));
  spec.set_shuffle_seed(shuffle_seed);
  EDL_RETURN_IF_ERROR(ClusterOf(args, spec.mutable_cluster()));
  for (const std::string& s : SplitCommas(args.training_data)) spec.add_training_data(Absolute(s));
  for (const std::string& s : SplitCommas(args.validation_data)) {
    spec.add_validation_data(Absolute(s));
  }
  for (const std::string& s : SplitCommas(args.prediction_data)) {
    spec.add_prediction_data(Absolute(s));
  }
  return spec;
}

StatusOr<JobResult> Run(const JobArgs& args, proto::JobSpec spec) {
  auto start = std::chrono::steady_clock::now();
  EDL_RETURN_IF_ERROR(rpc::WriteJobSpec(spec, spec.job_dir()));
  EDL_RETURN_IF_ERROR(rpc::CreateJobToken(spec.job_dir()).status());
  client::RunJobOptions run;
  run.job_dir = spec.job_dir();
  run.progress = args.progress;
  run.cancel = args.cancel;
  EDL_ASSIGN_OR_RETURN(int64_t restarts,
                       ParseInt("max_master_restarts", args.max_master_restarts, 0));
  run.max_master_restarts = static_cast<int>(restarts);
  run.cluster = spec.cluster().kind();
  run.partition = spec.cluster().partition();
  run.detach = args.detach;
  EDL_ASSIGN_OR_RETURN(proto::GetJobStatusResponse status, client::RunJob(run));
  JobResult result;
  if (args.detach) result.detached = status.message();
  result.model_version = status.model_version();
  result.records = status.records_done();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.training_seconds = status.training_seconds();
  result.metrics.insert(status.eval_metrics().begin(), status.eval_metrics().end());
  result.metrics_model_version = status.eval_model_version();
  result.output = spec.output();
  result.job_dir = spec.job_dir();
  result.seed = spec.seed();
  return result;
}

// The sources' identity of the zoo directory `zoo` (--model_zoo).
StatusOr<std::string> ZooIdentity(const std::string& zoo) {
  StatusOr<ZooSources> sources = ScanZooSources(zoo);
  if (!sources.ok()) return Annotate(sources.status(), StrCat("--model_zoo=", zoo));
  return sources->identity;
}

// An evaluation or prediction job's model from a trained-model directory:
// its record, and the zoo sources to build (its own copy, or --model_zoo
// for one that has none). --model_def and --model_zoo, when given, must be
// what the model was trained with.
StatusOr<std::string> ModelFromTrainedModel(const JobArgs& args, proto::TrainedModel* record) {
  EDL_ASSIGN_OR_RETURN(*record, rpc::ReadTrainedModelRecord(args.trained_model));
  if (!args.model_def.empty() && args.model_def != record->model_def()) {
    return absl::InvalidArgumentError(
        StrCat("--model_def=", args.model_def, " disagrees with the trained model in ",
               args.trained_model, ", a ", record->model_def(),
               ": drop --model_def, or name the trained model of ", args.model_def));
  }
  std::string zoo = args.trained_model + "/" + rpc::kZooDir;
  std::error_code ec;
  const bool has_zoo = fs::is_directory(zoo, ec);
  if (args.model_zoo.empty()) {
    if (has_zoo) return zoo;
    return absl::InvalidArgumentError(
        StrCat(args.trained_model, " holds no model zoo (", rpc::kZooDir,
               "/): pass --model_zoo with the sources it was trained with"));
  }
  EDL_ASSIGN_OR_RETURN(std::string identity, ZooIdentity(args.model_zoo));
  if (!record->zoo_identity().empty() && identity != record->zoo_identity()) {
    return absl::InvalidArgumentError(StrCat(
        "--model_zoo=", args.model_zoo, " holds other sources (", identity, ") than the model in ",
        args.trained_model, " was trained with (", record->zoo_identity(), ")"));
  }
  return has_zoo ? zoo : args.model_zoo;
}

// The original's way: --model_zoo and --model_def, the parameters of the
// newest complete checkpoint in --checkpoint_dir_for_init (any number of
// shards), written as a trained-model directory under `dir`.
StatusOr<std::string> ModelFromCheckpoint(const JobArgs& args, const std::string& dir,
                                          proto::TrainedModel* record) {
  EDL_RETURN_IF_ERROR(Require(args.model_zoo, "model_zoo"));
  EDL_RETURN_IF_ERROR(Require(args.model_def, "model_def"));
  EDL_ASSIGN_OR_RETURN(std::vector<proto::ShardCheckpoint> shards,
                       ps::ReadNewestCompleteCheckpoint(args.checkpoint_dir_for_init));
  proto::ModelValues values;
  values.set_version(shards[0].version());
  for (const proto::ShardCheckpoint& shard : shards) {
    for (const proto::ParameterState& p : shard.parameters()) *values.add_parameters() = p.value();
    for (const proto::Tensor& b : shard.buffers()) *values.add_buffers() = b;
  }
  EDL_ASSIGN_OR_RETURN(std::string identity, ZooIdentity(args.model_zoo));
  record->set_zoo_identity(identity);
  record->set_model_zoo(Absolute(args.model_zoo));
  record->set_model_def(args.model_def);
  record->set_model_def_params(args.params);
  record->set_params_filename(rpc::kParametersFile);
  record->set_input_function(args.dataset_fn);
  record->set_loss(args.loss);
  record->set_optimizer(args.optimizer);
  record->set_eval_metrics_fn(args.eval_metrics_fn);
  record->set_model_version(values.version());
  EDL_RETURN_IF_ERROR(rpc::WriteTrainedModel(dir, *record, values));
  return args.model_zoo;
}

// Evaluate and Predict: the model comes from a trained-model directory or
// from a zoo and a checkpoint directory.
StatusOr<proto::JobSpec> SpecForInference(const JobArgs& args, proto::JobType type) {
  if (args.trained_model.empty() == args.checkpoint_dir_for_init.empty()) {
    return absl::InvalidArgumentError(
        "name the model's parameters once: --trained_model=DIR (written by train --output), or "
        "--checkpoint_dir_for_init=DIR (a training job's checkpoints) with --model_zoo and "
        "--model_def");
  }
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, CommonSpec(args, type));
  EDL_ASSIGN_OR_RETURN(std::string job_dir,
                       MakeJobDir(args, type == proto::JOB_EVALUATION ? "evaluate" : "predict"));
  spec.set_job_dir(job_dir);
  spec.set_job_name(args.job_name.empty() ? fs::path(job_dir).filename().string() : args.job_name);
  // The checkpoint path gives the workers no checkpoint to read: its
  // parameters become a trained model in the job directory.
  spec.clear_checkpoint_dir_for_init();
  proto::TrainedModel record;
  std::string zoo;
  if (!args.trained_model.empty()) {
    EDL_ASSIGN_OR_RETURN(zoo, ModelFromTrainedModel(args, &record));
    spec.set_trained_model(Absolute(args.trained_model));
  } else {
    spec.set_trained_model(job_dir + "/model");
    EDL_ASSIGN_OR_RETURN(zoo, ModelFromCheckpoint(args, spec.trained_model(), &record));
  }
  JobArgs model_args = args;
  model_args.model_def = record.model_def();
  model_args.params = record.model_def_params();
  model_args.dataset_fn = record.input_function();
  model_args.loss = record.loss();
  model_args.optimizer = record.optimizer();
  model_args.eval_metrics_fn = record.eval_metrics_fn();
  EDL_RETURN_IF_ERROR(PrepareModel(model_args, zoo, &spec));
  if (spec.zoo_identity() != record.zoo_identity()) {
    // The same sources built against another ElasticDL: fine, but say so.
    fmt::print(stderr, "note: model zoo rebuilt for this ElasticDL ({} -> {})\n",
               record.zoo_identity(), spec.zoo_identity());
  }
  return spec;
}

}  // namespace

StatusOr<JobResult> Train(const JobArgs& args) {
  EDL_RETURN_IF_ERROR(Require(args.model_zoo, "model_zoo"));
  EDL_RETURN_IF_ERROR(Require(args.model_def, "model_def"));
  EDL_RETURN_IF_ERROR(Require(args.training_data, "training_data"));
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, CommonSpec(args, proto::JOB_TRAINING));
  EDL_ASSIGN_OR_RETURN(std::string job_dir, MakeJobDir(args, "train"));
  spec.set_job_dir(job_dir);
  spec.set_job_name(args.job_name.empty() ? fs::path(job_dir).filename().string() : args.job_name);
  if (!args.output.empty()) spec.set_output(Absolute(args.output));
  EDL_RETURN_IF_ERROR(PrepareModel(args, args.model_zoo, &spec));
  return Run(args, std::move(spec));
}

StatusOr<JobResult> Evaluate(const JobArgs& args) {
  EDL_RETURN_IF_ERROR(Require(args.validation_data, "validation_data"));
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, SpecForInference(args, proto::JOB_EVALUATION));
  return Run(args, std::move(spec));
}

StatusOr<JobResult> Predict(const JobArgs& args) {
  EDL_RETURN_IF_ERROR(Require(args.prediction_data, "prediction_data"));
  EDL_RETURN_IF_ERROR(Require(args.output, "output"));
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, SpecForInference(args, proto::JOB_PREDICTION));
  spec.set_output(Absolute(args.output));
  return Run(args, std::move(spec));
}

}  // namespace elasticdl
