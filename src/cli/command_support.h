// What the commands share: exit codes, how a failure is reported, shutdown
// signals.
#ifndef ELASTICDL_CLI_COMMAND_SUPPORT_H_
#define ELASTICDL_CLI_COMMAND_SUPPORT_H_

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster/signals.h"

namespace elasticdl::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
// 128 + SIGINT: what a shell reports for a command ended by Ctrl-C.
inline constexpr int kExitCancelled = 130;

// kExitOk, kExitCancelled for a cancelled command (Ctrl-C, SIGTERM), else
// kExitFailure.
int ExitCode(const absl::Status& status);

// Prints "error: <message>" to stderr and returns ExitCode(status).
int ReportError(const absl::Status& status);

// A role's failure (master, ps, worker): logged, as its output lines are
// labelled with the role already. Returns ExitCode(status).
int ReportRoleError(const absl::Status& status);

// Parses the command line and runs the command it names; returns the
// process's exit code. Anything a command throws (a bug: errors are
// Statuses) ends it with "error: internal: <what>" and kExitFailure rather
// than an abort; so does an exception escaping another thread (a terminate
// handler). Call once, from main.
int RunCommandLine(CLI::App* app, int argc, char** argv, const int& exit_code);

// Whether this command line runs a job on the local cluster (train,
// evaluate or predict without another --cluster), read before it is parsed.
bool StartsLocalJob(int argc, char** argv);

// Refuses a negative value of an unsigned option, which CLI11 would take
// modulo 2^64 ("-1" as 18446744073709551615).
const CLI::Validator& NonNegativeInteger();

// SIGTERM and SIGINT call `stop` (on the signal thread, with the first of
// them); a role then stops in order.
absl::StatusOr<std::unique_ptr<cluster::ShutdownSignals>> WatchShutdown(std::function<void()> stop);
// The same, setting `*flag`, which the role looks at.
absl::StatusOr<std::unique_ptr<cluster::ShutdownSignals>> WatchShutdown(std::atomic<bool>* flag);

}  // namespace elasticdl::cli

#endif  // ELASTICDL_CLI_COMMAND_SUPPORT_H_
