// The library form of the `elasticdl train | evaluate | predict` commands
// (seed 003's unified API): the same parameters, as strings, so a command
// line, a SQL submitter or a program can all launch the same jobs.
//
//   elasticdl::JobArgs args;
//   args.model_zoo = "model_zoo";
//   args.model_def = "mnist.mnist_functional_api.custom_model";
//   args.training_data = "data/train";
//   args.output = "my_trained_model";
//   auto result = elasticdl::Train(args);
#ifndef ELASTICDL_API_H_
#define ELASTICDL_API_H_

#include <atomic>
#include <map>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl {

// Parameters of a job, named and spelled as the command-line flags.
// Numbers are strings too; they are validated when the job is submitted.
struct JobArgs {
  // The model: a zoo directory and the entry `module.path.entry` in it.
  std::string model_zoo;
  std::string model_def;
  // Other entries: a bare name is looked up in model_def's file, a dotted
  // one names module and entry.
  std::string dataset_fn = "dataset_fn";
  std::string loss = "loss";
  std::string optimizer = "optimizer";
  std::string eval_metrics_fn = "eval_metrics_fn";
  // Handed to the model factory, e.g. "hidden_units=[10, 100, 20, 5], learning_rate=0.01".
  std::string params;

  // Each: a record file, a directory of record files or a glob; several
  // separated by commas.
  std::string training_data;
  std::string validation_data;
  std::string prediction_data;

  std::string minibatch_size = "64";
  std::string num_minibatches_per_task = "8";
  std::string num_epochs = "1";
  // Evaluate every this many model versions; 0: at the end of training only.
  std::string evaluation_steps = "0";
  std::string num_workers = "1";
  std::string num_ps_pods = "1";
  // Every random choice of the job (initial parameters, the order of tasks,
  // dataset_fn's shuffles, dropout) derives from it: the same command with
  // the same seed trains the same model (see README for which modes are
  // bit-for-bit reproducible).
  std::string seed = "0";
  // "false" (the default): synchronous training. A step averages the
  // gradients of grads_to_wait minibatches — empty (the default): one
  // minibatch of every worker training at the time, as many as there are —
  // and a gradient computed on a model more than sync_version_tolerance
  // versions old is refused and computed again.
  // "true": asynchronous; every gradient is a step of its own, refused when
  // computed on a model more than max_staleness versions old (-1: any).
  std::string use_async = "false";
  std::string grads_to_wait;
  std::string sync_version_tolerance = "0";
  std::string max_staleness = "1";
  // Asynchronous mode: "true" scales each gradient by 1 / (1 + its
  // staleness in versions).
  std::string lr_staleness_modulation = "false";
  // Minibatches with a non-finite loss or gradient (each refused, its task
  // retried) before the job fails naming the first.
  std::string max_nonfinite_minibatches = "3";
  // LibTorch intra-op threads per worker; 0: the machine's cores divided
  // among the workers (at least 1).
  std::string num_threads = "0";
  // Failures a task may have before the job fails.
  std::string max_task_retries = "3";
  // Worker processes relaunched after crashes before the job gives up.
  std::string max_worker_relaunches = "8";
  // The order of tasks in each epoch; empty: derived from seed.
  std::string shuffle_seed;

  // Fault tolerance (train). Parameter servers checkpoint parameters and
  // optimizer state every checkpoint_steps versions (0: only the initial
  // model) into checkpoint_dir (empty: <job_dir>/checkpoints), keeping the
  // newest keep_checkpoint_max per shard (0: all); a relaunched server
  // restores the newest. checkpoint_dir_for_init starts the model from the
  // newest complete checkpoint there, whatever its number of shards.
  std::string checkpoint_steps = "0";
  std::string checkpoint_dir;
  std::string keep_checkpoint_max = "3";
  std::string checkpoint_dir_for_init;
  // A worker not heard from for this long is taken as lost (its process
  // ending is noticed at once on the local backend).
  std::string worker_lease_ms = "5000";
  // Parameter-server relaunches, and master restarts, before the job fails.
  std::string max_ps_relaunches = "3";
  std::string max_master_restarts = "3";

  // train: the trained-model directory to write. predict: the CSV file (or a
  // directory to hold predictions.csv).
  std::string output;
  // evaluate, predict: the model, from a directory written by train
  // --output, or (the original's way) from model_zoo, model_def and the
  // newest checkpoint in checkpoint_dir_for_init. model_zoo and model_def
  // given with trained_model must agree with it; they rebuild the zoo of a
  // trained model that has none.
  std::string trained_model;
  // Where the job keeps its spec, logs of its state and intermediate files;
  // empty: a new directory under $TMPDIR/elasticdl-jobs.
  std::string job_dir;
  std::string job_name;

  // Where the job runs: "local" (processes on this machine), "slurm" (a
  // Slurm cluster, found as Slurm's own commands find it: SLURM_CONF, else
  // /etc/slurm/slurm.conf) or "external" (the master and parameter servers
  // here; workers join from anywhere with `elasticdl worker --master=...
  // --token_file=...`, and num_workers of them are waited for). On slurm
  // and external, job_dir, the data and the outputs must be on storage
  // every host sees.
  std::string cluster = "local";
  // host:port the master binds and advertises (port 0: any free one);
  // empty: 127.0.0.1 here, the node's host name under Slurm.
  std::string master_addr;
  // slurm: the partition; empty: the cluster's default.
  std::string partition;
  // slurm: return once the job is submitted (`elasticdl job status`
  // follows it).
  bool detach = false;
  // Show a progress bar on stderr.
  bool progress = true;
  // Set (e.g. by a signal handler) to stop the job; polled. Not owned.
  const std::atomic<bool>* cancel = nullptr;
};

// How a job ended.
struct JobResult {
  int64_t model_version = 0;
  int64_t records = 0;
  // Wall time of the whole job, submission included.
  double seconds = 0;
  // Training: from the first training task handed out to the last finished.
  double training_seconds = 0;
  // The last evaluation (train with validation data, evaluate).
  std::map<std::string, double> metrics;
  int64_t metrics_model_version = 0;
  uint64_t seed = 0;
  // The trained model or predictions written.
  std::string output;
  std::string job_dir;
  // Set when the job was submitted detached: how to follow it.
  std::string detached;
};

StatusOr<JobResult> Train(const JobArgs& args);
StatusOr<JobResult> Evaluate(const JobArgs& args);
StatusOr<JobResult> Predict(const JobArgs& args);

}  // namespace elasticdl

#endif  // ELASTICDL_API_H_
