// Train, Evaluate and Predict: check the settings (client/job_settings.h),
// snapshot and build the model zoo, check its entries in this process (so
// that a missing entry or a throwing factory is reported before any process
// starts), write the job spec and run the job.
#include "elasticdl/api.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <variant>

#include "absl/strings/str_join.h"
#include "client/job_control.h"
#include "client/job_inputs.h"
#include "client/job_runner.h"
#include "client/job_settings.h"
#include "client/stop_settings.h"
#include "client/zoo_source.h"
#include "cluster/kubernetes/pod_manifests.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/zoo/params.h"
#include "job/job_spec.h"
#include "job/trained_model.h"
#include "master/journal.h"
#include "ps/checkpoint.h"
#include "ps/parameter_store.h"
#include "python/python_zoo.h"
#include "rpc/job_credentials.h"
#include "rpc/tensor_codec.h"
#include "zoo/embedding_spec.h"
#include "zoo/lr_schedule_config.h"
#include "zoo/zoo_builder.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"
#include "zoo/zoo_sources.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

// The job's directory: this user's alone (it holds the job's credentials). One
// the system names is new; one the user names may exist, if it is theirs. A
// job that did not end there (failed, stopped, its master lost) is resumed
// from its journal by the same command; one that completed is not redone: a
// master would take up its journal and checkpoints under the new spec.
struct JobDir {
  std::string path;
  bool resumes = false;  // it holds the journal of a job that did not end
};
StatusOr<JobDir> MakeJobDir(const JobArgs& args, const std::string& kind) {
  if (!args.job_dir.empty()) {
    const std::string dir = AbsolutePath(args.job_dir);
    EDL_RETURN_IF_ERROR(Annotate(CreatePrivateDirectory(dir, /*exclusive=*/false), "--job_dir"));
    StatusOr<proto::GetJobStatusResponse> ended = client::ReadFinalStatus(dir);
    if (ended.ok() && ended->finished() && !ended->failed() && !ended->cancelled()) {
      return absl::FailedPreconditionError(
          StrCat("--job_dir=", args.job_dir,
                 ": a job completed in this directory; a new job needs a directory of its own: "
                 "name another, or remove this one (`elasticdl job status ",
                 dir, "` shows that job)"));
    }
    // A task that failed its every attempt failed the job for good: the
    // journal keeps the failure, and a master taking it up would end there.
    StatusOr<std::optional<proto::MasterJournal>> journal = master::ReadJournal(dir);
    if (journal.ok() && journal->has_value() && !(*journal)->ledger().failure().empty()) {
      // Where it checkpointed, if it did.
      StatusOr<proto::JobSpec> failed = ReadJobSpec(dir);
      const std::string checkpoints = failed.ok() && !failed->ps().checkpoint_dir().empty()
                                          ? failed->ps().checkpoint_dir()
                                          : CheckpointsDir(dir);
      const bool restartable = ps::FindNewestCompleteCheckpoint(checkpoints).ok();
      return absl::FailedPreconditionError(
          StrCat("--job_dir=", args.job_dir, ": the job in this directory failed (",
                 (*journal)->ledger().failure(),
                 "); a failed task is not tried again, so it cannot be resumed: name a new "
                 "--job_dir",
                 restartable ? StrCat(" (with --checkpoint_dir_for_init=", checkpoints,
                                      " to start from its newest checkpoint)")
                             : ""));
    }
    return JobDir{dir, journal.ok() && journal->has_value()};
  }
  const std::string root = DefaultJobsRoot(ReadEnvironment());
  EDL_RETURN_IF_ERROR(CreatePrivateDirectory(root, /*exclusive=*/false));
  auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string dir =
      StrCat(root, "/", args.job_name.empty() ? kind : args.job_name, "-",
             std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), "-", ::getpid());
  EDL_RETURN_IF_ERROR(CreatePrivateDirectory(dir, /*exclusive=*/true));
  return JobDir{dir};
}

// The learning-rate schedule: --lr_schedule, else the zoo's entry, else none.
Status PrepareSchedule(const JobArgs& args, const ZooProgram& program,
                       const OptimizerSpec& optimizer, proto::ModelSpec* model) {
  model->set_learning_rate_schedule(program.resolved().learning_rate_schedule);
  std::optional<LearningRateSchedule> schedule;
  std::string from;
  if (!args.lr_schedule.empty()) {
    from = StrCat("--lr_schedule=", args.lr_schedule);
    StatusOr<LearningRateSchedule> parsed = LearningRateSchedule::Parse(args.lr_schedule);
    if (!parsed.ok()) return Annotate(parsed.status(), from);
    schedule = *parsed;
  } else {
    from = program.EntryLocation(EntryKind::kLearningRateSchedule);
    EDL_ASSIGN_OR_RETURN(schedule, program.LearningRateScheduleOf());
  }
  if (!schedule || schedule->is_constant()) return absl::OkStatus();
  const double base_lr =
      std::visit([](const auto& o) { return static_cast<double>(o.lr()); }, optimizer);
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(schedule->ValidateFor(base_lr), from);
  *model->mutable_optimizer_config()->mutable_lr_schedule() = LrScheduleToProto(*schedule);
  model->set_lr_schedule_description(schedule->Describe());
  return absl::OkStatus();
}

// A trial's EarlyStopping and MaxStepsStopping callbacks (seed 004) set
// what --early_stopping and --max_steps set, unless those are given. (Its
// LearningRateScheduler is the program's schedule: PrepareSchedule.)
Status ApplyTrialCallbacks(const JobArgs& args, const ZooProgram& program, proto::TaskSpec* tasks) {
  const TrialCallbacks& callbacks = program.trial_callbacks();
  client::DeclaredStopping declared;
  if (callbacks.early_stopping) {
    const EarlyStopping& e = *callbacks.early_stopping;
    proto::EarlyStopping& spec = declared.early_stopping.emplace();
    spec.set_metric(e.metric);
    spec.set_maximize(e.mode == EarlyStopping::kMax);
    spec.set_patience(e.patience);
    spec.set_min_delta(e.min_delta);
  }
  declared.max_steps = callbacks.max_steps;
  return client::ApplyDeclaredStopping(
      args, declared, program.EntryLocation(EntryKind::kLearningRateSchedule), tasks);
}

// The model's tensors as its processes will send them, checked before any of
// them starts: of a type the protocol carries, and on parameter servers
// parameters they can train (ps::CheckTrainable, as the servers check).
Status CheckTensorTypes(const Model& model, const std::string& model_def, bool servers) {
  const std::string context = StrCat("--model_def=", model_def);
  auto sendable = [&](const char* kind, const std::string& name, const torch::Tensor& t) {
    proto::Tensor described;
    if (rpc::DescribeTensor(name, t.contiguous(), &described).ok()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        StrCat(context, ": ", kind, " '", name, "' is ", c10::toString(t.scalar_type()),
               ", which no process can send (bool, integers, float16, bfloat16, float32 and "
               "float64 can be sent)"));
  };
  for (const auto& item : model.named_parameters()) {
    EDL_RETURN_IF_ERROR(sendable("parameter", item.key(), item.value()));
    if (servers && item.value().requires_grad()) {
      EDL_RETURN_IF_ERROR(Annotate(ps::CheckTrainable(item.key(), item.value()), context));
    }
  }
  for (const auto& item : model.named_buffers()) {
    EDL_RETURN_IF_ERROR(sendable("buffer", item.key(), item.value()));
  }
  return absl::OkStatus();
}

// A job that evaluates calls eval_metrics_fn now, so that what it returns
// is checked before any process starts rather than at the end of the first
// evaluation's tasks; --early_stopping watches a metric it makes.
Status CheckMetrics(const ZooProgram& program, const proto::TaskSpec& tasks) {
  if (tasks.validation_data().empty() && !tasks.has_early_stopping()) return absl::OkStatus();
  EDL_ASSIGN_OR_RETURN(auto metrics, program.MakeMetrics());
  if (!tasks.has_early_stopping()) return absl::OkStatus();
  const std::string& metric = tasks.early_stopping().metric();
  if (metrics.count(metric) != 0) return absl::OkStatus();
  std::vector<std::string> names;
  for (const auto& [name, m] : metrics) names.push_back(name);
  return absl::InvalidArgumentError(StrCat("--early_stopping: metric '", metric, "' is not one of ",
                                           program.EntryLocation(EntryKind::kEvalMetricsFn),
                                           "'s metrics (",
                                           fmt::format("{}", fmt::join(names, ", ")), ")"));
}

// Values a job loads into its model: a checkpoint's or a trained model's,
// and the flag and path they come from, e.g.
// "--checkpoint_dir_for_init=DIR: version 30".
struct InitialValues {
  std::string source;
  proto::ModelValues values;
};

// The parameters of the newest complete checkpoint in
// --checkpoint_dir_for_init.
StatusOr<InitialValues> CheckpointValues(const std::string& dir) {
  StatusOr<proto::ModelValues> values = ps::ReadNewestCompleteModelValues(dir);
  if (!values.ok()) return Annotate(values.status(), StrCat("--checkpoint_dir_for_init=", dir));
  InitialValues initial;
  initial.values = *std::move(values);
  initial.source =
      StrCat("--checkpoint_dir_for_init=", dir, ": checkpoint version ", initial.values.version());
  return initial;
}

// Builds and checks the zoo and fills the spec's model fields; with
// `initial`, checks that its values fit the model the zoo builds.
Status PrepareModel(const JobArgs& args, const std::string& zoo_sources, proto::JobSpec* spec,
                    const InitialValues* initial = nullptr) {
  const std::string snapshot = spec->job_dir() + "/" + kZooDir;
  EDL_RETURN_IF_ERROR(client::SnapshotZoo(zoo_sources, snapshot));
  ZooProgramNames names;
  names.model_def = args.model_def;
  names.dataset_fn = args.dataset_fn;
  names.loss = args.loss;
  names.optimizer = args.optimizer;
  names.eval_metrics_fn = args.eval_metrics_fn;
  names.learning_rate_schedule = args.learning_rate_schedule;
  ZooBuildOptions build;
  build.zoo_dir = snapshot;
  build.cache_dir = ReadEnvironment().cache_dir;
  // The job's files, not the whole zoo; but a Kubernetes job's pods load
  // the library `zoo build` put in the zoo's image: the whole zoo's.
  if (spec->cluster().kind() != "kubernetes") build.modules = names.Modules();
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
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library,
                       python::OpenZoo(zoo.library_path, zoo.python_dir, zoo.left_out));
  EDL_ASSIGN_OR_RETURN(ZooProgram program, ZooProgram::Resolve(library, names, args.params));
  if (spec->type() == proto::JOB_TRAINING) {
    EDL_RETURN_IF_ERROR(ApplyTrialCallbacks(args, program, spec->mutable_tasks()));
  }
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<Model> built_model, program.MakeModel());
  if (initial != nullptr) {
    if (Status fits = rpc::CheckModelValues(*built_model, initial->values); !fits.ok()) {
      return absl::InvalidArgumentError(StrCat(initial->source, " does not fit the model of ",
                                               args.model_def, ": ", fits.message()));
    }
  }
  if (spec->strategy() != proto::PARAMETER_SERVER_STRATEGY) {
    EDL_RETURN_IF_ERROR(CheckDenseModel(*built_model, args.distribution_strategy));
  }
  EDL_RETURN_IF_ERROR(CheckTensorTypes(*built_model, args.model_def,
                                       spec->strategy() == proto::PARAMETER_SERVER_STRATEGY));
  EDL_ASSIGN_OR_RETURN(OptimizerSpec optimizer, program.Optimizer());
  if (!spec->mutable_model()->mutable_optimizer_config()->ParseFromString(
          SerializeOptimizer(optimizer))) {
    return absl::InternalError("cannot encode the optimizer");
  }
  EDL_RETURN_IF_ERROR(PrepareSchedule(args, program, optimizer, spec->mutable_model()));
  EDL_RETURN_IF_ERROR(CheckMetrics(program, spec->tasks()));
  proto::ModelSpec* model = spec->mutable_model();
  model->set_model_zoo(AbsolutePath(zoo_sources));
  model->set_zoo_identity(zoo.identity);
  model->set_zoo_library(zoo.library_path);
  model->set_zoo_python_dir(zoo.python_dir);
  model->set_model_def(args.model_def);
  model->set_params(args.params);
  // The entries in use, defaults resolved: what the trained model records.
  const ZooProgramNames& used = program.resolved();
  model->set_dataset_fn(used.dataset_fn);
  model->set_loss(used.loss);
  model->set_optimizer(used.optimizer);
  model->set_eval_metrics_fn(used.eval_metrics_fn);
  return absl::OkStatus();
}

// Runs the job written in `job_dir` as `args` say.
StatusOr<JobResult> RunWritten(const JobArgs& args, const std::string& job_dir) {
  if (!args.yaml.empty()) {
    EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(job_dir));
    EDL_ASSIGN_OR_RETURN(
        std::string manifests,
        cluster::MasterManifestsYaml(spec.cluster().kubernetes(), spec.job_name(), job_dir));
    EDL_RETURN_IF_ERROR(WriteFileAtomically(AbsolutePath(args.yaml), manifests));
    JobResult result;
    result.detached =
        StrCat("nothing submitted; the master's pod and service are in ", args.yaml,
               ": `kubectl apply -f ", args.yaml, "` starts the job (job directory ", job_dir, ")");
    return result;
  }
  client::RunJobOptions run;
  run.job_dir = job_dir;
  run.progress = args.progress;
  run.cancel = args.cancel;
  run.detach = args.detach;
  run.log_file = args.log_file;
  return client::RunJobToResult(run);
}

StatusOr<JobResult> Run(const JobArgs& args, const proto::JobSpec& spec) {
  EDL_RETURN_IF_ERROR(WriteJobSpec(spec, spec.job_dir()));
  EDL_RETURN_IF_ERROR(
      rpc::CreateJobCredentials(spec.job_dir(), !args.insecure_transport, args.local_sockets)
          .status());
  return RunWritten(args, spec.job_dir());
}

// The sources' identity of the zoo directory `zoo` (--model_zoo).
StatusOr<std::string> ZooIdentity(const std::string& zoo) {
  StatusOr<ZooSources> sources = ScanZooSources(zoo);
  if (!sources.ok()) return Annotate(sources.status(), StrCat("--model_zoo=", zoo));
  return sources->identity;
}

// An evaluation or prediction job's model from a trained-model directory:
// its record, and the zoo sources to build (its own copy, or --model_zoo
// for one that has none). --model_def, --params and --model_zoo, when given,
// must be what the model was trained with: they make the model the values
// fit.
StatusOr<std::string> ModelFromTrainedModel(const JobArgs& args, proto::TrainedModel* record) {
  EDL_ASSIGN_OR_RETURN(*record, ReadTrainedModelRecord(args.trained_model));
  if (!args.model_def.empty() && args.model_def != record->model_def()) {
    return absl::InvalidArgumentError(
        StrCat("--model_def=", args.model_def, " disagrees with the trained model in ",
               args.trained_model, ", a ", record->model_def(),
               ": drop --model_def, or name the trained model of ", args.model_def));
  }
  if (!args.params.empty()) {
    StatusOr<Params> given = Params::Parse(args.params);
    if (!given.ok()) return Annotate(given.status(), StrCat("--params=", args.params));
    StatusOr<Params> trained = Params::Parse(record->model_def_params());
    if (!trained.ok() || !(*given == *trained)) {
      return absl::InvalidArgumentError(
          StrCat("--params=", args.params, " disagrees with the trained model in ",
                 args.trained_model, ", trained with --params=\"", record->model_def_params(),
                 "\": drop --params (the trained model's are used)"));
    }
  }
  std::string zoo = args.trained_model + "/" + kZooDir;
  std::error_code ec;
  const bool has_zoo = fs::is_directory(zoo, ec);
  if (args.model_zoo.empty()) {
    if (!record->zoo_commit().empty()) {
      return client::TrainedZooSources(*record, has_zoo ? zoo : "");
    }
    if (has_zoo) return zoo;
    return absl::InvalidArgumentError(
        StrCat(args.trained_model, " holds no model zoo (", kZooDir,
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
StatusOr<std::string> ModelFromCheckpoint(const JobArgs& args, const client::ZooSource& source,
                                          const std::string& dir, proto::TrainedModel* record,
                                          InitialValues* initial) {
  EDL_ASSIGN_OR_RETURN(*initial, CheckpointValues(args.checkpoint_dir_for_init));
  const proto::ModelValues& values = initial->values;
  EDL_ASSIGN_OR_RETURN(std::string identity, ZooIdentity(args.model_zoo));
  record->set_zoo_identity(identity);
  client::RecordZooSource(source, record);
  record->set_model_def(args.model_def);
  record->set_model_def_params(args.params);
  record->set_params_filename(kParametersFile);
  record->set_input_function(args.dataset_fn);
  record->set_loss(args.loss);
  record->set_optimizer(args.optimizer);
  record->set_eval_metrics_fn(args.eval_metrics_fn);
  record->set_model_version(values.version());
  EDL_RETURN_IF_ERROR(WriteTrainedModel(dir, *record, values));
  return args.model_zoo;
}

// Whether the newest complete checkpoint in `dir` holds embedding tables.
bool HasTables(const std::string& dir) {
  StatusOr<ps::CompleteCheckpoint> found = ps::FindNewestCompleteCheckpoint(dir);
  if (!found.ok()) return false;
  StatusOr<proto::ShardCheckpoint> first =
      ps::ReadCheckpoint(ps::CheckpointPath(dir, found->version, 0, found->num_ps));
  return first.ok() && first->embedding_tables_size() > 0;
}

// Evaluate and Predict: the model comes from a trained-model directory or
// from a zoo and a checkpoint directory.
StatusOr<proto::JobSpec> SpecForInference(const JobArgs& args, client::JobCommand command) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, client::JobSpecOf(args, command));
  EDL_RETURN_IF_ERROR(client::CheckJobInputs(spec));
  EDL_ASSIGN_OR_RETURN(
      JobDir made,
      MakeJobDir(args, command == client::JobCommand::kEvaluate ? "evaluate" : "predict"));
  const std::string& job_dir = made.path;
  spec.set_job_dir(job_dir);
  spec.set_job_name(args.job_name.empty() ? fs::path(job_dir).filename().string() : args.job_name);
  // The checkpoint path gives the workers no checkpoint to read: its
  // parameters become a trained model in the job directory.
  proto::TrainedModel record;
  std::string zoo;
  std::string trained_model;
  // A Git --model_zoo stands for its fetched sources from here on.
  client::ZooSource source;
  JobArgs fetched = args;
  if (!args.model_zoo.empty()) {
    EDL_ASSIGN_OR_RETURN(source, client::ResolveZooSource(args.model_zoo));
    fetched.model_zoo = source.dir;
  }
  InitialValues initial;
  if (!args.trained_model.empty()) {
    EDL_ASSIGN_OR_RETURN(zoo, ModelFromTrainedModel(fetched, &record));
    trained_model = AbsolutePath(args.trained_model);
    StatusOr<proto::ModelValues> values = ReadModelValues(trained_model);
    if (!values.ok())
      return Annotate(values.status(), StrCat("--trained_model=", args.trained_model));
    initial.values = *std::move(values);
    initial.source = StrCat("--trained_model=", args.trained_model);
  } else {
    trained_model = job_dir + "/model";
    EDL_ASSIGN_OR_RETURN(zoo,
                         ModelFromCheckpoint(fetched, source, trained_model, &record, &initial));
  }
  // The model as it was trained; the entries that read its data and measure
  // it are the trained model's unless named (other entries of its zoo, e.g.
  // other metrics).
  JobArgs model_args = args;
  model_args.model_def = record.model_def();
  model_args.params = record.model_def_params();
  auto named_or = [](const std::string& flag, const std::string& recorded) {
    return flag.empty() ? recorded : flag;
  };
  model_args.dataset_fn = named_or(args.dataset_fn, record.input_function());
  model_args.loss = named_or(args.loss, record.loss());
  model_args.optimizer = record.optimizer();  // steps nothing here
  model_args.eval_metrics_fn = named_or(args.eval_metrics_fn, record.eval_metrics_fn());
  EDL_RETURN_IF_ERROR(PrepareModel(model_args, zoo, &spec, &initial));
  spec.mutable_model()->set_trained_model(trained_model);
  if (!record.zoo_commit().empty()) {
    spec.mutable_model()->set_model_zoo(record.model_zoo());
    spec.mutable_model()->set_zoo_commit(record.zoo_commit());
  }
  // Embedding tables stay on parameter servers: as many as wrote them,
  // initialized from what they wrote.
  const std::string tables = args.trained_model.empty() ? args.checkpoint_dir_for_init
                                                        : trained_model + "/" + kEmbeddingsDir;
  if (record.has_embedding_tables() || (args.trained_model.empty() && HasTables(tables))) {
    EDL_ASSIGN_OR_RETURN(ps::CompleteCheckpoint found, ps::FindNewestCompleteCheckpoint(tables));
    spec.mutable_ps()->set_num_ps(found.num_ps);
    spec.mutable_ps()->set_checkpoint_dir_for_init(AbsolutePath(tables));
  }
  if (spec.model().zoo_identity() != record.zoo_identity()) {
    // The same sources built against another ElasticDL: fine, but say so.
    fmt::print(stderr, "note: model zoo rebuilt for this ElasticDL ({} -> {})\n",
               record.zoo_identity(), spec.model().zoo_identity());
  }
  proto::KubernetesSpec* k8s = spec.mutable_cluster()->mutable_kubernetes();
  if (spec.cluster().kind() == "kubernetes" && k8s->image().empty()) {
    // Seed 003: the image the model was trained with holds its zoo.
    if (record.image().empty()) {
      return absl::InvalidArgumentError(
          "--image_name is required: the trained model records no image (it was not trained "
          "on Kubernetes)");
    }
    k8s->set_image(record.image());
  }
  EDL_RETURN_IF_ERROR(client::CheckPodPaths(spec));
  if (command == client::JobCommand::kPredict && !spec.output().empty()) {
    // Where the predictions go, made once the job is known to start rather
    // than found missing after every record is predicted.
    const std::string dir = HasSuffix(spec.output(), ".csv")
                                ? fs::path(spec.output()).parent_path().string()
                                : spec.output();
    if (!dir.empty()) {
      EDL_RETURN_IF_ERROR(Annotate(CreateDirectories(dir), StrCat("--output=", args.output)));
    }
  }
  return spec;
}

// A job resumed from its journal goes on as it began: the journal's tasks
// are ranges of its data at its task size, its checkpoints its model's. A
// command whose settings differ from those is refused, naming them, before
// anything in the job directory changes.
Status CheckResumedSettings(const proto::JobSpec& spec, const JobArgs& args) {
  StatusOr<proto::JobSpec> before = ReadJobSpec(spec.job_dir());
  if (!before.ok()) return absl::OkStatus();
  std::vector<std::string> differ;
  auto compare = [&](const char* flag, const std::string& then, const std::string& now) {
    if (then != now)
      differ.push_back(StrCat(flag, " ", then.empty() ? "unset" : then, " then, ",
                              now.empty() ? "unset" : now, " now"));
  };
  // Paths as written, but for a trailing separator.
  auto paths = [](const google::protobuf::RepeatedPtrField<std::string>& specs) {
    std::vector<std::string> out;
    for (std::string s : specs) {
      while (s.size() > 1 && s.back() == '/') s.pop_back();
      out.push_back(std::move(s));
    }
    return absl::StrJoin(out, ",");
  };
  const proto::TaskSpec& a = before->tasks();
  const proto::TaskSpec& b = spec.tasks();
  compare("--model_def", before->model().model_def(), args.model_def);
  compare("--params", before->model().params(), args.params);
  compare("--training_data", paths(a.training_data()), paths(b.training_data()));
  compare("--minibatch_size", StrCat(a.minibatch_size()), StrCat(b.minibatch_size()));
  compare("--num_minibatches_per_task", StrCat(a.num_minibatches_per_task()),
          StrCat(b.num_minibatches_per_task()));
  compare("--num_epochs", StrCat(a.num_epochs()), StrCat(b.num_epochs()));
  compare("--distribution_strategy", proto::DistributionStrategy_Name(before->strategy()),
          proto::DistributionStrategy_Name(spec.strategy()));
  compare("--seed", StrCat(before->seed()), StrCat(spec.seed()));
  compare("--num_ps_pods", StrCat(before->ps().num_ps()), StrCat(spec.ps().num_ps()));
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat("--job_dir=", args.job_dir,
             " holds a job that did not end, which this command would "
             "resume, but with other settings (",
             absl::StrJoin(differ, "; "), "): resume it with its own, or name a new --job_dir"));
}

}  // namespace

namespace client {

StatusOr<proto::JobSpec> PrepareTraining(const JobArgs& args) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, JobSpecOf(args, JobCommand::kTrain));
  EDL_RETURN_IF_ERROR(CheckJobInputs(spec));
  EDL_ASSIGN_OR_RETURN(JobDir made, MakeJobDir(args, "train"));
  const std::string& job_dir = made.path;
  spec.set_job_dir(job_dir);
  spec.set_job_name(args.job_name.empty() ? fs::path(job_dir).filename().string() : args.job_name);
  EDL_RETURN_IF_ERROR(client::CheckPodPaths(spec));
  const bool resuming = made.resumes;
  if (resuming) EDL_RETURN_IF_ERROR(CheckResumedSettings(spec, args));
  EDL_ASSIGN_OR_RETURN(ZooSource zoo, ResolveZooSource(args.model_zoo));
  // A checkpoint to start from is read now: a missing or damaged one, or one
  // of another model, stops the job before any process starts. A resumed
  // job goes on from its own checkpoints.
  std::optional<InitialValues> initial;
  if (!args.checkpoint_dir_for_init.empty() && !resuming) {
    EDL_ASSIGN_OR_RETURN(initial, CheckpointValues(args.checkpoint_dir_for_init));
  }
  EDL_RETURN_IF_ERROR(PrepareModel(args, zoo.dir, &spec, initial ? &*initial : nullptr));
  RecordZooSource(zoo, spec.mutable_model());
  if (!spec.output().empty()) {
    // Refused now rather than after training: the model replaces the whole directory.
    EDL_RETURN_IF_ERROR(Annotate(CheckTrainedModelReplaceable(spec.output()), "--output"));
  }
  EDL_RETURN_IF_ERROR(WriteJobSpec(spec, spec.job_dir()));
  EDL_RETURN_IF_ERROR(
      rpc::CreateJobCredentials(spec.job_dir(), !args.insecure_transport, args.local_sockets)
          .status());
  return spec;
}

}  // namespace client

StatusOr<JobResult> Train(const JobArgs& args) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, client::PrepareTraining(args));
  return RunWritten(args, spec.job_dir());
}

StatusOr<JobResult> Evaluate(const JobArgs& args) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, SpecForInference(args, client::JobCommand::kEvaluate));
  return Run(args, spec);
}

StatusOr<JobResult> Predict(const JobArgs& args) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, SpecForInference(args, client::JobCommand::kPredict));
  return Run(args, spec);
}

}  // namespace elasticdl
