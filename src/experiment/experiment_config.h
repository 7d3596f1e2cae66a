// An experiment's configuration file (YAML, in the shape of seed 004's
// Determined experiment configs):
//
//   name: fashion-mnist-asha
//   model_zoo: ../model_zoo            # relative paths: to this file
//   trial: mnist.mnist_trial.MnistTrial
//   data:
//     training_data: ../data/fashion/train
//     validation_data: ../data/fashion/test
//   hyperparameters:
//     learning_rate: {type: log, minval: -4, maxval: -2}   # 10^-4 .. 10^-2
//     conv1_channels: {type: int, minval: 8, maxval: 32}
//     dropout: {type: double, minval: 0.0, maxval: 0.5}
//     optimizer: {type: categorical, vals: [adam, sgd]}
//     conv2_channels: 32                                    # a constant
//   searcher:
//     name: asha                 # grid | random | asha
//     metric: accuracy           # an eval_metrics name of the trial
//     smaller_is_better: false
//     max_trials: 16             # random, asha
//     max_length: {epochs: 16}   # or {records: N}: a trial's whole budget
//     num_rungs: 3               # asha: budgets max_length / divisor^k
//     divisor: 4                 # asha: the top 1/divisor of a rung go on
//     max_concurrent_trials: 2
//   resources:
//     max_workers: 4             # the pool the running trials share
//   job:                         # any other `elasticdl train` flag
//     minibatch_size: 64
//     checkpoint_steps: 20
//   seed: 1
//
// Loading checks everything that can be checked without the data or the
// trial: errors name the file, the line where one is known and the key
// ("experiment.yaml: searcher.name: 'hyperband' is not one of grid, random,
// asha").
#ifndef ELASTICDL_EXPERIMENT_EXPERIMENT_CONFIG_H_
#define ELASTICDL_EXPERIMENT_EXPERIMENT_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/api.h"
#include "elasticdl/status.h"
#include "experiment/search_space.h"

namespace elasticdl::experiment {

enum class SearcherKind { kGrid, kRandom, kAsha };
const char* SearcherKindName(SearcherKind kind);

// A trial's training budget: whole epochs of the training data, or records
// (which must come to whole epochs of it once the data is counted).
struct Length {
  int64_t epochs = 0;
  int64_t records = 0;
};

struct SearcherConfig {
  SearcherKind kind = SearcherKind::kRandom;
  std::string metric;
  bool smaller_is_better = false;
  // random, asha: how many trials to start. grid: the grid's size.
  int64_t max_trials = 0;
  Length max_length;
  // asha.
  int64_t num_rungs = 3;
  double divisor = 4;
  int64_t max_concurrent_trials = 1;
};

struct ExperimentConfig {
  // The file, absolute, and its contents (a resumed experiment must be run
  // from the same contents).
  std::string path;
  std::string text;
  // Default: the file's name without extension.
  std::string name;
  std::string description;
  // The trial: --model_zoo (a directory, relative to the file, or a Git
  // URL) and --model_def of the Trial class.
  std::string model_zoo;
  std::string trial;
  std::string training_data;
  std::string validation_data;
  SearchSpace hyperparameters;
  SearcherConfig searcher;
  // The workers the running trials share (default: one per concurrent
  // trial); each running trial gets at least one.
  int64_t max_workers = 0;
  // The other settings of each trial's training job (JobArgs fields named
  // as `elasticdl train`'s flags), as given.
  std::vector<std::pair<std::string, std::string>> job;
  uint64_t seed = 0;
  // Default: $TMPDIR/elasticdl-experiments/<name>.
  std::string experiment_dir;
  // The best trial's trained model. Default: <experiment_dir>/best_model.
  std::string output;
};

StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path);

// The training job settings every trial shares: `job:` applied to JobArgs
// through `elasticdl train`'s table of settings. Errors name job.<key>;
// keys the experiment sets itself (model_def, params, num_epochs,
// num_workers, job_dir, output, checkpoint directories, ...) are refused.
StatusOr<JobArgs> BaseJobArgs(const ExperimentConfig& config);

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_EXPERIMENT_CONFIG_H_
