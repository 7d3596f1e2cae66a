// `elasticdl zoo init|build|push`: a new model zoo from a template, and a
// zoo's container image (Kubernetes jobs).
#ifndef ELASTICDL_CLI_ZOO_COMMAND_H_
#define ELASTICDL_CLI_ZOO_COMMAND_H_

#include <CLI/CLI.hpp>

namespace elasticdl::cli {

void AddZooCommand(CLI::App* app, int* exit_code);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_ZOO_COMMAND_H_
