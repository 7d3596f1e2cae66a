#include "cli/experiment_command.h"

#include <fmt/format.h>

#include <atomic>
#include <memory>

#include "cluster/signals.h"
#include "experiment/experiment_runner.h"

namespace elasticdl::cli {
namespace {

void Fail(const Status& s, int* exit_code) {
  fmt::print(stderr, "error: {}\n", std::string_view(s.message().data(), s.message().size()));
  *exit_code = s.code() == absl::StatusCode::kCancelled ? 130 : 1;
}

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
    cluster::ShutdownSignalsOptions signal_options;
    signal_options.on_shutdown = [](int) { cancelled = true; };
    auto signals = cluster::ShutdownSignals::Install(signal_options);
    if (!signals.ok()) return Fail(signals.status(), exit_code);
    options->cancel = &cancelled;
    StatusOr<experiment::ExperimentReport> report =
        resume_it ? experiment::ResumeExperiment(*options) : experiment::RunExperiment(*options);
    if (!report.ok()) return Fail(report.status(), exit_code);
    PrintReport(*report);
    if (report->status == "stopped") *exit_code = 130;
  };
  status->callback([options, exit_code] {
    StatusOr<std::string> text = experiment::ExperimentStatus(*options);
    if (!text.ok()) return Fail(text.status(), exit_code);
    fmt::print("{}", *text);
  });
  resume->callback([run] { run(true); });
  stop->callback([options, exit_code] {
    Status s = experiment::StopExperiment(*options);
    if (!s.ok()) return Fail(s, exit_code);
    fmt::print("experiment stopped; `resume` goes on with it\n");
  });
  cmd->callback([cmd, run] {
    if (cmd->get_subcommands().empty()) run(false);
  });
}

}  // namespace elasticdl::cli
