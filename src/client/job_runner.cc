#include "client/job_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "client/job_control.h"
#include "client/progress.h"
#include "cluster/backends.h"
#include "cluster/output_relay.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "job/job_spec.h"
#include "job/worker_seconds.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"

namespace elasticdl::client {
namespace {

using std::chrono::milliseconds;

// Copies the complete lines that files under `dir` gained since the last
// call to the sink (a backend's log files, labelled already).
class LogFollower {
 public:
  LogFollower(std::string dir, cluster::LogSink* sink) : dir_(std::move(dir)), sink_(sink) {}

  void Poll() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      const std::string path = entry.path().string();
      FILE* f = std::fopen(path.c_str(), "r");
      if (f == nullptr) continue;
      int64_t& offset = offsets_[path];
      std::fseek(f, static_cast<long>(offset), SEEK_SET);
      std::string text;
      char buf[8192];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
      std::fclose(f);
      size_t end = text.rfind('\n');
      if (end == std::string::npos) continue;
      offset += static_cast<int64_t>(end + 1);
      sink_->Line("", std::string_view(text).substr(0, end + 1));
    }
  }

 private:
  const std::string dir_;
  cluster::LogSink* const sink_;
  std::map<std::string, int64_t> offsets_;
};

}  // namespace

StatusOr<proto::GetJobStatusResponse> RunJob(const RunJobOptions& options) {
  const std::string& job_dir = options.job_dir;
  auto cancelled = [&options] { return options.cancel != nullptr && options.cancel->load(); };
  EDL_ASSIGN_OR_RETURN(rpc::JobCredentials credentials, rpc::ReadJobCredentials(job_dir));
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(job_dir));

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> log(nullptr, &std::fclose);
  if (!options.log_file.empty()) {
    // The log carries the dashboard's URL: readable by this user only, and
    // never written through a link.
    const int fd = ::open(options.log_file.c_str(),
                          O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) log.reset(::fdopen(fd, "a"));
    if (log == nullptr) {
      if (fd >= 0) ::close(fd);
      return absl::InternalError(
          StrCat("cannot open ", options.log_file, ": ", std::strerror(errno)));
    }
  }
  cluster::LogSink sink(log != nullptr ? log.get() : stderr);
  // The master and every process of the job on this machine write here, for
  // as long as the job runs, whichever master started them.
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::OutputRelay> relay,
                       cluster::OutputRelay::Create(&sink));
  std::mutex mu;
  std::optional<cluster::ProcessExit> master_exit;
  cluster::BackendConfig config;
  config.kind = spec.cluster().kind().empty() ? "local" : spec.cluster().kind();
  config.binary = spec.cluster().binary();
  config.job_dir = job_dir;
  config.job_name = spec.job_name();
  config.partition = spec.cluster().partition();
  config.kubernetes = spec.cluster().kubernetes();
  config.output_fd = relay->write_fd();
  config.environment = ReadEnvironment();
  config.detached_master = options.detach;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::ClusterBackend> backend,
                       cluster::MakeBackend(config, [&](const cluster::ProcessExit& e) {
                         if (e.process != cluster::ProcessName::Master()) return;
                         std::lock_guard<std::mutex> lock(mu);
                         master_exit = e;
                       }));
  EDL_ASSIGN_OR_RETURN(cluster::ProcessHandle master_handle, backend->StartMaster());
  const std::string master_name = backend->Describe(master_handle);
  sink.Line("client", StrCat("master started: ", master_name, " (", spec.job_name(),
                             "); job directory ", job_dir));
  if (options.detach) {
    proto::GetJobStatusResponse status;
    status.set_message(
        StrCat(master_name, "; follow it with `elasticdl job status ", job_dir, "`"));
    return status;
  }

  ProgressBar bar(&sink, options.progress);
  std::optional<LogFollower> logs;
  if (!backend->log_dir().empty()) logs.emplace(backend->log_dir(), &sink);
  const int max_restarts = spec.fault_tolerance().max_master_restarts();
  std::unique_ptr<proto::Master::Stub> master;
  std::string master_address;
  std::string dashboard;
  std::optional<cluster::ProcessExit> ended;
  bool signalled = false;
  int restarts = 0;
  // Why the master said the job failed, should it end without a final
  // status (one that cannot write its journal cannot write that either).
  std::string reported_failure;
  // The master is asked for the job's status as often as a progress bar is
  // redrawn, and once a second when none is: each question is a call the
  // master answers on the cores the job trains on.
  const milliseconds status_every = options.progress ? milliseconds(200) : milliseconds(1000);
  auto next_status = std::chrono::steady_clock::now();
  while (true) {
    if (logs) logs->Poll();
    std::optional<cluster::ProcessExit> exited;
    {
      std::lock_guard<std::mutex> lock(mu);
      exited = master_exit;
    }
    if (exited) {
      // A master that ends without a final status died: start it again on
      // the same job directory, unless we are stopping or someone ended it
      // on purpose (scancel).
      if (ReadFinalStatus(job_dir).ok() || cancelled() || exited->cancelled ||
          restarts >= max_restarts) {
        ended = exited;
        break;
      }
      ++restarts;
      sink.Line("client", StrCat("the master ended (", exited->description, "); restarting it (",
                                 restarts, " of ", max_restarts, ")"));
      {
        std::lock_guard<std::mutex> lock(mu);
        master_exit.reset();
      }
      EDL_RETURN_IF_ERROR(backend->StartMaster().status());
      master.reset();  // found again once the new master serves
    }
    if (cancelled() && !signalled) {
      signalled = true;
      sink.Line("client", "stopping the job");
      // The master stops its parameter servers and workers, then itself.
      backend->Signal(cluster::ProcessName::Master(), SIGTERM).IgnoreError();
    }
    // The job's master is found once (again after a restart) from the
    // address it leaves in the job directory, and watched through its RPC.
    if (master == nullptr) {
      auto address = ReadFileToString(MasterAddressFile(job_dir));
      if (address.ok()) {
        master = proto::Master::NewStub(rpc::MakeChannel(*address, credentials));
        if (*address != master_address && !backend->starts_workers()) {
          sink.Line("client", StrCat("workers join with: elasticdl worker --master=", *address,
                                     " --credentials_file=", CredentialsFile(job_dir)));
        }
        master_address = *address;
      }
    }
    if (master != nullptr && std::chrono::steady_clock::now() >= next_status) {
      next_status = std::chrono::steady_clock::now() + status_every;
      proto::GetJobStatusRequest request;
      proto::GetJobStatusResponse status;
      auto context = rpc::MakeContext(milliseconds(500), credentials.token);
      const bool answered = master->GetJobStatus(context.get(), request, &status).ok();
      // A master started again on another node writes its new address.
      if (!answered && CurrentMasterAddress(job_dir, master_address) != master_address) {
        master.reset();
      }
      if (answered) {
        bar.Update(status);
        reported_failure = status.failed() ? status.message() : std::string();
        if (!status.dashboard_url().empty() && status.dashboard_url() != dashboard) {
          // A link good for one login while this master lives: the log
          // keeps nothing that opens the job later.
          dashboard = status.dashboard_url();
          proto::DashboardLoginResponse login;
          auto login_context = rpc::MakeContext(milliseconds(2000), credentials.token);
          const bool have_login = master->DashboardLogin(login_context.get(), {}, &login).ok();
          sink.Line("client", StrCat("dashboard: ", have_login ? login.login_url() : dashboard));
        }
      }
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  if (logs) {
    // Its last words may still be on their way to the file.
    std::this_thread::sleep_for(milliseconds(500));
    logs->Poll();
  }
  bar.Finish();
  backend->StopAll(milliseconds(1000));
  relay->Stop(milliseconds(500));
  // The servers' sockets, and the links to them by address, name processes
  // that have ended; the private directory stays for a job run again on
  // this directory (an experiment's trial resumed).
  std::error_code ec;
  for (std::filesystem::directory_iterator it(SocketsDir(job_dir), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code ignored;
    std::filesystem::remove(it->path(), ignored);
  }

  auto final_status = ReadFinalStatus(job_dir);
  if (cancelled()) return absl::CancelledError("job cancelled");
  if (!final_status.ok() && !reported_failure.empty()) {
    return absl::AbortedError(StrCat(reported_failure, " (the master, ", master_name, ", ended (",
                                     ended->description, ") without a final status)"));
  }
  if (!final_status.ok()) {
    return absl::InternalError(
        StrCat("the master (", master_name, ") ended (", ended->description,
               ") without a final status; see ",
               logs ? backend->log_dir() + "/master.log" : std::string("its log above")));
  }
  if (final_status->failed()) return absl::AbortedError(final_status->message());
  return *final_status;
}

StatusOr<JobResult> RunJobToResult(const RunJobOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(proto::GetJobStatusResponse status, RunJob(options));
  JobResult result;
  if (options.detach) result.detached = status.message();
  result.model_version = status.model_version();
  result.records = status.records_done();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.training_seconds = status.training_seconds();
  result.goodput = job::Goodput(status.worker_seconds());
  result.worker_time = job::DescribeWorkerSeconds(status.worker_seconds());
  result.metrics.insert(status.eval_metrics().begin(), status.eval_metrics().end());
  result.metrics_model_version = status.eval_model_version();
  if (!status.stop_reason().empty()) result.stopped_early = status.message();
  result.output = spec.output();
  result.job_dir = spec.job_dir();
  result.seed = spec.seed();
  return result;
}

}  // namespace elasticdl::client
