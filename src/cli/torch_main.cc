// elasticdl-torch: every command, those that run models (LibTorch, the
// embedded Python) included. `elasticdl` execs it for what it does not do
// itself (cli/main.cc); this file only parses and dispatches.
#include <CLI/CLI.hpp>
#include <csignal>

#include "cli/command_support.h"
#include "cli/control_commands.h"
#include "cli/data_command.h"
#include "cli/experiment_command.h"
#include "cli/export_command.h"
#include "cli/job_commands.h"
#include "cli/master_command.h"
#include "cli/role_commands.h"
#include "cli/zoo_command.h"
#include "common/process_tuning.h"

int main(int argc, char** argv) {
  CLI::App app{"ElasticDL: elastic, fault-tolerant training, evaluation and prediction"};
  app.set_version_flag("--version", "elasticdl 0.1.0");
  app.require_subcommand(1);
  // A peer that closed its connection is an error on that connection, not
  // the end of this process (OpenSSL writes to sockets without
  // MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  elasticdl::SkipLockCycleDetection();
  int exit_code = 0;
  elasticdl::cli::AddJobCommands(&app, &exit_code);
  elasticdl::cli::AddControlCommands(&app, &exit_code);
  elasticdl::cli::AddDataCommand(&app, &exit_code);
  elasticdl::cli::AddExperimentCommand(&app, &exit_code);
  elasticdl::cli::AddExportCommand(&app, &exit_code);
  elasticdl::cli::AddMasterCommand(&app, &exit_code);
  elasticdl::cli::AddRoleCommands(&app, &exit_code);
  elasticdl::cli::AddZooCommand(&app, &exit_code);
  return elasticdl::cli::RunCommandLine(&app, argc, argv, exit_code);
}
