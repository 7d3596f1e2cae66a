// `elasticdl export`: a trained model as PyTorch loads it (client/export.h).
#ifndef ELASTICDL_CLI_EXPORT_COMMAND_H_
#define ELASTICDL_CLI_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddExportCommand(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_EXPORT_COMMAND_H_
