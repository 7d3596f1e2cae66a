#include "master/master_service.h"

#include "rpc/grpc_util.h"

namespace elasticdl::master {

grpc::Status MasterService::RegisterPs(grpc::ServerContext*,
                                       const proto::RegisterPsRequest* request,
                                       proto::RegisterPsResponse*) {
  return rpc::ToGrpc(state_->RegisterPs(*request));
}

grpc::Status MasterService::RegisterWorker(grpc::ServerContext*,
                                           const proto::RegisterWorkerRequest* request,
                                           proto::RegisterWorkerResponse* response) {
  return rpc::ToGrpc(state_->RegisterWorker(*request, response));
}

grpc::Status MasterService::GetTask(grpc::ServerContext*, const proto::GetTaskRequest* request,
                                    proto::GetTaskResponse* response) {
  return rpc::ToGrpc(state_->GetTask(*request, response));
}

grpc::Status MasterService::ReportTask(grpc::ServerContext*,
                                       const proto::ReportTaskRequest* request,
                                       proto::ReportTaskResponse*) {
  return rpc::ToGrpc(state_->ReportTask(*request));
}

grpc::Status MasterService::GetJobStatus(grpc::ServerContext*, const proto::GetJobStatusRequest*,
                                         proto::GetJobStatusResponse* response) {
  state_->GetStatus(response);
  return grpc::Status::OK;
}

}  // namespace elasticdl::master
