#include "cli/job_commands.h"

#include <fmt/format.h>

#include <atomic>
#include <memory>

#include "client/job_control.h"
#include "cluster/signals.h"
#include "elasticdl/api.h"

namespace elasticdl::cli {
namespace {

enum class Command { kTrain, kEvaluate, kPredict };

// `train` requires the model; evaluate and predict take it from the trained
// model unless the original's --checkpoint_dir_for_init names parameters.
void AddModelFlags(CLI::App* cmd, JobArgs* a, bool required) {
  cmd->add_option("--model_zoo", a->model_zoo, "Directory of the model zoo's C++ sources")
      ->required(required);
  cmd->add_option("--model_def", a->model_def,
                  "The model entry, e.g. mnist.mnist_functional_api.custom_model")
      ->required(required);
  cmd->add_option("--dataset_fn,--input_fn", a->dataset_fn, "dataset_fn entry")
      ->capture_default_str();
  cmd->add_option("--loss", a->loss, "Loss entry")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "Optimizer entry")->capture_default_str();
  cmd->add_option("--eval_metrics_fn", a->eval_metrics_fn, "Evaluation metrics entry")
      ->capture_default_str();
  cmd->add_option("--params", a->params,
                  "Model parameters, e.g. \"hidden_units=[10, 100, 20, 5], learning_rate=0.01\"");
}

// evaluate, predict: the model from a trained-model directory, or from a zoo
// and the checkpoints of a training job.
void AddInferenceModelFlags(CLI::App* cmd, JobArgs* a) {
  cmd->add_option("--trained_model", a->trained_model, "Directory written by train --output");
  AddModelFlags(cmd, a, /*required=*/false);
  cmd->add_option("--checkpoint_dir_for_init", a->checkpoint_dir_for_init,
                  "With --model_zoo and --model_def: the parameters of the newest checkpoint in "
                  "this directory");
}

void AddRunFlags(CLI::App* cmd, JobArgs* a) {
  cmd->add_option("--minibatch_size", a->minibatch_size, "Records per minibatch")
      ->capture_default_str();
  cmd->add_option("--num_minibatches_per_task", a->num_minibatches_per_task, "Minibatches per task")
      ->capture_default_str();
  cmd->add_option("--num_workers", a->num_workers, "Worker processes")->capture_default_str();
  cmd->add_option("--num_threads", a->num_threads,
                  "LibTorch threads per worker (0: the cores divided among the workers)")
      ->capture_default_str();
  cmd->add_option("--max_task_retries", a->max_task_retries,
                  "Failures a task may have before the job fails")
      ->capture_default_str();
  cmd->add_option("--max_worker_relaunches", a->max_worker_relaunches,
                  "Crashed workers relaunched before the job gives up")
      ->capture_default_str();
  cmd->add_option("--worker_lease_ms", a->worker_lease_ms,
                  "A worker not heard from for this long is taken as lost")
      ->capture_default_str();
  cmd->add_option("--max_master_restarts", a->max_master_restarts,
                  "Restarts of a master that died before the job fails")
      ->capture_default_str();
  cmd->add_option("--job_dir", a->job_dir,
                  "Directory for the job's spec and intermediate files (default: a new one "
                  "under $TMPDIR/elasticdl-jobs)");
  cmd->add_option("--job_name", a->job_name, "Name of the job");
  cmd->add_option("--cluster", a->cluster,
                  "Where the job runs: local (processes here), slurm (a Slurm cluster: "
                  "SLURM_CONF, else /etc/slurm/slurm.conf) or external (workers join with "
                  "`elasticdl worker --master=HOST:PORT --token_file=FILE`)")
      ->capture_default_str();
  cmd->add_option("--master_addr", a->master_addr,
                  "HOST:PORT the master binds and advertises (default 127.0.0.1 here, the node's "
                  "name under Slurm; port 0: any free one)");
  cmd->add_option("--partition", a->partition, "Slurm partition (default: the cluster's)");
  cmd->add_flag("--detach", a->detach,
                "Slurm: return once submitted; `elasticdl job status JOB_DIR` follows the job");
  cmd->add_flag("!--no_progress", a->progress, "Do not show a progress bar");
}

void PrintResult(Command command, const JobResult& r) {
  if (!r.detached.empty()) {
    fmt::print("submitted: {}\n", r.detached);
    return;
  }
  switch (command) {
    case Command::kTrain:
      fmt::print(
          "trained {} records in {:.1f} s ({:.1f} s of training: {:.0f} records/s), model "
          "version {}, seed {}\n",
          r.records, r.seconds, r.training_seconds,
          r.training_seconds > 0 ? r.records / r.training_seconds : 0, r.model_version, r.seed);
      break;
    case Command::kEvaluate:
      fmt::print("evaluated {} records in {:.1f} s\n", r.records, r.seconds);
      break;
    case Command::kPredict:
      fmt::print("predicted {} records in {:.1f} s\n", r.records, r.seconds);
      break;
  }
  for (const auto& [name, value] : r.metrics) {
    fmt::print("{}: {:.6f} (model version {})\n", name, value, r.metrics_model_version);
  }
  if (!r.output.empty()) {
    fmt::print("{}: {}\n", command == Command::kTrain ? "trained model" : "predictions", r.output);
  }
}

void Add(CLI::App* app, int* exit_code, Command command) {
  auto args = std::make_shared<JobArgs>();
  CLI::App* cmd = nullptr;
  JobArgs* a = args.get();
  switch (command) {
    case Command::kTrain:
      cmd = app->add_subcommand("train", "Train a model from a model zoo");
      AddModelFlags(cmd, a, /*required=*/true);
      cmd->add_option("--training_data", a->training_data,
                      "Record files: a file, a directory or a glob (several: comma-separated)")
          ->required();
      cmd->add_option("--validation_data", a->validation_data,
                      "Record files evaluated during and after training");
      cmd->add_option("--num_epochs", a->num_epochs, "Passes over the training data")
          ->capture_default_str();
      cmd->add_option("--evaluation_steps", a->evaluation_steps,
                      "Evaluate every this many model versions (0: at the end only)")
          ->capture_default_str();
      cmd->add_option("--num_ps_pods", a->num_ps_pods, "Parameter server shards")
          ->capture_default_str();
      cmd->add_option("--seed", a->seed,
                      "Seed of every random choice: initial parameters, task order, dataset_fn "
                      "shuffles, dropout")
          ->capture_default_str();
      cmd->add_option("--use_async", a->use_async,
                      "true: asynchronous updates, each gradient a step of its own")
          ->capture_default_str();
      cmd->add_option("--grads_to_wait", a->grads_to_wait,
                      "Synchronous mode: gradients averaged per step (default: one of every "
                      "worker training at the time)");
      cmd->add_option("--sync_version_tolerance", a->sync_version_tolerance,
                      "Synchronous mode: how many versions old a gradient may be")
          ->capture_default_str();
      cmd->add_option("--max_staleness", a->max_staleness,
                      "Asynchronous mode: how many versions old a gradient may be (-1: any)")
          ->capture_default_str();
      cmd->add_option("--lr_staleness_modulation", a->lr_staleness_modulation,
                      "Asynchronous mode: scale gradients by 1 / (1 + staleness)")
          ->capture_default_str();
      cmd->add_option("--max_nonfinite_minibatches", a->max_nonfinite_minibatches,
                      "Minibatches with a non-finite loss or gradient before the job fails")
          ->capture_default_str();
      cmd->add_option("--shuffle_seed", a->shuffle_seed,
                      "Seed of the per-epoch task order (default: derived from --seed)");
      cmd->add_option("--output", a->output, "Write the trained model to this directory");
      cmd->add_option("--checkpoint_steps", a->checkpoint_steps,
                      "Checkpoint the parameter servers every this many versions (0: only the "
                      "initial model)")
          ->capture_default_str();
      cmd->add_option("--checkpoint_dir", a->checkpoint_dir,
                      "Where checkpoints go (default: <job_dir>/checkpoints)");
      cmd->add_option("--keep_checkpoint_max", a->keep_checkpoint_max,
                      "Checkpoints kept per parameter server (0: all)")
          ->capture_default_str();
      cmd->add_option("--checkpoint_dir_for_init", a->checkpoint_dir_for_init,
                      "Start from the newest checkpoint in this directory (any number of shards)");
      cmd->add_option("--max_ps_relaunches", a->max_ps_relaunches,
                      "Parameter-server relaunches before the job fails")
          ->capture_default_str();
      break;
    case Command::kEvaluate:
      cmd = app->add_subcommand("evaluate", "Evaluate a trained model");
      AddInferenceModelFlags(cmd, a);
      cmd->add_option("--validation_data", a->validation_data, "Record files to evaluate on")
          ->required();
      break;
    case Command::kPredict:
      cmd = app->add_subcommand("predict", "Run batch prediction with a trained model");
      AddInferenceModelFlags(cmd, a);
      cmd->add_option("--prediction_data,--data", a->prediction_data, "Record files to predict")
          ->required();
      cmd->add_option("--output", a->output,
                      "CSV file of predictions (or a directory for predictions.csv)")
          ->required();
      break;
  }
  AddRunFlags(cmd, a);
  cmd->callback([args, exit_code, command] {
    // Ctrl-C stops the job in order; a second one ends the client at once and
    // the job's processes follow through their die-with-parent signal.
    static std::atomic<bool> cancelled{false};
    cluster::ShutdownSignalsOptions options;
    options.on_shutdown = [](int) { cancelled = true; };
    auto signals = cluster::ShutdownSignals::Install(options);
    if (!signals.ok()) {
      fmt::print(stderr, "error: {}\n", signals.status().ToString());
      *exit_code = 1;
      return;
    }
    args->cancel = &cancelled;
    StatusOr<JobResult> result = command == Command::kTrain      ? Train(*args)
                                 : command == Command::kEvaluate ? Evaluate(*args)
                                                                 : Predict(*args);
    if (!result.ok()) {
      fmt::print(
          stderr, "error: {}\n",
          std::string_view(result.status().message().data(), result.status().message().size()));
      *exit_code = result.status().code() == absl::StatusCode::kCancelled ? 130 : 1;
      return;
    }
    PrintResult(command, *result);
  });
}

}  // namespace

// `elasticdl job scale|status JOB`: commands on a running job.
void AddControlCommands(CLI::App* app, int* exit_code) {
  CLI::App* job = app->add_subcommand("job", "Commands on a running job");
  job->require_subcommand(1);
  auto target = std::make_shared<std::string>();
  auto workers = std::make_shared<int>(-1);
  CLI::App* scale = job->add_subcommand("scale", "Change the number of workers of a running job");
  scale->add_option("job", *target, "The job directory, or the job's name")->required();
  scale->add_option("--num_workers", *workers, "Workers to run from now on")->required();
  scale->callback([target, workers, exit_code] {
    StatusOr<std::string> dir = client::FindJobDir(*target);
    Status s = dir.ok() ? client::ScaleJob(*dir, *workers) : dir.status();
    if (!s.ok()) {
      fmt::print(stderr, "error: {}\n", std::string(s.message()));
      *exit_code = 1;
      return;
    }
    fmt::print("{}: scaling to {} worker(s)\n", *dir, *workers);
  });
  CLI::App* status = job->add_subcommand("status", "Show how a running job is doing");
  status->add_option("job", *target, "The job directory, or the job's name")->required();
  status->callback([target, exit_code] {
    StatusOr<std::string> dir = client::FindJobDir(*target);
    StatusOr<proto::GetJobStatusResponse> st =
        dir.ok() ? client::GetJobStatus(*dir) : StatusOr<proto::GetJobStatusResponse>(dir.status());
    if (!st.ok()) {
      fmt::print(stderr, "error: {}\n", std::string(st.status().message()));
      *exit_code = 1;
      return;
    }
    fmt::print("{}\n", st->DebugString());
  });
}

void AddJobCommands(CLI::App* app, int* exit_code) {
  Add(app, exit_code, Command::kTrain);
  Add(app, exit_code, Command::kEvaluate);
  Add(app, exit_code, Command::kPredict);
  AddControlCommands(app, exit_code);
}

}  // namespace elasticdl::cli
