// `elasticdl master`: a job's master, started by the job's client or its
// cluster backend; users do not.
#ifndef ELASTICDL_CLI_MASTER_COMMAND_H_
#define ELASTICDL_CLI_MASTER_COMMAND_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddMasterCommand(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_MASTER_COMMAND_H_
