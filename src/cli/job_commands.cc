#include "cli/job_commands.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <type_traits>
#include <variant>

#include "cli/command_support.h"
#include "client/job_settings.h"
#include "cluster/signals.h"
#include "elasticdl/api.h"

namespace elasticdl::cli {
namespace {

using client::JobCommand;

// The command's flags, from the table of job settings.
void AddSettings(CLI::App* cmd, JobArgs* a, JobCommand command) {
  const unsigned bit = client::CommandBit(command);
  for (const client::JobSetting& s : client::JobSettings()) {
    if ((s.commands & bit) == 0) continue;
    CLI::Option* option = std::visit(
        [&](auto member) -> CLI::Option* {
          auto& field = a->*member;
          using T = std::decay_t<decltype(field)>;
          if constexpr (std::is_same_v<T, bool>) {
            if (s.is_switch) return cmd->add_flag(s.flags, field, s.help);
            return cmd->add_option(s.flags, field, s.help)->default_str(field ? "true" : "false");
          } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
            return cmd->add_option_function<int64_t>(
                s.flags, [&field](int64_t v) { field = v; }, s.help);
          } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
            return cmd
                ->add_option_function<uint64_t>(
                    s.flags, [&field](uint64_t v) { field = v; }, s.help)
                ->check(NonNegativeInteger());
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            return cmd->add_option(s.flags, field, s.help)->check(NonNegativeInteger());
          } else {
            return cmd->add_option(s.flags, field, s.help);
          }
        },
        s.field);
    option->group(s.group);
    if ((s.required & bit) != 0) {
      option->required();
    } else if (option->get_default_str().empty()) {
      option->capture_default_str();
    }
  }
}

void PrintResult(JobCommand command, const JobResult& r) {
  if (!r.detached.empty()) {
    fmt::print("submitted: {}\n", r.detached);
    return;
  }
  switch (command) {
    case JobCommand::kTrain:
      fmt::print(
          "trained {} records in {:.1f} s ({:.1f} s of training: {:.0f} records/s), model "
          "version {}, seed {}\n",
          r.records, r.seconds, r.training_seconds,
          r.training_seconds > 0 ? r.records / r.training_seconds : 0, r.model_version, r.seed);
      if (!r.stopped_early.empty()) fmt::print("{}\n", r.stopped_early);
      if (!r.worker_time.empty()) fmt::print("{}\n", r.worker_time);
      break;
    case JobCommand::kEvaluate:
      fmt::print("evaluated {} records in {:.1f} s\n", r.records, r.seconds);
      break;
    case JobCommand::kPredict:
      fmt::print("predicted {} records in {:.1f} s with model version {}\n", r.records, r.seconds,
                 r.model_version);
      break;
  }
  for (const auto& [name, value] : r.metrics) {
    fmt::print("{}: {:.6f} (model version {})\n", name, value, r.metrics_model_version);
  }
  // Rarely meant: a checkpoint directory of a job that wrote none after its
  // start (--checkpoint_steps=0), given as --checkpoint_dir_for_init.
  const int64_t used = command == JobCommand::kPredict ? r.model_version : r.metrics_model_version;
  if ((command == JobCommand::kPredict ||
       (command == JobCommand::kEvaluate && !r.metrics.empty())) &&
      used == 0) {
    fmt::print("model version 0 is the model's initial values: it was never trained\n");
  }
  if (!r.output.empty()) {
    fmt::print("{}: {}\n", command == JobCommand::kTrain ? "trained model" : "predictions",
               r.output);
  }
}

void Add(CLI::App* app, int* exit_code, JobCommand command) {
  auto args = std::make_shared<JobArgs>();
  CLI::App* cmd = nullptr;
  switch (command) {
    case JobCommand::kTrain:
      cmd = app->add_subcommand("train", "Train a model from a model zoo");
      break;
    case JobCommand::kEvaluate:
      cmd = app->add_subcommand("evaluate", "Evaluate a trained model");
      break;
    case JobCommand::kPredict:
      cmd = app->add_subcommand("predict", "Run batch prediction with a trained model");
      break;
  }
  AddSettings(cmd, args.get(), command);
  cmd->callback([args, exit_code, command] {
    // Ctrl-C stops the job in order; a second one ends the client at once and
    // the job's processes follow through their die-with-parent signal.
    static std::atomic<bool> cancelled{false};
    auto signals = WatchShutdown(&cancelled);
    if (!signals.ok()) {
      *exit_code = ReportError(signals.status());
      return;
    }
    args->cancel = &cancelled;
    StatusOr<JobResult> result = command == JobCommand::kTrain      ? Train(*args)
                                 : command == JobCommand::kEvaluate ? Evaluate(*args)
                                                                    : Predict(*args);
    if (!result.ok()) {
      *exit_code = ReportError(result.status());
      return;
    }
    PrintResult(command, *result);
  });
}

}  // namespace

// `elasticdl sql --db=URL "SELECT ... TRAIN|PREDICT ..."`: SQL users'
// statements (RunSql).
void AddSqlCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<SqlArgs>();
  CLI::App* cmd = app->add_subcommand(
      "sql",
      "Run SQL users' statements: SELECT ... TRAIN <model> [WITH k=v, ...] [COLUMN ...] "
      "LABEL <column> INTO <model_table>, and SELECT ... PREDICT <table>.<column> [WITH ...] "
      "USING <model_table>");
  cmd->add_option("--db", args->db,
                  "The database: sqlite:///path/to.db or postgresql://user@host:port/db")
      ->required();
  cmd->add_option("--work_dir", args->work_dir,
                  "Where the rows, the job and the model are kept while it runs (default: a "
                  "new directory under $TMPDIR/elasticdl-jobs-$UID)");
  cmd->add_flag("!--no_progress", args->progress, "Do not print the job's progress");
  cmd->add_option("STATEMENT", args->statement, "The statement")->required();
  cmd->callback([args, exit_code] {
    static std::atomic<bool> cancelled{false};
    auto signals = WatchShutdown(&cancelled);
    StatusOr<SqlResult> result =
        signals.ok() ? (args->cancel = &cancelled, RunSql(*args)) : signals.status();
    if (!result.ok()) {
      *exit_code = ReportError(result.status());
      return;
    }
    result->job.output.clear();  // the job's files, in the work directory: the table is the result
    PrintResult(result->train ? JobCommand::kTrain : JobCommand::kPredict, result->job);
    if (result->train) {
      fmt::print("saved the trained model as table {} of {}\n", result->table, result->database);
    } else {
      fmt::print("wrote {} rows into table {} of {}\n", result->rows, result->table,
                 result->database);
    }
  });
}

void AddJobCommands(CLI::App* app, int* exit_code) {
  Add(app, exit_code, JobCommand::kTrain);
  Add(app, exit_code, JobCommand::kEvaluate);
  Add(app, exit_code, JobCommand::kPredict);
  AddSqlCommand(app, exit_code);
}

}  // namespace elasticdl::cli
