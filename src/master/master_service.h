// The gRPC face of the master: checks the job's token, then forwards each
// call to JobState.
#ifndef ELASTICDL_MASTER_MASTER_SERVICE_H_
#define ELASTICDL_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "common/doorbell.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "master/job_state.h"

namespace elasticdl::master {

// Requests to the master are small (the largest carry metric states); a
// bigger one is refused (RESOURCE_EXHAUSTED) rather than buffered.
inline constexpr int kMaxMasterRequestBytes = 16 << 20;

class MasterService final : public proto::Master::Service {
 public:
  // `state` may be set later (set_state): calls before that are answered
  // UNAVAILABLE. Not owned. An empty `token` accepts every caller. A call
  // that may change what the master's loop acts on (a registration, a task
  // handed out or reported, a scaling, a rendezvous) rings `changes` (may be
  // null; not owned) once answered; heartbeats and reads do not.
  MasterService(JobState* state, std::string token, Doorbell* changes = nullptr)
      : state_(state), token_(std::move(token)), changes_(changes) {}

  void set_state(JobState* state) { state_ = state; }
  // The dashboard: its URL, told in every GetJobStatus answer, and what
  // makes a login link for DashboardLogin.
  void set_dashboard(std::string url, std::function<StatusOr<std::string>()> new_login_url) {
    std::lock_guard<std::mutex> lock(mu_);
    dashboard_url_ = std::move(url);
    new_login_url_ = std::move(new_login_url);
  }

  // Waits until a GetJobStatus call has answered that the job finished, or
  // `timeout` passes; returns whether one did. A master that cannot leave
  // its final status in the job directory (a full disk) tells it this way.
  bool WaitForFinishedStatusRead(std::chrono::milliseconds timeout);

  grpc::Status RegisterPs(grpc::ServerContext* context, const proto::RegisterPsRequest* request,
                          proto::RegisterPsResponse* response) override;
  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const proto::RegisterWorkerRequest* request,
                              proto::RegisterWorkerResponse* response) override;
  grpc::Status Join(grpc::ServerContext* context, const proto::JoinRequest* request,
                    proto::JoinResponse* response) override;
  grpc::Status GetTask(grpc::ServerContext* context, const proto::GetTaskRequest* request,
                       proto::GetTaskResponse* response) override;
  grpc::Status ReportTask(grpc::ServerContext* context, const proto::ReportTaskRequest* request,
                          proto::ReportTaskResponse* response) override;
  grpc::Status GetJobStatus(grpc::ServerContext* context, const proto::GetJobStatusRequest* request,
                            proto::GetJobStatusResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const proto::HeartbeatRequest* request,
                         proto::HeartbeatResponse* response) override;
  grpc::Status Scale(grpc::ServerContext* context, const proto::ScaleRequest* request,
                     proto::ScaleResponse* response) override;
  grpc::Status Rendezvous(grpc::ServerContext* context, const proto::RendezvousRequest* request,
                          proto::RendezvousResponse* response) override;
  grpc::Status GroupStore(grpc::ServerContext* context, const proto::GroupStoreRequest* request,
                          proto::GroupStoreResponse* response) override;
  grpc::Status GroupState(grpc::ServerContext* context, const proto::GroupStateRequest* request,
                          proto::GroupStateResponse* response) override;
  grpc::Status DashboardLogin(grpc::ServerContext* context,
                              const proto::DashboardLoginRequest* request,
                              proto::DashboardLoginResponse* response) override;

 private:
  // Checks the token and that the state is there, then runs `call` on it
  // (rpc::GuardedCall).
  template <typename F>
  grpc::Status Serve(const grpc::ServerContext& context, F&& call);
  // As Serve, then rings `changes_`.
  template <typename F>
  grpc::Status ServeChange(const grpc::ServerContext& context, F&& call);

  std::atomic<JobState*> state_;
  const std::string token_;
  Doorbell* const changes_;
  std::mutex mu_;
  std::condition_variable finished_read_;
  bool finished_status_read_ = false;  // guarded by mu_
  std::string dashboard_url_;
  std::function<StatusOr<std::string>()> new_login_url_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MASTER_SERVICE_H_
