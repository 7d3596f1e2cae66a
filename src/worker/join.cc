#include "worker/join.h"

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "job/job_spec.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"

namespace elasticdl::worker {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// The job's data paths must exist here as they did where the master
// indexed them; a glob's directory must.
Status CheckDataVisible(const proto::TaskSpec& tasks) {
  for (const auto* paths :
       {&tasks.training_data(), &tasks.validation_data(), &tasks.prediction_data()}) {
    for (const std::string& path : *paths) {
      std::string check = path;
      if (path.find_first_of("*?[") != std::string::npos) {
        check = fs::path(path).parent_path().string();
      }
      std::error_code ec;
      if (!fs::exists(check, ec)) {
        return absl::FailedPreconditionError(
            StrCat("the job's data ", path, " is not visible on this host (", check,
                   " does not exist): data, the job directory and outputs must be on a filesystem "
                   "every host sees, at the same path"));
      }
    }
  }
  return absl::OkStatus();
}

// gRPC's words for a TLS handshake the other side refused ("Ssl handshake
// failed: SSL_ERROR_SSL: ... certificate verify failed"), as opposed to a
// master not listening yet, or a handshake cut short ("handshaker shutdown":
// the call's deadline passed on a busy machine), which a retry gets past.
bool IsHandshakeFailure(const Status& status) {
  const std::string m(status.message());
  return m.find("andshake failed") != std::string::npos || m.find("SSL_ERROR") != std::string::npos;
}

}  // namespace

StatusOr<JoinedJob> JoinJob(const JoinOptions& options) {
  StatusOr<rpc::JobCredentials> credentials = rpc::ReadCredentialsFile(options.credentials_file);
  if (!credentials.ok()) {
    return Annotate(credentials.status(), StrCat("--credentials_file=", options.credentials_file));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  proto::JoinRequest request;
  request.set_host(host);
  request.set_pid(::getpid());
  proto::JoinResponse response;
  auto master = proto::Master::NewStub(rpc::MakeChannel(options.master_address, *credentials));
  const auto deadline = std::chrono::steady_clock::now() + options.wait_for_master;
  Status last;
  while (true) {
    auto context = rpc::MakeContext(milliseconds(3000), credentials->token);
    last = rpc::FromGrpc(master->Join(context.get(), request, &response));
    if (last.ok()) break;
    if (last.code() == absl::StatusCode::kUnauthenticated) {
      return absl::UnauthenticatedError(
          StrCat("the master at ", options.master_address, " refused the credentials in ",
                 options.credentials_file, ": is it this job's credentials file?"));
    }
    // A master of the job's CA that will not shake hands with this
    // certificate (another job's, an earlier run's) answers no better later.
    if (last.code() == absl::StatusCode::kUnavailable && IsHandshakeFailure(last)) {
      return absl::UnauthenticatedError(
          StrCat("the master at ", options.master_address,
                 " refused the TLS handshake with the certificate in ", options.credentials_file,
                 " (or holds a certificate of another CA): is it a copy of this job's credentials "
                 "file, <job_dir>/credentials, as the job's latest run wrote it? (",
                 last.message(), ")"));
    }
    if (last.code() != absl::StatusCode::kUnavailable &&
        last.code() != absl::StatusCode::kDeadlineExceeded) {
      return Annotate(last, StrCat("joining the job at ", options.master_address));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(StrCat("cannot reach the master at ", options.master_address,
                                           " (tried for ", options.wait_for_master.count() / 1000.0,
                                           " s): ", last.message()));
    }
    std::this_thread::sleep_for(milliseconds(500));
    // A fresh channel connects at once instead of backing off.
    master = proto::Master::NewStub(rpc::MakeChannel(options.master_address, *credentials));
  }
  JoinedJob joined;
  joined.worker_id = response.worker_id();
  joined.job_dir = response.job_dir();
  StatusOr<proto::JobSpec> spec = ReadJobSpec(joined.job_dir);
  if (!spec.ok()) {
    return absl::FailedPreconditionError(
        StrCat("the job directory ", joined.job_dir, " of the master at ", options.master_address,
               " cannot be read on this host (", spec.status().message(),
               "): the job directory, data and outputs must be on a filesystem every host sees, "
               "at the same path"));
  }
  EDL_RETURN_IF_ERROR(CheckDataVisible(spec->tasks()));
  return joined;
}

}  // namespace elasticdl::worker
