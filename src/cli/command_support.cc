#include "cli/command_support.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

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

namespace {

// An exception nobody caught, on any thread: said in one line, then the
// process ends as a failure (not with SIGABRT and a core file).
[[noreturn]] void OnTerminate() {
  std::string what = "terminate called without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "an exception of an unknown type";
    }
  }
  fmt::print(stderr, "error: internal: {}\n", what);
  std::fflush(stderr);
  std::_Exit(kExitFailure);
}

}  // namespace

int RunCommandLine(CLI::App* app, int argc, char** argv, const int& exit_code) {
  std::set_terminate(OnTerminate);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: internal: {}\n", e.what());
    return kExitFailure;
  }
  return exit_code;
}

bool StartsLocalJob(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  if (command != "train" && command != "evaluate" && command != "predict") return false;
  std::string_view cluster = "local";
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--cluster" && i + 1 < argc) {
      cluster = argv[++i];
    } else if (arg.rfind("--cluster=", 0) == 0) {
      cluster = arg.substr(std::string_view("--cluster=").size());
    }
  }
  return cluster == "local";
}

const CLI::Validator& NonNegativeInteger() {
  static const CLI::Validator validator(
      [](const std::string& text) -> std::string {
        const size_t first = text.find_first_not_of(" \t");
        if (first == std::string::npos || text[first] != '-') return "";
        return "expected a non-negative integer, got " + text;
      },
      "UINT");
  return validator;
}

absl::StatusOr<std::unique_ptr<cluster::ShutdownSignals>> WatchShutdown(
    std::function<void()> stop) {
  cluster::ShutdownSignalsOptions options;
  options.on_shutdown = [stop = std::move(stop)](int) { stop(); };
  return cluster::ShutdownSignals::Install(options);
}

absl::StatusOr<std::unique_ptr<cluster::ShutdownSignals>> WatchShutdown(std::atomic<bool>* flag) {
  return WatchShutdown([flag] { *flag = true; });
}

}  // namespace elasticdl::cli
