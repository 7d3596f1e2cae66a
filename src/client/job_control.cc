#include "client/job_control.h"

#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <filesystem>

#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "job/job_spec.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

struct Connection {
  std::unique_ptr<proto::Master::Stub> stub;
  rpc::JobCredentials credentials;
  std::string address;
};

StatusOr<Connection> Connect(const std::string& job_dir) {
  Connection c;
  StatusOr<std::string> address = ReadFileToString(MasterAddressFile(job_dir));
  if (!address.ok()) {
    return absl::FailedPreconditionError(
        StrCat(job_dir, ": the job has no master address (not started yet, or not a job)"));
  }
  c.address = *address;
  EDL_ASSIGN_OR_RETURN(c.credentials, rpc::ReadJobCredentials(job_dir));
  c.stub = proto::Master::NewStub(rpc::MakeChannel(c.address, c.credentials));
  return c;
}

Status Unreachable(const Connection& c, const std::string& job_dir, const grpc::Status& s) {
  Status status = rpc::FromGrpc(s);
  if (rpc::IsUnreachable(status)) {
    return absl::UnavailableError(StrCat("the master of ", job_dir, " (", c.address,
                                         ") does not answer; has the job ended? ",
                                         status.message()));
  }
  return status;
}

}  // namespace

StatusOr<std::string> FindJobDir(const std::string& job) {
  std::error_code ec;
  if (fs::exists(JobSpecFile(job), ec)) return fs::absolute(job, ec).string();
  const fs::path root = DefaultJobsRoot(ReadEnvironment());
  fs::path newest;
  fs::file_time_type newest_time;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(job + "-", 0) != 0 || !fs::exists(JobSpecFile(entry.path().string()), ec))
      continue;
    auto time = fs::last_write_time(entry.path(), ec);
    if (newest.empty() || time > newest_time) {
      newest = entry.path();
      newest_time = time;
    }
  }
  if (newest.empty()) {
    return absl::NotFoundError(StrCat("no job '", job, "': not a job directory, and no job of ",
                                      "that name under ", root.string()));
  }
  return newest.string();
}

StatusOr<proto::GetJobStatusResponse> ReadFinalStatus(const std::string& job_dir) {
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(FinalStatusFile(job_dir)));
  proto::GetJobStatusResponse status;
  if (!google::protobuf::TextFormat::ParseFromString(text, &status)) {
    return absl::DataLossError(job_dir + "/status.pbtxt: not a job status");
  }
  return status;
}

StatusOr<proto::GetJobStatusResponse> GetJobStatus(const std::string& job_dir,
                                                   std::chrono::milliseconds timeout) {
  if (auto final_status = ReadFinalStatus(job_dir); final_status.ok()) return final_status;
  EDL_ASSIGN_OR_RETURN(Connection c, Connect(job_dir));
  auto context = rpc::MakeContext(timeout, c.credentials.token);
  proto::GetJobStatusResponse response;
  grpc::Status s = c.stub->GetJobStatus(context.get(), proto::GetJobStatusRequest(), &response);
  if (!s.ok()) return Unreachable(c, job_dir, s);
  return response;
}

Status ScaleJob(const std::string& job_dir, int num_workers, std::chrono::milliseconds timeout) {
  EDL_ASSIGN_OR_RETURN(Connection c, Connect(job_dir));
  auto context = rpc::MakeContext(timeout, c.credentials.token);
  proto::ScaleRequest request;
  request.set_num_workers(num_workers);
  proto::ScaleResponse response;
  grpc::Status s = c.stub->Scale(context.get(), request, &response);
  if (!s.ok()) return Unreachable(c, job_dir, s);
  return absl::OkStatus();
}

StatusOr<std::string> DashboardLoginUrl(const std::string& job_dir,
                                        std::chrono::milliseconds timeout) {
  EDL_ASSIGN_OR_RETURN(Connection c, Connect(job_dir));
  auto context = rpc::MakeContext(timeout, c.credentials.token);
  proto::DashboardLoginResponse response;
  grpc::Status s = c.stub->DashboardLogin(context.get(), {}, &response);
  if (!s.ok()) return Unreachable(c, job_dir, s);
  return response.login_url();
}

}  // namespace elasticdl::client
