// elasticdl: the command users run and the cluster backends start. It does
// itself what needs no LibTorch (a job's master, the data and job-control
// commands, the dashboard) and execs elasticdl-torch, installed beside it,
// for everything else (cli/torch_main.cc): loading LibTorch costs each
// process that links it half a second of CPU, and a job starts many.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "cli/command_support.h"
#include "cli/control_commands.h"
#include "cli/data_command.h"
#include "cli/master_command.h"
#include "common/blas_kernels.h"
#include "common/file.h"
#include "common/process_tuning.h"

namespace {

// Becomes elasticdl-torch with the same arguments; returns only on failure.
int ExecTorchBinary(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string torch = (exe.parent_path() / elasticdl::kElasticdlTorchBinaryName).string();
  const elasticdl::Environment env = elasticdl::ReadEnvironment();
  // Its OpenBLAS picks its kernels as it loads (common/blas_kernels.h).
  elasticdl::ChooseBlasKernelsBeforeExec(env);
  // A local job's processes sleep while they wait for OpenMP work
  // (cluster/backends.cc), and are forked from a spare of the client's that
  // loaded libgomp, which reads the variable as it loads: the client loads
  // it with that setting too.
  if (env.omp_wait_policy.empty() && elasticdl::cli::StartsLocalJob(argc, argv)) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  }
  ::execv(torch.c_str(), argv);
  std::fprintf(stderr, "error: cannot run %s (installed beside %s): %s\n", torch.c_str(),
               exe.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ElasticDL: elastic, fault-tolerant training, evaluation and prediction"};
  app.require_subcommand(1);
  // A peer that closed its connection is an error on that connection, not
  // the end of this process (OpenSSL writes to sockets without
  // MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  elasticdl::SkipLockCycleDetection();
  int exit_code = 0;
  elasticdl::cli::AddControlCommands(&app, &exit_code);
  elasticdl::cli::AddDataCommand(&app, &exit_code);
  elasticdl::cli::AddMasterCommand(&app, &exit_code);
  // The other commands, --help and --version: elasticdl-torch knows them all.
  const bool ours =
      argc > 1 &&
      !app.get_subcommands([&](const CLI::App* c) { return c->check_name(argv[1]); }).empty();
  if (!ours) return ExecTorchBinary(argc, argv);
  return elasticdl::cli::RunCommandLine(&app, argc, argv, exit_code);
}
