#include "cli/master_command.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstring>
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
  m->add_option("--fork_server_fd", options->fork_server_fd,
                "A socket to the client's spare fork server (cluster/fork_server.h)");
  m->callback([options, exit_code] {
    spdlog::set_pattern("[master] %v");
    static std::atomic<bool> stop{false};
    auto signals = WatchShutdown(&stop);
    if (!signals.ok()) {
      *exit_code = ReportRoleError(signals.status());
      return;
    }
    options->environment = ReadEnvironment();
    // The spare's socket is this process's alone: none of its children
    // inherits it.
    if (options->fork_server_fd >= 0 &&
        ::fcntl(options->fork_server_fd, F_SETFD, FD_CLOEXEC) != 0) {
      spdlog::warn("--fork_server_fd={}: {}; the fork server is started instead",
                   options->fork_server_fd, std::strerror(errno));
      options->fork_server_fd = -1;
    }
    *exit_code = ReportRoleError(master::RunMaster(*options, &stop));
  });
}

}  // namespace elasticdl::cli
