// The gRPC face of the master: forwards each call to JobState.
#ifndef ELASTICDL_MASTER_MASTER_SERVICE_H_
#define ELASTICDL_MASTER_MASTER_SERVICE_H_

#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "master/job_state.h"

namespace elasticdl::master {

class MasterService final : public proto::Master::Service {
 public:
  explicit MasterService(JobState* state) : state_(state) {}

  grpc::Status RegisterPs(grpc::ServerContext* context, const proto::RegisterPsRequest* request,
                          proto::RegisterPsResponse* response) override;
  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const proto::RegisterWorkerRequest* request,
                              proto::RegisterWorkerResponse* response) override;
  grpc::Status GetTask(grpc::ServerContext* context, const proto::GetTaskRequest* request,
                       proto::GetTaskResponse* response) override;
  grpc::Status ReportTask(grpc::ServerContext* context, const proto::ReportTaskRequest* request,
                          proto::ReportTaskResponse* response) override;
  grpc::Status GetJobStatus(grpc::ServerContext* context, const proto::GetJobStatusRequest* request,
                            proto::GetJobStatusResponse* response) override;

 private:
  JobState* const state_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MASTER_SERVICE_H_
