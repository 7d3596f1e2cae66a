#include "cli/experiment_command.h"

#include <fmt/format.h>

#include <atomic>
#include <memory>

#include "cli/command_support.h"
#include "cluster/signals.h"
#include "experiment/experiment_runner.h"

namespace elasticdl::cli {
namespace {

void PrintReport(const experiment::ExperimentReport& r) {
  fmt::print("\n{}\n", r.table);
  fmt::print("experiment {} in {:.1f} s: {} records trained; workers busy {:.1f}% of the pool\n",
             r.status, r.seconds, r.records, 100 * r.usage.fraction());
  if (r.best_trial) {
    fmt::print("best trial: {} ({})\n", *r.best_trial,
               r.best_metric ? fmt::format("{:.6g}", *r.best_metric) : std::string("-"));
  }
  if (!r.output.empty()) fmt::print("trained model: {}\n", r.output);
  fmt::print("trials: {}\n", r.csv);
  if (r.status == "stopped") fmt::print("resume with: elasticdl experiment ... resume\n");
}

}  // namespace

void AddExperimentCommand(CLI::App* app, int* exit_code) {
  auto options = std::make_shared<experiment::ExperimentOptions>();
  CLI::App* cmd = app->add_subcommand(
      "experiment",
      "Search hyperparameters: run a trial's jobs as an experiment configures (grid, random, "
      "asha) on a shared pool of workers");
  cmd->add_option("--config", options->config, "The experiment's YAML file")->required();
  cmd->add_option("--experiment_dir", options->experiment_dir,
                  "Where the experiment keeps its journal, trials and results (default: the "
                  "file's experiment_dir, else $TMPDIR/elasticdl-experiments/NAME)");
  cmd->require_subcommand(0, 1);
  CLI::App* status = cmd->add_subcommand("status", "Show the experiment's trials")->fallthrough();
  CLI::App* resume = cmd->add_subcommand("resume", "Go on with a stopped or interrupted experiment")
                         ->fallthrough();
  CLI::App* stop = cmd->add_subcommand("stop", "Stop the experiment's running trials (resumable)")
                       ->fallthrough();

  auto run = [options, exit_code](bool resume_it) {
    static std::atomic<bool> cancelled{false};
    auto signals = WatchShutdown(&cancelled);
    if (!signals.ok()) {
      *exit_code = ReportError(signals.status());
      return;
    }
    options->cancel = &cancelled;
    StatusOr<experiment::ExperimentReport> report =
        resume_it ? experiment::ResumeExperiment(*options) : experiment::RunExperiment(*options);
    if (!report.ok()) {
      *exit_code = ReportError(report.status());
      return;
    }
    PrintReport(*report);
    if (report->status == "stopped") *exit_code = kExitCancelled;
  };
  status->callback([options, exit_code] {
    StatusOr<std::string> text = experiment::ExperimentStatus(*options);
    if (!text.ok()) {
      *exit_code = ReportError(text.status());
      return;
    }
    fmt::print("{}", *text);
  });
  resume->callback([run] { run(true); });
  stop->callback([options, exit_code] {
    Status s = experiment::StopExperiment(*options);
    if (!s.ok()) {
      *exit_code = ReportError(s);
      return;
    }
    fmt::print("experiment stopped; `resume` goes on with it\n");
  });
  cmd->callback([cmd, run] {
    if (cmd->get_subcommands().empty()) run(false);
  });
}

}  // namespace elasticdl::cli
