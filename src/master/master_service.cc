#include "master/master_service.h"

#include <utility>

#include "rpc/job_token.h"

namespace elasticdl::master {

template <typename F>
grpc::Status MasterService::Serve(const grpc::ServerContext& context, F&& call) {
  return rpc::GuardedCall(context, token_, "master", [&]() -> Status {
    JobState* state = state_.load();
    if (state == nullptr) return absl::UnavailableError("the master is starting");
    return call(state);
  });
}

template <typename F>
grpc::Status MasterService::ServeChange(const grpc::ServerContext& context, F&& call) {
  grpc::Status answer = Serve(context, std::forward<F>(call));
  if (changes_ != nullptr) changes_->Ring();
  return answer;
}

grpc::Status MasterService::RegisterPs(grpc::ServerContext* context,
                                       const proto::RegisterPsRequest* request,
                                       proto::RegisterPsResponse*) {
  return ServeChange(*context, [&](JobState* s) { return s->RegisterPs(*request); });
}

grpc::Status MasterService::RegisterWorker(grpc::ServerContext* context,
                                           const proto::RegisterWorkerRequest* request,
                                           proto::RegisterWorkerResponse* response) {
  return ServeChange(*context, [&](JobState* s) { return s->RegisterWorker(*request, response); });
}

grpc::Status MasterService::Join(grpc::ServerContext* context, const proto::JoinRequest* request,
                                 proto::JoinResponse* response) {
  return ServeChange(*context, [&](JobState* s) { return s->Join(*request, response); });
}

grpc::Status MasterService::GetTask(grpc::ServerContext* context,
                                    const proto::GetTaskRequest* request,
                                    proto::GetTaskResponse* response) {
  return ServeChange(*context, [&](JobState* s) { return s->GetTask(*request, response); });
}

grpc::Status MasterService::ReportTask(grpc::ServerContext* context,
                                       const proto::ReportTaskRequest* request,
                                       proto::ReportTaskResponse*) {
  return ServeChange(*context, [&](JobState* s) { return s->ReportTask(*request); });
}

grpc::Status MasterService::GetJobStatus(grpc::ServerContext* context,
                                         const proto::GetJobStatusRequest*,
                                         proto::GetJobStatusResponse* response) {
  return Serve(*context, [&](JobState* s) {
    s->GetStatus(response);
    std::lock_guard<std::mutex> lock(mu_);
    response->set_dashboard_url(dashboard_url_);
    if (response->finished()) {
      finished_status_read_ = true;
      finished_read_.notify_all();
    }
    return absl::OkStatus();
  });
}

bool MasterService::WaitForFinishedStatusRead(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return finished_read_.wait_for(lock, timeout, [this] { return finished_status_read_; });
}

grpc::Status MasterService::DashboardLogin(grpc::ServerContext* context,
                                           const proto::DashboardLoginRequest*,
                                           proto::DashboardLoginResponse* response) {
  return Serve(*context, [&](JobState*) -> Status {
    std::function<StatusOr<std::string>()> new_login_url;
    {
      std::lock_guard<std::mutex> lock(mu_);
      new_login_url = new_login_url_;
    }
    if (!new_login_url) return absl::NotFoundError("the job has no dashboard");
    EDL_ASSIGN_OR_RETURN(std::string url, new_login_url());
    response->set_login_url(url);
    return absl::OkStatus();
  });
}

grpc::Status MasterService::Heartbeat(grpc::ServerContext* context,
                                      const proto::HeartbeatRequest* request,
                                      proto::HeartbeatResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->Heartbeat(*request, response); });
}

grpc::Status MasterService::Rendezvous(grpc::ServerContext* context,
                                       const proto::RendezvousRequest* request,
                                       proto::RendezvousResponse* response) {
  return ServeChange(*context, [&](JobState* s) { return s->Rendezvous(*request, response); });
}

grpc::Status MasterService::GroupStore(grpc::ServerContext* context,
                                       const proto::GroupStoreRequest* request,
                                       proto::GroupStoreResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->GroupStore(*request, response); });
}

grpc::Status MasterService::GroupState(grpc::ServerContext* context,
                                       const proto::GroupStateRequest* request,
                                       proto::GroupStateResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->GroupState(*request, response); });
}

grpc::Status MasterService::Scale(grpc::ServerContext* context, const proto::ScaleRequest* request,
                                  proto::ScaleResponse* response) {
  return ServeChange(*context, [&](JobState* s) { return s->Scale(*request, response); });
}

}  // namespace elasticdl::master
