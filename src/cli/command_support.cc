#include "cli/command_support.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string_view>

namespace elasticdl::cli {
namespace {

// absl::string_view is not std::string_view in Debian's Abseil.
std::string_view MessageOf(const absl::Status& status) {
  return {status.message().data(), status.message().size()};
}

}  // namespace

int ExitCode(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == absl::StatusCode::kCancelled ? kExitCancelled : kExitFailure;
}

int ReportError(const absl::Status& status) {
  if (!status.ok()) fmt::print(stderr, "error: {}\n", MessageOf(status));
  return ExitCode(status);
}

int ReportRoleError(const absl::Status& status) {
  if (!status.ok()) spdlog::error("{}", MessageOf(status));
  return ExitCode(status);
}

absl::StatusOr<std::unique_ptr<cluster::ShutdownSignals>> WatchShutdown(std::atomic<bool>* flag) {
  cluster::ShutdownSignalsOptions options;
  options.on_shutdown = [flag](int) { *flag = true; };
  return cluster::ShutdownSignals::Install(options);
}

}  // namespace elasticdl::cli
