#include "worker/peers.h"

#include <spdlog/spdlog.h>

#include <mutex>

#include "common/job_dir.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/ps_client.h"

namespace elasticdl::worker {
namespace {

using std::chrono::milliseconds;

// At most this often a failing channel is replaced by a new one.
constexpr milliseconds kChannelRenewal{500};

class GrpcMaster : public MasterClient {
 public:
  GrpcMaster(std::string address, rpc::JobCredentials credentials, std::string job_dir)
      : address_(std::move(address)),
        credentials_(std::move(credentials)),
        job_dir_(std::move(job_dir)),
        stub_(proto::Master::NewStub(rpc::MakeChannel(address_, credentials_))) {}

  Status RegisterWorker(const proto::RegisterWorkerRequest& request,
                        proto::RegisterWorkerResponse* response, milliseconds timeout) override {
    return Call(&proto::Master::Stub::RegisterWorker, request, response, timeout);
  }
  Status GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response,
                 milliseconds timeout) override {
    return Call(&proto::Master::Stub::GetTask, request, response, timeout);
  }
  Status ReportTask(const proto::ReportTaskRequest& request, proto::ReportTaskResponse* response,
                    milliseconds timeout) override {
    return Call(&proto::Master::Stub::ReportTask, request, response, timeout);
  }
  Status Heartbeat(const proto::HeartbeatRequest& request, proto::HeartbeatResponse* response,
                   milliseconds timeout) override {
    return Call(&proto::Master::Stub::Heartbeat, request, response, timeout);
  }
  Status Rendezvous(const proto::RendezvousRequest& request, proto::RendezvousResponse* response,
                    milliseconds timeout) override {
    return Call(&proto::Master::Stub::Rendezvous, request, response, timeout);
  }
  Status GroupStore(const proto::GroupStoreRequest& request, proto::GroupStoreResponse* response,
                    milliseconds timeout) override {
    return Call(&proto::Master::Stub::GroupStore, request, response, timeout);
  }
  Status GroupState(const proto::GroupStateRequest& request, proto::GroupStateResponse* response,
                    milliseconds timeout) override {
    return Call(&proto::Master::Stub::GroupState, request, response, timeout);
  }
  void Reconnect() override {
    // A channel that failed to connect backs off before trying again; a new
    // one connects at once.
    std::lock_guard<std::mutex> lock(mu_);
    if (std::chrono::steady_clock::now() - renewed_ < kChannelRenewal) return;
    renewed_ = std::chrono::steady_clock::now();
    // A master started again elsewhere says where in the job directory.
    std::string address = CurrentMasterAddress(job_dir_, address_);
    if (address != address_) {
      spdlog::info("the master now serves at {} (was {})", address, address_);
      address_ = std::move(address);
    }
    stub_ = proto::Master::NewStub(rpc::MakeChannel(address_, credentials_));
  }

 private:
  template <typename Request, typename Response, typename Method>
  Status Call(Method method, const Request& request, Response* response, milliseconds timeout) {
    std::shared_ptr<proto::Master::Stub> stub;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stub = stub_;
    }
    auto context = rpc::MakeContext(timeout, credentials_.token);
    return rpc::FromGrpc((stub.get()->*method)(context.get(), request, response));
  }

  std::string address_;  // guarded by mu_
  const rpc::JobCredentials credentials_;
  const std::string job_dir_;
  std::mutex mu_;
  std::shared_ptr<proto::Master::Stub> stub_;
  std::chrono::steady_clock::time_point renewed_;
};

}  // namespace

WorkerPeers GrpcPeers(const std::string& master_address, const rpc::JobCredentials& credentials,
                      const std::string& job_dir) {
  WorkerPeers peers;
  peers.master = std::make_unique<GrpcMaster>(master_address, credentials, job_dir);
  peers.connect_ps = [credentials](const std::vector<std::string>& addresses) {
    return std::unique_ptr<rpc::ParameterServers>(
        std::make_unique<rpc::PsClient>(addresses, credentials));
  };
  return peers;
}

}  // namespace elasticdl::worker
