#include "cli/master_command.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>

#include "cli/command_support.h"
#include "common/environment.h"
#include "master/master.h"

namespace elasticdl::cli {

void AddMasterCommand(CLI::App* app, int* exit_code) {
  auto options = std::make_shared<master::MasterOptions>();
  CLI::App* m = app->add_subcommand("master", "Run a job's master (started by the client)");
  m->group("");  // hidden from help: started by the system
  m->add_option("--job_dir", options->job_dir)->required();
  m->add_option("--port", options->port);
  m->add_option("--host", options->host, "Address to bind and advertise");
  m->callback([options, exit_code] {
    spdlog::set_pattern("[master] %v");
    static std::atomic<bool> stop{false};
    auto signals = WatchShutdown(&stop);
    if (!signals.ok()) {
      *exit_code = ReportRoleError(signals.status());
      return;
    }
    options->environment = ReadEnvironment();
    *exit_code = ReportRoleError(master::RunMaster(*options, &stop));
  });
}

}  // namespace elasticdl::cli
