// The library form of the `elasticdl train | evaluate | predict` commands
// (seed 003's unified API): the same settings, typed, so a command line, a
// SQL submitter or a program all launch the same jobs and get the same
// checks.
//
//   elasticdl::JobArgs args;
//   args.model_zoo = "model_zoo";
//   args.model_def = "mnist.mnist_functional_api.custom_model";
//   args.training_data = "data/train";
//   args.num_workers = 2;
//   args.output = "my_trained_model";
//   auto result = elasticdl::Train(args);
#ifndef ELASTICDL_API_H_
#define ELASTICDL_API_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl {

// Defaults the roles share with the command line: a worker not heard from
// for this long is lost; minibatches with non-finite values a job
// tolerates before the next fails it.
inline constexpr int64_t kDefaultWorkerLeaseMs = 5000;
inline constexpr int64_t kDefaultMaxNonfiniteMinibatches = 3;
// A worker this many times slower than the others is replaced.
inline constexpr int64_t kDefaultStragglerFactor = 2;
// Seconds a call into the model's code may run on a worker (see
// JobArgs::model_call_timeout).
inline constexpr int64_t kDefaultModelCallTimeout = 300;

// The settings of a job, named as the command-line flags; each flag's help
// (`elasticdl train --help`) says what it does. Train, Evaluate and Predict
// check them all (ranges, required ones, combinations) before anything
// starts, with errors that name the flag.
struct JobArgs {
  // The model: a zoo directory (or a Git URL, "https://host/models.git#v1",
  // fetched into the cache: zoo/git_zoo.h) and the entry `module.path.entry` in it.
  // Other entries: a bare name is looked up in model_def's file, a dotted
  // one names module and entry. Empty: the model's own (seed 003's class
  // defaults, seed 002's input_fn, else the file's dataset_fn, loss,
  // optimizer and, if it has one, eval_metrics_fn; model_zoo/README.md).
  std::string model_zoo;
  std::string model_def;
  std::string dataset_fn;  // --dataset_fn, or its alias --input_fn
  std::string loss;
  std::string optimizer;
  std::string eval_metrics_fn;
  // The zoo's optional learning-rate schedule entry (empty: the model
  // file's learning_rate_schedule, if it has one); lr_schedule, when set,
  // replaces it: "warmup=100,cosine=2000,min_lr=0.0001" (see
  // elasticdl/zoo/lr_schedule.h).
  std::string learning_rate_schedule;
  std::string lr_schedule;
  // Handed to the model factory, e.g. "hidden_units=[10, 100, 20, 5], learning_rate=0.01".
  std::string params;
  // evaluate, predict: the model, from a directory written by train --output.
  std::string trained_model;
  // train: start from the newest complete checkpoint here; evaluate,
  // predict: with model_zoo and model_def, the model's parameters.
  std::string checkpoint_dir_for_init;

  // Each: a record file, a directory of record files or a glob; several
  // separated by commas. Data, job_dir and outputs must be on storage every
  // host of the cluster sees.
  std::string training_data;
  std::string validation_data;
  std::string prediction_data;
  // train: the trained-model directory to write; predict: the CSV file (or
  // a directory to hold predictions.csv).
  std::string output;

  // Tasks.
  int64_t minibatch_size = 64;
  int64_t num_minibatches_per_task = 8;
  int64_t num_epochs = 1;
  int64_t evaluation_steps = 0;
  // train: stop when the model version reaches this (0: no limit).
  int64_t max_steps = 0;
  // train: stop when an evaluation metric stops improving, e.g.
  // "metric=accuracy,mode=max,patience=3,min_delta=0.001" (empty: never).
  std::string early_stopping;
  // The order of tasks in each epoch; unset: derived from seed.
  std::optional<uint64_t> shuffle_seed;
  // Every random choice of the job derives from it (README: which modes are
  // bit-for-bit reproducible).
  uint64_t seed = 0;

  // Parameter servers and how gradients become steps: synchronous (the
  // default) averages grads_to_wait gradients per step (unset: one of every
  // worker training at the time; 0: the old spelling of use_async);
  // asynchronous makes each gradient a step.
  // How workers combine gradients: "ParameterServerStrategy" (servers hold
  // the model), "AllreduceStrategy" (every worker holds it; gradients are
  // all-reduced) or "Local" (one worker holds it and trains alone).
  std::string distribution_strategy = "ParameterServerStrategy";
  // Unset: 1 under ParameterServerStrategy, none otherwise.
  std::optional<int64_t> num_ps_pods;
  bool use_async = false;
  std::optional<int64_t> grads_to_wait;
  int64_t sync_version_tolerance = 0;
  int64_t max_staleness = 1;
  bool lr_staleness_modulation = false;
  int64_t checkpoint_steps = 0;
  std::string checkpoint_dir;
  int64_t keep_checkpoint_max = 3;

  // Workers.
  int64_t num_workers = 1;
  // The most workers `elasticdl job scale` may ask for; 0: the cluster's
  // capacity as the job sees it (4 per core of this machine on the local and
  // external clusters, 1024 on Slurm and Kubernetes), at least num_workers.
  int64_t max_workers = 0;
  // The fewest workers the job trains with: training begins once this many
  // (and the parameter servers) have registered, and the others join as
  // they start (on Slurm, as the scheduler grants them). num_workers waits
  // for all of them (gang scheduling). 0: 1 on Slurm and Kubernetes, where
  // workers may pend; all of them on the local and external clusters, so
  // that every run of a seed begins with the same workers.
  int64_t min_workers = 0;
  // LibTorch threads per worker; 0: the machine's cores divided among them.
  int64_t num_threads = 0;

  // Fault tolerance.
  int64_t worker_lease_ms = kDefaultWorkerLeaseMs;
  int64_t max_task_retries = 3;
  int64_t max_worker_relaunches = 8;
  int64_t max_ps_relaunches = 3;
  int64_t max_master_restarts = 3;
  int64_t max_nonfinite_minibatches = kDefaultMaxNonfiniteMinibatches;
  // A training worker whose applied minibatches take this many times the
  // median of the others' (three or more workers) is asked to leave and
  // replaced; 0: never.
  int64_t straggler_factor = kDefaultStragglerFactor;
  // Near the end of training, a worker with nothing to do backs up a task
  // whose holder trains more than 3 times slower; the first attempt to
  // finish wins (parameter-server strategy).
  bool backup_tasks = true;
  // A call into the model's code on a worker (making a minibatch with
  // dataset_fn, forward, the loss, backward, the metrics) that has not
  // returned after this many seconds ends the worker: its task fails
  // (max_task_retries) and the worker is relaunched; 0: never.
  int64_t model_call_timeout = kDefaultModelCallTimeout;

  // The job and where it runs: cluster "local" (processes on this
  // machine), "slurm" (a Slurm cluster, found as Slurm's own commands find
  // it), "kubernetes" (pods, through the API server $KUBECONFIG or
  // ~/.kube/config names) or "external" (workers join with
  // `elasticdl worker`).
  std::string job_dir;
  std::string job_name;
  std::string cluster = "local";
  std::string master_addr;
  std::string partition;
  // Slurm: "high" or "low" puts the workers in the partition
  // `priority_partitions` names for it ("high=P1,low=P2"), where a
  // high-priority job may preempt a low-priority one's workers; the master
  // and parameter servers stay in `partition`. Empty: workers in
  // `partition` too.
  std::string priority;
  std::string priority_partitions = "high=high,low=low";
  bool detach = false;
  // Plaintext gRPC between the job's processes (rpc/job_credentials.h): no
  // TLS, the token alone authenticating calls. For a network the job owns.
  bool insecure_transport = false;
  // Servers also listen on Unix sockets in the job directory, and processes
  // on the same machine call them there (rpc/job_credentials.h). false: TCP
  // for every call (a job directory on a file system without sockets).
  bool local_sockets = true;
  // Local cluster: when the workers' LibTorch threads fill this machine's
  // cores, each worker runs on cores of its own (cluster/local_backend.h).
  // Any cluster: a worker with exactly as many cores as LibTorch threads
  // binds each to a core while its pipeline keeps ahead of the model
  // (worker/team_binding.h). false: the kernel's scheduler places every
  // thread.
  bool bind_workers = true;

  // Kubernetes (seed 003's flags): the image every pod runs, the namespace
  // (default: the kubeconfig context's), resources "cpu=1,memory=4096Mi"
  // per role, volumes "host_path=/data,mount_path=/data" or
  // "claim_name=NAME,mount_path=/data" (';' between several), the image
  // pull policy, the master pod's restart policy, environment "K=V,K2=V2",
  // a --cluster_spec YAML file of patches to every pod and service, a
  // priority class for worker pods, and --yaml: write the manifests to this
  // file instead of submitting them.
  std::string image_name;
  std::string k8s_namespace;
  std::string master_resource_request;
  std::string master_resource_limit;
  std::string ps_resource_request;
  std::string ps_resource_limit;
  std::string worker_resource_request;
  std::string worker_resource_limit;
  std::string volume;
  std::string image_pull_policy = "Always";
  std::string restart_policy = "Never";
  std::string envs;
  std::string cluster_spec;
  std::string worker_pod_priority;
  std::string yaml;
  bool progress = true;
  // Where the job's output goes (the client's lines and every process's),
  // appended; empty: stderr.
  std::string log_file;
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
  // Training stopped before its epochs ended (--max_steps,
  // --early_stopping): why, and with how many records trained.
  std::string stopped_early;
  // Goodput: the share of the workers' time (from each one's start to its
  // end) spent on minibatches that were applied, and where the rest went,
  // in words ("goodput 91.2% of 60.3 worker-seconds (start-up 4.1%, ...)").
  double goodput = 0;
  std::string worker_time;
};

StatusOr<JobResult> Train(const JobArgs& args);
StatusOr<JobResult> Evaluate(const JobArgs& args);
StatusOr<JobResult> Predict(const JobArgs& args);

// SQL users' statements (seed 003), run on their database:
//
//   elasticdl::SqlArgs args;
//   args.db = "sqlite:///data/hr.db";
//   args.statement = "SELECT age, role, salary FROM employee "
//                    "TRAIN regressor.DNN WITH hidden_units=[32, 16], train.num_workers=2 "
//                    "LABEL salary INTO salary_model";
//   auto trained = elasticdl::RunSql(args);
//   args.statement = "SELECT id, age, role FROM staff "
//                    "PREDICT staff_salary.predicted USING salary_model";
//   auto predicted = elasticdl::RunSql(args);
//
// TRAIN reads the query's rows into records, trains one of the models
// shipped for SQL users (regressor.DNN, regressor.Linear, classifier.DNN,
// classifier.Linear) with Train, and saves the trained model as the table
// named by INTO. PREDICT reads that table and the query's rows, predicts
// with Predict and writes the result table: the selected columns and the
// predicted one. A table is replaced only once its new contents are
// complete, in one transaction. The WITH clause holds the model's
// parameters, `max_vocabulary` and `hash_buckets` (how text columns become
// ids) and the job's settings as train.<flag> / predict.<flag>
// (train.num_workers=2, train.epoch=10, train.batch_size=32).
struct SqlArgs {
  // sqlite:///path/to.db or postgresql://user@host:port/db.
  std::string db;
  std::string statement;
  // Where the rows, the job and the model are kept while it runs; default
  // $TMPDIR/elasticdl-jobs-$UID/sql-<time>-<pid>. Must be on storage every host
  // of the cluster sees.
  std::string work_dir;
  bool progress = true;
  // Set to stop the job; polled. Not owned.
  const std::atomic<bool>* cancel = nullptr;
};

struct SqlResult {
  bool train = false;
  // Rows the query returned.
  int64_t rows = 0;
  // The table written: the model's (TRAIN) or the predictions' (PREDICT),
  // and its database (its URL without a password).
  std::string table;
  std::string database;
  // The job that trained or predicted.
  JobResult job;
  std::string work_dir;
};

StatusOr<SqlResult> RunSql(const SqlArgs& args);

}  // namespace elasticdl

#endif  // ELASTICDL_API_H_
