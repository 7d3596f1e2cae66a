// `elasticdl job scale|status JOB` and `elasticdl dashboard JOB`: commands
// on a job that runs or ran, through its directory.
#ifndef ELASTICDL_CLI_CONTROL_COMMANDS_H_
#define ELASTICDL_CLI_CONTROL_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddControlCommands(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_CONTROL_COMMANDS_H_
