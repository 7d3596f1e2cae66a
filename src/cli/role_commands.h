// `elasticdl master | ps | worker`: the roles a job's processes run. The
// system starts them; users do not.
#ifndef ELASTICDL_CLI_ROLE_COMMANDS_H_
#define ELASTICDL_CLI_ROLE_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddRoleCommands(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_ROLE_COMMANDS_H_
