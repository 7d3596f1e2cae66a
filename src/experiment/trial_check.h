// What an experiment checks before any trial runs, so that a mistake costs
// seconds, not a trial: the training data's size (trials train whole
// epochs), and the trial's own code run with the hyperparameters of every
// trial the searcher can start (grid: each point; random and asha: each of
// the max_trials draws), which finds a hyperparameter the trial reads but
// the configuration does not define, one of the wrong type, and a
// searcher metric the trial does not report.
#ifndef ELASTICDL_EXPERIMENT_TRIAL_CHECK_H_
#define ELASTICDL_EXPERIMENT_TRIAL_CHECK_H_

#include <cstdint>
#include <vector>

#include "elasticdl/status.h"
#include "elasticdl/zoo/params.h"
#include "experiment/experiment_config.h"

namespace elasticdl::experiment {

// The records of the data (comma-separated paths); errors name `key`.
StatusOr<int64_t> CountRecords(const std::string& data, const std::string& key);

// The hyperparameters of every trial the searcher may start.
StatusOr<std::vector<Params>> PlannedTrials(const ExperimentConfig& config);

// Builds the zoo and resolves the trial with each of `trials`. Errors name
// the configuration file and the hyperparameter or trial at fault.
Status CheckTrials(const ExperimentConfig& config, const std::vector<Params>& trials);

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_TRIAL_CHECK_H_
