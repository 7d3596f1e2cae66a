#include "client/job_runner.h"

#include <sys/prctl.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "client/job_control.h"
#include "client/progress.h"
#include "cluster/command.h"
#include "cluster/output_relay.h"
#include "cluster/process_group.h"
#include "cluster/slurm_backend.h"
#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/job_spec.h"
#include "rpc/job_token.h"

namespace elasticdl::client {
namespace {

using std::chrono::milliseconds;

// Reaps children that are not `keep` (the master, which its Process object
// reaps): processes of the job reparented to us when their master died.
void ReapOrphans(pid_t keep) {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (info.si_pid == keep) return;
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

// Copies the complete lines that files under `dir` gained since the last
// call to the sink (the logs of a job's Slurm jobs, labelled already).
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

StatusOr<proto::GetJobStatusResponse> RunOnSlurm(const RunJobOptions& options,
                                                 const std::string& token) {
  const std::string& job_dir = options.job_dir;
  auto cancelled = [&options] { return options.cancel != nullptr && options.cancel->load(); };
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, rpc::ReadJobSpec(job_dir));
  EDL_RETURN_IF_ERROR(CreateDirectories(job_dir + "/logs"));
  std::error_code ec;
  std::string binary = spec.cluster().binary();
  if (binary.empty()) binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  EDL_ASSIGN_OR_RETURN(
      std::string slurm_id,
      cluster::SubmitSlurmJob(
          spec.job_name(), job_dir + "/logs/master.log", options.partition, 1,
          StrCat(cluster::ShellQuote(binary), " master --job_dir=", cluster::ShellQuote(job_dir))));
  EDL_RETURN_IF_ERROR(rpc::WriteFileAtomically(job_dir + "/slurm_job_id", slurm_id));
  cluster::LogSink sink(stderr);
  sink.Line("client", StrCat("submitted to Slurm as job ", slurm_id, " (", spec.job_name(),
                             "); job directory ", job_dir));
  if (options.detach) {
    proto::GetJobStatusResponse status;
    status.set_message(StrCat("Slurm job ", slurm_id, "; follow it with `elasticdl job status ",
                              job_dir, "`, stop it with `scancel ", slurm_id, "`"));
    return status;
  }
  ProgressBar bar(&sink, options.progress);
  LogFollower logs(job_dir + "/logs", &sink);
  std::unique_ptr<proto::Master::Stub> master;
  std::string master_address;
  std::string ended;  // the master's final Slurm state
  bool signalled = false;
  auto last_query = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  while (!ReadFinalStatus(job_dir).ok()) {
    logs.Poll();
    if (cancelled() && !signalled) {
      signalled = true;
      sink.Line("client", "stopping the job");
      // The master stops its parameter servers and workers, then itself.
      cluster::RunCommand({"scancel", "--batch", "--signal=TERM", slurm_id}).IgnoreError();
    }
    if (std::chrono::steady_clock::now() - last_query > std::chrono::seconds(3)) {
      last_query = std::chrono::steady_clock::now();
      StatusOr<std::vector<cluster::SlurmJobState>> states = cluster::QuerySlurmJobs({slurm_id});
      if (states.ok()) {
        std::string state = states->empty() ? "GONE" : (*states)[0].state;
        if (cluster::SlurmStateIsFinal(state)) {
          ended = state;
          if (!states->empty() && (*states)[0].reason != "None") {
            ended += " (" + (*states)[0].reason + ")";
          }
          // Its last words may still be on their way to the file.
          std::this_thread::sleep_for(milliseconds(500));
          break;
        }
        if (state == "PENDING" && master == nullptr) {
          bar.Update(proto::GetJobStatusResponse());
        }
      }
    }
    auto address = ReadFileToString(job_dir + "/master.addr");
    if (address.ok() && *address != master_address) {
      master_address = *address;
      master = proto::Master::NewStub(rpc::MakeChannel(master_address));
    }
    if (master != nullptr) {
      proto::GetJobStatusRequest request;
      proto::GetJobStatusResponse status;
      auto context = rpc::MakeContext(milliseconds(500), token);
      if (master->GetJobStatus(context.get(), request, &status).ok()) bar.Update(status);
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  logs.Poll();
  bar.Finish();
  auto final_status = ReadFinalStatus(job_dir);
  if (cancelled()) return absl::CancelledError("job cancelled");
  if (!final_status.ok()) {
    return absl::InternalError(StrCat("the master's Slurm job ", slurm_id, " ended (", ended,
                                      ") without a final status; see ", job_dir,
                                      "/logs/master.log"));
  }
  if (final_status->failed()) return absl::AbortedError(final_status->message());
  return *final_status;
}

}  // namespace

StatusOr<proto::GetJobStatusResponse> RunJob(const RunJobOptions& options) {
  const std::string& job_dir = options.job_dir;
  auto cancelled = [&options] { return options.cancel != nullptr && options.cancel->load(); };
  EDL_ASSIGN_OR_RETURN(std::string token, rpc::ReadJobToken(job_dir));
  if (options.cluster == "slurm") return RunOnSlurm(options, token);
  // Workers and parameter servers outlive a master that dies; they become
  // ours then, for a restarted master to adopt.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  cluster::LogSink sink(stderr);
  // The master and every process of the job write here, for as long as the
  // job runs, whichever master started them.
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::OutputRelay> relay,
                       cluster::OutputRelay::Create(&sink));
  std::mutex mu;
  std::optional<cluster::ExitStatus> master_status;
  cluster::ProcessGroup group(&sink, [&](const std::string&, pid_t, cluster::ExitStatus s) {
    std::lock_guard<std::mutex> lock(mu);
    master_status = s;
  });
  std::error_code ec;
  cluster::ProcessSpec spec;
  spec.label = "master";
  // The master and the job's processes label their own lines.
  spec.output_fd = relay->write_fd();
  spec.argv = {std::filesystem::read_symlink("/proc/self/exe", ec).string(), "master",
               "--job_dir=" + job_dir};
  spec.new_process_group = true;
  // Each master leads a process group holding the processes it started;
  // whatever of them is left at the end goes with it.
  std::vector<pid_t> master_groups;
  auto start_master = [&]() -> Status {
    EDL_RETURN_IF_ERROR(group.Start(spec));
    if (std::optional<pid_t> pid = group.pid("master")) master_groups.push_back(*pid);
    return absl::OkStatus();
  };
  EDL_RETURN_IF_ERROR(start_master());

  ProgressBar bar(&sink, options.progress);
  std::unique_ptr<proto::Master::Stub> master;
  std::string master_address;
  bool signalled = false;
  int restarts = 0;
  while (true) {
    std::optional<cluster::ExitStatus> exited;
    {
      std::lock_guard<std::mutex> lock(mu);
      exited = master_status;
    }
    if (exited) {
      // A master that ends without a final status died: restart it on the
      // same job directory, unless we are stopping.
      bool final = ReadFinalStatus(job_dir).ok();
      if (final || cancelled() || restarts >= options.max_master_restarts) break;
      ++restarts;
      sink.Line("client", StrCat("the master ended (", exited->ToString(), "); restarting it (",
                                 restarts, " of ", options.max_master_restarts, ")"));
      {
        std::lock_guard<std::mutex> lock(mu);
        master_status.reset();
      }
      EDL_RETURN_IF_ERROR(start_master());
    }
    if (cancelled() && !signalled) {
      signalled = true;
      sink.Line("client", "stopping the job");
      group.Signal("master", SIGTERM).IgnoreError();
    }
    auto address = ReadFileToString(job_dir + "/master.addr");
    if (address.ok() && *address != master_address) {
      master_address = *address;
      master = proto::Master::NewStub(rpc::MakeChannel(master_address));
      if (options.cluster == "external") {
        sink.Line("client", StrCat("workers join with: elasticdl worker --master=", master_address,
                                   " --token_file=", rpc::JobTokenPath(job_dir)));
      }
    }
    if (master != nullptr) {
      proto::GetJobStatusRequest request;
      proto::GetJobStatusResponse status;
      auto context = rpc::MakeContext(milliseconds(500), token);
      if (master->GetJobStatus(context.get(), request, &status).ok()) bar.Update(status);
    }
    ReapOrphans(group.pid("master").value_or(-1));
    std::this_thread::sleep_for(milliseconds(200));
  }
  bar.Finish();
  group.StopAll(milliseconds(1000));
  for (pid_t pgid : master_groups) ::kill(-pgid, SIGKILL);
  // Reap them (the master is reaped already); give up after a second.
  for (int i = 0; i < 100 && ::waitpid(-1, nullptr, WNOHANG) >= 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  relay->Stop(milliseconds(500));

  auto final_status = ReadFinalStatus(job_dir);
  if (cancelled()) return absl::CancelledError("job cancelled");
  if (!final_status.ok()) {
    std::lock_guard<std::mutex> lock(mu);
    return absl::InternalError(StrCat("the master ended (",
                                      master_status ? master_status->ToString() : "?",
                                      ") without a final status; see its log above"));
  }
  if (final_status->failed()) return absl::AbortedError(final_status->message());
  return *final_status;
}

}  // namespace elasticdl::client
