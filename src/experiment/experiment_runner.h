// `elasticdl experiment`: runs an experiment's trials as elastic training
// jobs that share one pool of workers.
//
// Each rung of a trial is a training job (<experiment_dir>/trials/<id>/
// rung-<k>) with the trial's hyperparameters as --params; a later rung
// starts from the previous rung's last checkpoint. At most
// max_concurrent_trials run at once, and the pool's max_workers are divided
// among them; when one ends, its workers go to the others at once (the jobs
// are scaled, as `elasticdl job scale` does), before the next trial starts.
//
// Durability: every decision is journaled (experiment_journal.h) before it
// is acted on. When the client dies, its trials' masters follow it; the
// jobs' checkpoints and journals stay. `resume` rebuilds the state from the
// journal and runs every interrupted rung on in its own job directory (its
// master resumes from the job's journal and its parameter servers from their
// checkpoints; a rung interrupted before its first checkpoint starts over),
// then goes on searching. `stop` cancels the running rungs the same way. A
// second client on the same experiment is refused.
#ifndef ELASTICDL_EXPERIMENT_EXPERIMENT_RUNNER_H_
#define ELASTICDL_EXPERIMENT_EXPERIMENT_RUNNER_H_

#include <atomic>
#include <cstdio>
#include <optional>
#include <string>

#include "elasticdl/status.h"
#include "experiment/experiment_state.h"

namespace elasticdl::experiment {

struct ExperimentOptions {
  // The configuration file (experiment_config.h).
  std::string config;
  // Replaces the file's experiment_dir when set.
  std::string experiment_dir;
  // Set (e.g. on Ctrl-C) to stop the running trials; the experiment can be
  // resumed. Polled; not owned.
  const std::atomic<bool>* cancel = nullptr;
  // Progress lines and the final table.
  std::FILE* out = stdout;
};

struct ExperimentReport {
  std::string experiment_dir;
  // "finished" or "stopped".
  std::string status;
  std::string table;
  std::string csv;  // the path of trials.csv
  // The best trial and its metric, and where its trained model was copied.
  std::optional<int64_t> best_trial;
  std::optional<double> best_metric;
  std::string output;
  double seconds = 0;
  int64_t records = 0;
  PoolUsage usage;
};

// Starts the experiment of `options.config`. ALREADY_EXISTS when its
// directory holds one (resume it, or remove the directory).
StatusOr<ExperimentReport> RunExperiment(const ExperimentOptions& options);
// Goes on with a stopped or interrupted experiment.
StatusOr<ExperimentReport> ResumeExperiment(const ExperimentOptions& options);
// The table of trials and whether a client runs the experiment.
StatusOr<std::string> ExperimentStatus(const ExperimentOptions& options);
// Asks the client running the experiment to stop its trials and waits for
// it (up to `wait_seconds`); with no client running, journals the stop.
Status StopExperiment(const ExperimentOptions& options, double wait_seconds = 120);

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_EXPERIMENT_RUNNER_H_
