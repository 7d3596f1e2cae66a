// Runs a short-lived command to its end and captures what it printed: the
// way backends talk to an engine's command-line tools (sbatch, squeue,
// scancel).
#ifndef ELASTICDL_CLUSTER_COMMAND_H_
#define ELASTICDL_CLUSTER_COMMAND_H_

#include <chrono>
#include <string>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::cluster {

struct CommandResult {
  // The exit code; -1 when a signal ended the command or it timed out.
  int exit_code = -1;
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0; }
};

// Runs `argv` (argv[0] looked up in PATH) with stdin on /dev/null and waits
// for it, killing it after `timeout`. An error only when it could not be
// started (then the message names the program); a command that ran and
// failed is a result with its exit code and output.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

// `s` quoted for a POSIX shell: 'it'\''s'.
std::string ShellQuote(const std::string& s);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_COMMAND_H_
