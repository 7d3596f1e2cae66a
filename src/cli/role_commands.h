// `elasticdl ps | worker`: the roles of a job's processes that run the
// model. The system starts them; users start workers that join a running
// job.
#ifndef ELASTICDL_CLI_ROLE_COMMANDS_H_
#define ELASTICDL_CLI_ROLE_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddRoleCommands(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_ROLE_COMMANDS_H_
