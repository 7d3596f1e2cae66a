#include "cli/command_support.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// Edits (insertions, deletions, substitutions) from `a` to `b`.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The one of `names` closest to `wrong`, if any is close enough to be what
// was meant (a typo, a letter left out or swapped).
std::optional<std::string> Closest(std::string_view wrong, const std::vector<std::string>& names) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, wrong.size() / 4) + 1;
  for (const std::string& name : names) {
    const size_t d = EditDistance(wrong, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

// The subcommand the command line chose (the deepest), or `app`.
const CLI::App* Chosen(const CLI::App* app) {
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

// Whether `name` ("--minibatch_size") is spelt as an option's name is.
bool OptionLike(std::string_view name) {
  return name.size() > 2 && name.substr(0, 2) == "--" &&
         std::all_of(name.begin() + 2, name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
                  c == '.';
         });
}

// An option that `app` or a command above it takes, by name ("--output").
const CLI::Option* Taken(const CLI::App* app, const std::string& name) {
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* option = app->get_option_no_throw(name)) return option;
  }
  return nullptr;
}

// The first option on the command line that neither the chosen subcommand
// nor a command above it takes, with the option it likely meant (empty if
// none is close); nullopt if every one is known. A value given after its
// option (`--output dir`) is not an option, whatever it looks like.
std::optional<std::pair<std::string, std::string>> UnknownOption(const CLI::App* chosen, int argc,
                                                                 char** argv) {
  std::vector<std::string> known;
  for (const CLI::Option* option : chosen->get_options()) {
    for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;  // positional arguments follow
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals));
    if (!OptionLike(name)) continue;
    if (const CLI::Option* option = Taken(chosen, name)) {
      if (equals == std::string_view::npos && option->get_type_size() > 0) ++i;  // its value
      continue;
    }
    return std::make_pair(name, Closest(name, known).value_or(""));
  }
  return std::nullopt;
}

// "an integer" for CLI11's "INT" (and "INT:UINT", a validator's name after
// the colon), and so on.
std::string Expected(const std::string& type_name) {
  std::string type = type_name.substr(0, type_name.find(':'));
  if (type == "INT") return "an integer";
  if (type == "UINT") return "a non-negative integer";
  if (type == "FLOAT") return "a number";
  if (type == "BOOLEAN") return "true or false";
  return type;
}

// The word on the command line where a command of `app` is due, if it is
// none of them: "'mnsit' is not a command of 'data' (did you mean mnist?)".
std::optional<std::string> UnknownCommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.empty() || arg[0] == '-') return std::nullopt;
    std::vector<std::string> shown;  // hidden ones (the roles a master starts) have no group
    const CLI::App* next = nullptr;
    for (const CLI::App* command : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (command->check_name(std::string(arg))) next = command;
      if (!command->get_group().empty()) shown.push_back(command->get_name());
    }
    if (shown.empty()) return std::nullopt;  // a command that takes arguments, not commands
    if (next == nullptr) {
      std::string message = at == &app
                                ? fmt::format("'{}' is not a command", arg)
                                : fmt::format("'{}' is not a command of '{}'", arg, at->get_name());
      if (std::optional<std::string> meant = Closest(arg, shown)) {
        message += fmt::format(" (did you mean {}?)", *meant);
      }
      return message;
    }
    at = next;
  }
  return std::nullopt;
}

// What a parse error says, with what it can add: a command that is none and
// the one meant; an option not known (the likely cause of whatever CLI11
// found first, a required option missing among them) and the one meant;
// what a value did not convert to.
std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& e, int argc,
                               char** argv) {
  if (std::optional<std::string> command = UnknownCommand(app, argc, argv)) return *command;
  const CLI::App* chosen = Chosen(&app);
  if (std::optional<std::pair<std::string, std::string>> unknown =
          UnknownOption(chosen, argc, argv)) {
    const auto& [name, meant] = *unknown;
    const std::string command =
        chosen == &app ? std::string("elasticdl") : fmt::format("'{}'", chosen->get_name());
    return meant.empty()
               ? fmt::format("{} takes no option {}", command, name)
               : fmt::format("{} takes no option {} (did you mean {}?)", command, name, meant);
  }
  std::string message = e.what();
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    // "Could not convert: --num_epochs = abc".
    const std::string_view text = message;
    const size_t name_at = text.find("--");
    const size_t name_end = text.find(' ', name_at);
    if (name_at != std::string_view::npos && name_end != std::string_view::npos) {
      const CLI::Option* option =
          chosen->get_option_no_throw(std::string(text.substr(name_at, name_end - name_at)));
      if (option != nullptr && !option->get_type_name().empty()) {
        message += fmt::format(" (expected {})", Expected(option->get_type_name()));
      }
    }
  }
  return message;
}

int RunCommandLine(CLI::App* app, int argc, char** argv, const int& exit_code) {
  std::set_terminate(OnTerminate);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are not errors.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app->exit(e);
    fmt::print(stderr, "error: {}\nRun with --help for more information.\n",
               DescribeParseError(*app, e, argc, argv));
    return kExitFailure;
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
