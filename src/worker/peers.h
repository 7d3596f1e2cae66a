// What a worker talks to, behind interfaces: the master and the job's
// parameter servers. The worker decides when to retry and reconnect; these
// make single attempts. GrpcPeers() gives the real ones; tests give fakes.
#ifndef ELASTICDL_WORKER_PEERS_H_
#define ELASTICDL_WORKER_PEERS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "rpc/parameter_servers.h"

namespace elasticdl::worker {

// One call to the master per method; an unreachable master is UNAVAILABLE
// or DEADLINE_EXCEEDED (rpc::IsUnreachable).
class MasterClient {
 public:
  virtual ~MasterClient() = default;
  virtual Status RegisterWorker(const proto::RegisterWorkerRequest& request,
                                proto::RegisterWorkerResponse* response,
                                std::chrono::milliseconds timeout) = 0;
  virtual Status GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response,
                         std::chrono::milliseconds timeout) = 0;
  virtual Status ReportTask(const proto::ReportTaskRequest& request,
                            proto::ReportTaskResponse* response,
                            std::chrono::milliseconds timeout) = 0;
  virtual Status Heartbeat(const proto::HeartbeatRequest& request,
                           proto::HeartbeatResponse* response,
                           std::chrono::milliseconds timeout) = 0;
  // AllreduceStrategy: the collective group's rendezvous (the master).
  virtual Status Rendezvous(const proto::RendezvousRequest& request,
                            proto::RendezvousResponse* response,
                            std::chrono::milliseconds timeout) {
    return Unsupported("Rendezvous");
  }
  virtual Status GroupStore(const proto::GroupStoreRequest& request,
                            proto::GroupStoreResponse* response,
                            std::chrono::milliseconds timeout) {
    return Unsupported("GroupStore");
  }
  virtual Status GroupState(const proto::GroupStateRequest& request,
                            proto::GroupStateResponse* response,
                            std::chrono::milliseconds timeout) {
    return Unsupported("GroupState");
  }
  // Calls failed as unreachable: connect afresh (a master restarted on the
  // same host listens on the same address; one started on another node has
  // written its address in the job directory) rather than wait out a
  // backoff. Thread-safe.
  virtual void Reconnect() {}

 private:
  static Status Unsupported(const char* call) {
    return absl::UnimplementedError(std::string(call) + " is not supported by this master");
  }
};

struct WorkerPeers {
  std::unique_ptr<MasterClient> master;
  // The servers at these addresses (by shard), as the master registered them.
  std::function<std::unique_ptr<rpc::ParameterServers>(const std::vector<std::string>& addresses)>
      connect_ps;
};

// gRPC to the master at `master_address` and to the servers, every call
// made with the job's `credentials` (TLS, the token on every call). A
// master that stops answering is looked for again at the address in
// `job_dir` (when given and readable).
WorkerPeers GrpcPeers(const std::string& master_address, const rpc::JobCredentials& credentials,
                      const std::string& job_dir = "");

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_PEERS_H_
