// `elasticdl data ...`: conversion, import, inspection and validation of
// record files.
#ifndef ELASTICDL_CLI_DATA_COMMAND_H_
#define ELASTICDL_CLI_DATA_COMMAND_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

// Adds the `data` subcommand tree to `app`. The callbacks set `*exit_code`.
void AddDataCommand(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_DATA_COMMAND_H_
