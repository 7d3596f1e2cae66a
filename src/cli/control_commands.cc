#include "cli/control_commands.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_support.h"
#include "client/dashboard.h"
#include "client/job_control.h"
#include "job/worker_seconds.h"

namespace elasticdl::cli {
namespace {

// `elasticdl job scale|status JOB`: commands on a running job.
void AddJobControlCommands(CLI::App* app, int* exit_code) {
  CLI::App* job = app->add_subcommand("job", "Commands on a running job");
  job->require_subcommand(1);
  auto target = std::make_shared<std::string>();
  auto workers = std::make_shared<int>(-1);
  CLI::App* scale = job->add_subcommand("scale", "Change the number of workers of a running job");
  scale->add_option("job", *target, "The job directory, or the job's name")->required();
  scale->add_option("--num_workers", *workers, "Workers to run from now on")->required();
  scale->callback([target, workers, exit_code] {
    StatusOr<std::string> dir = client::FindJobDir(*target);
    Status s = dir.ok() ? client::ScaleJob(*dir, *workers) : dir.status();
    if (!s.ok()) {
      *exit_code = ReportError(s);
      return;
    }
    fmt::print("{}: scaling to {} worker(s)\n", *dir, *workers);
  });
  CLI::App* status = job->add_subcommand("status", "Show how a running job is doing");
  status->add_option("job", *target, "The job directory, or the job's name")->required();
  status->callback([target, exit_code] {
    StatusOr<std::string> dir = client::FindJobDir(*target);
    StatusOr<proto::GetJobStatusResponse> st =
        dir.ok() ? client::GetJobStatus(*dir) : StatusOr<proto::GetJobStatusResponse>(dir.status());
    if (!st.ok()) {
      *exit_code = ReportError(st.status());
      return;
    }
    fmt::print("{}\n", st->DebugString());
    if (const std::string time = job::DescribeWorkerSeconds(st->worker_seconds()); !time.empty()) {
      fmt::print("{}\n", time);
    }
    if (st->finished()) {
      fmt::print("dashboard: elasticdl dashboard {}\n", *dir);
    } else if (StatusOr<std::string> url = client::DashboardLoginUrl(*dir); url.ok()) {
      fmt::print("dashboard: {}\n", *url);
    }
  });
}

// `elasticdl dashboard JOB`: the dashboard of a job that ended (or runs),
// served from its directory.
void AddDashboardCommand(CLI::App* app, int* exit_code) {
  auto options = std::make_shared<client::ServeDashboardOptions>();
  auto target = std::make_shared<std::string>();
  CLI::App* cmd = app->add_subcommand(
      "dashboard", "Serve a job's dashboard from its directory (after it ended, or while it runs)");
  cmd->add_option("job", *target, "The job directory, or the job's name")->required();
  cmd->add_option("--host", options->host, "Interface to listen on")->capture_default_str();
  cmd->add_option("--port", options->port, "Port to listen on (0: a free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->callback([options, target, exit_code] {
    static std::atomic<bool> cancelled{false};
    auto signals = WatchShutdown(&cancelled);
    StatusOr<std::string> dir = client::FindJobDir(*target);
    Status s = signals.ok() ? dir.status() : signals.status();
    if (s.ok()) {
      options->job_dir = *dir;
      options->cancel = &cancelled;
      options->on_serving = [](const std::string& url) {
        fmt::print("dashboard: {}\n(Ctrl-C stops it)\n", url);
        std::fflush(stdout);
      };
      s = client::ServeDashboard(*options);
    }
    if (!s.ok()) *exit_code = ReportError(s);
  });
}

}  // namespace

void AddControlCommands(CLI::App* app, int* exit_code) {
  AddJobControlCommands(app, exit_code);
  AddDashboardCommand(app, exit_code);
}

}  // namespace elasticdl::cli
