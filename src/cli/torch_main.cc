// elasticdl-torch: every command, those that run models (LibTorch, the
// embedded Python) included. `elasticdl` execs it for what it does not do
// itself (cli/main.cc); this file only parses and dispatches.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstring>
#include <string>

#include "cli/command_support.h"
#include "cli/control_commands.h"
#include "cli/data_command.h"
#include "cli/experiment_command.h"
#include "cli/export_command.h"
#include "cli/job_commands.h"
#include "cli/master_command.h"
#include "cli/role_commands.h"
#include "cli/zoo_command.h"
#include "cluster/fork_server.h"
#include "common/blas_kernels.h"
#include "common/environment.h"
#include "common/process_tuning.h"

namespace {

int TorchMain(int argc, char** argv) {
  CLI::App app{"ElasticDL: elastic, fault-tolerant training, evaluation and prediction"};
  // The version, and the matrix kernels this process runs.
  const std::string blas = elasticdl::BlasKernels();
  app.set_version_flag("--version", blas.empty()
                                        ? std::string("elasticdl 0.1.0")
                                        : "elasticdl 0.1.0 (OpenBLAS: " + blas + " kernels)");
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

}  // namespace

int main(int argc, char** argv) {
  // First: this may start the program again, with the kernels OpenBLAS
  // should have picked for this CPU (common/blas_kernels.h).
  if (std::string failed = elasticdl::UseTheCpusBlasKernels(argv, elasticdl::ReadEnvironment());
      !failed.empty()) {
    spdlog::warn("{}", failed);
  }
  // A local job's parameter servers and workers are forked from here, with
  // LibTorch loaded once (cluster/fork_server.h); nothing may start a thread
  // before.
  auto child_main = [](int child_argc, char** child_argv) {
    const int code = TorchMain(child_argc, child_argv);
    spdlog::shutdown();  // flushes the loggers: the child exits without destructors
    return code;
  };
  if (argc > 1 && std::strcmp(argv[1], "fork-server") == 0) {
    return elasticdl::cluster::ServeForks(argc, argv, child_main);
  }
  // A local job's client has its master fork them from a spare forked from
  // here, where LibTorch is loaded already.
  if (elasticdl::cli::StartsLocalJob(argc, argv)) {
    elasticdl::cluster::StartSpareForkServer(argc, argv, child_main);
  }
  return TorchMain(argc, argv);
}
