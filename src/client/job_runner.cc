#include "client/job_runner.h"

#include <google/protobuf/text_format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <thread>

#include "client/progress.h"
#include "cluster/process_group.h"
#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "rpc/grpc_util.h"

namespace elasticdl::client {
namespace {

using std::chrono::milliseconds;

StatusOr<proto::GetJobStatusResponse> ReadFinalStatus(const std::string& job_dir) {
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(job_dir + "/status.pbtxt"));
  proto::GetJobStatusResponse status;
  if (!google::protobuf::TextFormat::ParseFromString(text, &status)) {
    return absl::DataLossError(job_dir + "/status.pbtxt: not a job status");
  }
  return status;
}

}  // namespace

StatusOr<proto::GetJobStatusResponse> RunJob(const std::string& job_dir, bool progress,
                                             const std::atomic<bool>* cancel) {
  auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  cluster::LogSink sink(stderr);
  std::atomic<bool> master_exited{false};
  std::optional<cluster::ExitStatus> master_status;
  std::mutex mu;
  cluster::ProcessGroup group(&sink, [&](const std::string&, pid_t, cluster::ExitStatus s) {
    std::lock_guard<std::mutex> lock(mu);
    master_status = s;
    master_exited = true;
  });
  std::error_code ec;
  cluster::ProcessSpec spec;
  spec.label = "master";
  // The master labels its own lines and its children's.
  spec.label_output = false;
  spec.argv = {std::filesystem::read_symlink("/proc/self/exe", ec).string(), "master",
               "--job_dir=" + job_dir};
  spec.new_process_group = true;
  EDL_RETURN_IF_ERROR(group.Start(spec));

  ProgressBar bar(&sink, progress);
  std::unique_ptr<proto::Master::Stub> master;
  bool signalled = false;
  while (!master_exited) {
    if (cancelled() && !signalled) {
      signalled = true;
      sink.Line("client", "stopping the job");
      group.Signal("master", SIGTERM).IgnoreError();
    }
    if (master == nullptr) {
      auto address = ReadFileToString(job_dir + "/master.addr");
      if (address.ok()) master = proto::Master::NewStub(rpc::MakeChannel(*address));
    }
    if (master != nullptr) {
      proto::GetJobStatusRequest request;
      proto::GetJobStatusResponse status;
      auto context = rpc::MakeContext(milliseconds(500));
      if (master->GetJobStatus(context.get(), request, &status).ok()) bar.Update(status);
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  bar.Finish();
  group.StopAll(milliseconds(1000));

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
