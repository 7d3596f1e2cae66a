#include "client/dashboard.h"

#include <chrono>
#include <thread>

#include "client/job_control.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "dashboard/job_view.h"
#include "dashboard/log_tail.h"
#include "dashboard/server.h"
#include "job/job_spec.h"
#include "rpc/job_credentials.h"

namespace elasticdl::client {

Status ServeDashboard(const ServeDashboardOptions& options) {
  const std::string& job_dir = options.job_dir;
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, ReadJobSpec(job_dir));
  EDL_ASSIGN_OR_RETURN(rpc::JobCredentials credentials, rpc::ReadJobCredentials(job_dir));
  // The status: the final one once the job ended, else its master's; none
  // when neither answers (a master that died).
  dashboard::JobView view({spec.job_name()}, [job_dir]() -> nlohmann::json {
    StatusOr<proto::GetJobStatusResponse> status = GetJobStatus(job_dir);
    if (!status.ok()) return {{"message", std::string(status.status().message())}};
    return dashboard::StatusToJson(*status);
  });
  dashboard::LogTail tail(EventLogFile(job_dir));
  const auto apply = [&view](const nlohmann::json& event) { view.Apply(event); };
  tail.Poll(apply);
  dashboard::ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.token = credentials.token;
  server_options.tls_certificate = credentials.certificate;
  server_options.tls_private_key = credentials.private_key;
  server_options.web_dir = ReadEnvironment().web_dir;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<dashboard::Server> server,
                       dashboard::Server::Start(server_options, &view));
  if (options.on_serving) {
    EDL_ASSIGN_OR_RETURN(std::string login, server->NewLoginUrl());
    options.on_serving(login);
  }
  while (options.cancel == nullptr || !options.cancel->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    tail.Poll(apply);
  }
  server->Stop();
  return absl::OkStatus();
}

}  // namespace elasticdl::client
