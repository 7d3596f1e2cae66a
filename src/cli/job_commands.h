// `elasticdl train | evaluate | predict`: thin flags over the library API
// (elasticdl/api.h).
#ifndef ELASTICDL_CLI_JOB_COMMANDS_H_
#define ELASTICDL_CLI_JOB_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddJobCommands(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_JOB_COMMANDS_H_
