// `elasticdl experiment --config=FILE [status|resume|stop]`: hyperparameter
// search over elastic training jobs (experiment/experiment_runner.h).
#ifndef ELASTICDL_CLI_EXPERIMENT_COMMAND_H_
#define ELASTICDL_CLI_EXPERIMENT_COMMAND_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddExperimentCommand(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_EXPERIMENT_COMMAND_H_
