#include "cli/role_commands.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "cli/command_support.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/process_start.h"
#include "common/process_tuning.h"
#include "common/stop_flag.h"
#include "ps/ps_server.h"
#include "python/output_label.h"
#include "worker/join.h"
#include "worker/worker.h"

namespace elasticdl::cli {
namespace {

// A worker looks at its flag between minibatches; a parameter server's
// main thread waits on its own.
std::atomic<bool> g_stop{false};
StopFlag g_ps_stop;
// When the parameter server was asked to stop (the clock's epoch: not
// asked). Its log says that it was asked (of a server its engine had to
// kill: whether the request came at all) and, where stopping took over a
// second, how long.
std::atomic<std::chrono::steady_clock::time_point> g_ps_stop_asked{};

// Every line of the process begins with "[label] ": its logger's, and what
// a Python model file prints.
void LabelLines(const std::string& label) {
  const std::string prefix = fmt::format("[{}] ", label);
  spdlog::set_pattern(prefix + "%v");
  python::LabelOutput(prefix);
}

// Processes the local backend starts outlive their master (a restarted one
// adopts them) but not the whole job: once the process that started the
// master is gone too (ELASTICDL_JOB_SUPERVISOR names it; without it, once
// they are orphaned to init), no process of the job supervises them any
// more. Then stop as if SIGTERM came, and leave for good a few seconds later.
void WatchForOrphaning(std::function<void()> stop) {
  const std::optional<std::pair<pid_t, uint64_t>> supervisor =
      ParseProcessToken(ReadEnvironment().job_supervisor);
  auto supervised = [supervisor] {
    if (::getppid() == 1) return false;
    return !supervisor || ProcessRunning(supervisor->first, supervisor->second);
  };
  std::thread([stop = std::move(stop), supervised] {
    while (supervised()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    spdlog::warn("the job's client and master are gone; stopping");
    stop();
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(1);
  }).detach();
}

// Reports `status` (ReportRoleError); for a process the master started, also
// leaves it in its ExitReasonFile, which the master quotes in the job's error.
int EndRole(const Status& status, const std::string& job_dir, const std::string& label) {
  if (!status.ok() && !absl::IsCancelled(status) && !job_dir.empty()) {
    const std::string path = ExitReasonFile(job_dir, label);
    Status left = CreateDirectories(std::filesystem::path(path).parent_path().string());
    if (left.ok()) left = WriteFileAtomically(path, std::string(status.message()));
    if (!left.ok())
      spdlog::warn("cannot leave the reason for the master: {}", std::string(left.message()));
  }
  return ReportRoleError(status);
}

}  // namespace

void AddRoleCommands(CLI::App* app, int* exit_code) {
  auto ps_options = std::make_shared<ps::PsServerOptions>();
  CLI::App* p = app->add_subcommand("ps", "Run a parameter server (started by the master)");
  p->group("");
  p->add_option("--job_dir", ps_options->job_dir)->required();
  p->add_option("--master", ps_options->master_address)->required();
  p->add_option("--ps_id", ps_options->ps_id)->required();
  p->add_option("--host", ps_options->host, "Address to bind and advertise");
  p->add_option("--port", ps_options->port);
  p->add_flag("--restore", ps_options->restore,
              "Start from this shard's newest checkpoint (set by the master on relaunch)");
  p->callback([ps_options, exit_code] {
    LabelLines(fmt::format("ps-{}", ps_options->ps_id));
    KeepFreedMemory();
    auto signals = WatchShutdown([] {
      spdlog::info("stopping as asked");
      g_ps_stop_asked = std::chrono::steady_clock::now();
      g_ps_stop.Set();
    });
    if (!signals.ok()) {
      *exit_code = ReportRoleError(signals.status());
      return;
    }
    ps_options->cancel = &g_ps_stop;
    WatchForOrphaning([] { g_ps_stop.Set(); });
    *exit_code = EndRole(ps::RunPsServer(*ps_options), ps_options->job_dir,
                         fmt::format("ps-{}", ps_options->ps_id));
    if (const auto asked = g_ps_stop_asked.load();
        asked != std::chrono::steady_clock::time_point{}) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - asked;
      if (took > std::chrono::seconds(1)) spdlog::warn("took {:.1f} s to stop", took.count());
    }
  });

  auto worker_options = std::make_shared<worker::WorkerOptions>();
  auto join_options = std::make_shared<worker::JoinOptions>();
  auto wait_s = std::make_shared<double>(60);
  CLI::App* w = app->add_subcommand(
      "worker",
      "Join a running job as a worker: elasticdl worker --master=HOST:PORT "
      "--credentials_file=FILE (a copy of the job directory's credentials file)");
  w->add_option("--master", worker_options->master_address, "host:port of the job's master")
      ->required();
  w->add_option("--credentials_file,--token_file", join_options->credentials_file,
                "The job's credentials (a copy of <job_dir>/credentials: its certificate, key and "
                "token); needed to join");
  w->add_option("--wait_for_master", *wait_s, "Seconds to keep trying to reach the master")
      ->capture_default_str();
  w->add_option("--num_threads", worker_options->num_threads,
                "LibTorch threads (default: the job's)");
  auto cpus = std::make_shared<std::string>();
  w->add_option("--cpus", *cpus,
                "CPUs every thread of this worker runs on, e.g. 0-3 or 0,2 (default: those it "
                "was started with; the local cluster sets it when the workers' threads fill "
                "the machine's cores)");
  // Set by the master's backend for the workers it starts.
  auto* job_dir_opt = w->add_option("--job_dir", worker_options->job_dir)->group("");
  auto* id_opt = w->add_option("--worker_id", worker_options->worker_id)->group("");
  id_opt->needs(job_dir_opt);
  w->callback([worker_options, join_options, wait_s, cpus, id_opt, exit_code] {
    const bool joining = id_opt->count() == 0;
    // Before any thread starts: the threads started later inherit it.
    if (!cpus->empty()) {
      StatusOr<std::vector<int>> list = ParseCpuList(*cpus);
      if (!list.ok()) {
        *exit_code = ReportRoleError(Annotate(list.status(), "--cpus"));
        return;
      }
      if (Status bound = BindToCpus(*list); !bound.ok()) {
        spdlog::warn("{}; running on the CPUs this worker was started with",
                     std::string(bound.message()));
      }
    }
    if (joining) {
      LabelLines("worker");
      if (join_options->credentials_file.empty()) {
        *exit_code = ReportRoleError(absl::InvalidArgumentError(
            "--credentials_file is required to join a job (a copy of the job directory's "
            "credentials file)"));
        return;
      }
      join_options->master_address = worker_options->master_address;
      join_options->wait_for_master =
          std::chrono::milliseconds(static_cast<int64_t>(*wait_s * 1000));
      StatusOr<worker::JoinedJob> joined = worker::JoinJob(*join_options);
      if (!joined.ok()) {
        *exit_code = ReportRoleError(joined.status());
        return;
      }
      worker_options->worker_id = joined->worker_id;
      worker_options->job_dir = joined->job_dir;
      spdlog::info("joined the job in {} as worker {}", joined->job_dir, joined->worker_id);
    }
    LabelLines(fmt::format("worker-{}", worker_options->worker_id));
    KeepFreedMemory();
    // SIGTERM: finish the current minibatch, report, exit 0.
    auto signals = WatchShutdown(&g_stop);
    if (!signals.ok()) {
      *exit_code = ReportRoleError(signals.status());
      return;
    }
    worker_options->stop = &g_stop;
    // A worker that joined by itself belongs to whoever started it.
    if (!joining) WatchForOrphaning([] { g_stop = true; });
    // A worker that joined by itself is not the master's to relaunch.
    const std::string reasons = joining ? "" : worker_options->job_dir;
    const std::string label = fmt::format("worker-{}", worker_options->worker_id);
    worker_options->end_process = [reasons, label](const Status& status) {
      const int code = EndRole(status, reasons, label);
      spdlog::default_logger()->flush();
      std::_Exit(code);
    };
    auto worker = worker::Worker::Create(*worker_options);
    if (!worker.ok()) {
      *exit_code = EndRole(worker.status(), reasons, label);
      return;
    }
    *exit_code = EndRole((*worker)->Run(), reasons, label);
  });
}

}  // namespace elasticdl::cli
