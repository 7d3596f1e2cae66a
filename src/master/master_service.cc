#include "master/master_service.h"

#include <exception>

#include "common/strings.h"
#include "rpc/grpc_util.h"
#include "rpc/job_token.h"

namespace elasticdl::master {

template <typename F>
grpc::Status MasterService::Serve(const grpc::ServerContext& context, F&& call) {
  grpc::Status auth = rpc::CheckToken(context, token_);
  if (!auth.ok()) return auth;
  JobState* state = state_.load();
  if (state == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the master is starting");
  }
  try {
    return rpc::ToGrpc(call(state));
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, StrCat("master: ", e.what()));
  }
}

grpc::Status MasterService::RegisterPs(grpc::ServerContext* context,
                                       const proto::RegisterPsRequest* request,
                                       proto::RegisterPsResponse*) {
  return Serve(*context, [&](JobState* s) { return s->RegisterPs(*request); });
}

grpc::Status MasterService::RegisterWorker(grpc::ServerContext* context,
                                           const proto::RegisterWorkerRequest* request,
                                           proto::RegisterWorkerResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->RegisterWorker(*request, response); });
}

grpc::Status MasterService::GetTask(grpc::ServerContext* context,
                                    const proto::GetTaskRequest* request,
                                    proto::GetTaskResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->GetTask(*request, response); });
}

grpc::Status MasterService::ReportTask(grpc::ServerContext* context,
                                       const proto::ReportTaskRequest* request,
                                       proto::ReportTaskResponse*) {
  return Serve(*context, [&](JobState* s) { return s->ReportTask(*request); });
}

grpc::Status MasterService::GetJobStatus(grpc::ServerContext* context,
                                         const proto::GetJobStatusRequest*,
                                         proto::GetJobStatusResponse* response) {
  return Serve(*context, [&](JobState* s) {
    s->GetStatus(response);
    return absl::OkStatus();
  });
}

grpc::Status MasterService::Heartbeat(grpc::ServerContext* context,
                                      const proto::HeartbeatRequest* request,
                                      proto::HeartbeatResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->Heartbeat(*request, response); });
}

grpc::Status MasterService::Scale(grpc::ServerContext* context, const proto::ScaleRequest* request,
                                  proto::ScaleResponse* response) {
  return Serve(*context, [&](JobState* s) { return s->Scale(*request, response); });
}

}  // namespace elasticdl::master
