// Fuzzes the experiment file reader (experiment/experiment_config.h): YAML
// with the trial, the search space, the searcher and the trials' job
// settings, which go through `elasticdl train`'s table of settings.
//
// Input: an experiment file. Reading it, then the trials' job settings,
// fails with INVALID_ARGUMENT (or NOT_FOUND / FAILED_PRECONDITION for a file
// or directory it names), or gives a named experiment with a trial.
#include <cstdint>
#include <string>

#include "experiment/experiment_config.h"
#include "fuzz_check.h"
#include "seed_mode.h"
#include "temp_file.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  return WriteSeed(dir, "asha", R"(name: mnist-search
model_zoo: /nonexistent/zoo
trial: mnist.mnist_trial.Trial
training_data: /nonexistent/train
hyperparameters:
  learning_rate: {type: log_uniform, min: 0.0001, max: 0.1}
  hidden: {type: int, min: 16, max: 128}
  activation: {type: categorical, values: [relu, tanh]}
searcher:
  name: asha
  max_trials: 8
  max_concurrent_trials: 2
  max_epochs: 4
  metric: accuracy
  smaller_is_better: false
max_workers: 2
job:
  minibatch_size: 64
  lr_schedule: "warmup=10,cosine=100"
seed: 7
)");
}

bool Expected(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ||
         s.code() == StatusCode::kFailedPrecondition;
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  const std::string path = fuzz::WriteTempFile("experiment_config_fuzzer", ".yaml", data, size);
  StatusOr<experiment::ExperimentConfig> config = experiment::LoadExperimentConfig(path);
  if (!config.ok()) {
    EDL_FUZZ_CHECK(fuzz::Expected(config.status()), "LoadExperimentConfig: unexpected status {}",
                   config.status().ToString());
    return 0;
  }
  EDL_FUZZ_CHECK(!config->name.empty() && !config->trial.empty(),
                 "an experiment without a name or trial was accepted");
  StatusOr<JobArgs> job = experiment::BaseJobArgs(*config);
  EDL_FUZZ_CHECK(job.ok() || fuzz::Expected(job.status()), "BaseJobArgs: unexpected status {}",
                 job.status().ToString());
  return 0;
}
