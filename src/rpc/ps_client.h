// ParameterServers over gRPC: a channel to every shard. Calls to several
// shards go out together and the call returns when all have answered
// (ps-lite's push/pull, without the handles: callers always wait). A push to
// a server on this machine passes its tensors, and the values that answer it,
// through memory shared with it (rpc/shared_tensors.h); the messages carry
// the rest. Once such a server says it answers calls through the region, the
// pushes and pulls to it go through the region alone, without the socket.
// PushFrom copies a worker's gradients into the region from where they lie,
// and the values that answer from the region into its model: once each way.
#ifndef ELASTICDL_RPC_PS_CLIENT_H_
#define ELASTICDL_RPC_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "elasticdl/status.h"
#include "rpc/job_credentials.h"
#include "rpc/parameter_servers.h"
#include "rpc/shared_tensors.h"

namespace elasticdl::rpc {

class PsClient final : public ParameterServers {
 public:
  // `credentials`: the job's (job_credentials.h): the channels' TLS, and the
  // token attached to every call. Default: plaintext, no token (tests).
  explicit PsClient(const std::vector<std::string>& addresses,
                    const JobCredentials& credentials = {},
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

  int num_shards() const override { return static_cast<int>(stubs_.size()); }
  Status Init(const std::vector<proto::InitRequest>& requests,
              std::vector<proto::InitResponse>* responses) override;
  Status Pull(const std::vector<proto::PullRequest>& requests,
              std::vector<proto::PullResponse>* responses) override;
  Status PullRows(const std::vector<proto::PullRowsRequest>& requests,
                  std::vector<proto::PullRowsResponse>* responses,
                  const std::vector<int>& shards) override;
  Status Push(std::vector<proto::PushRequest>* requests,
              std::vector<proto::PushResponse>* responses, const std::vector<int>& shards) override;
  // The held bytes go straight into the region shared with a server on
  // this machine, and the sink reads the values that answer from there.
  Status PushFrom(std::vector<proto::PushRequest>* requests,
                  std::vector<proto::PushResponse>* responses, const std::vector<int>& shards,
                  const std::vector<HeldBytes>& held, const ValuesSink& sink) override;
  Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) override;
  Status Export(const std::string& dir, int64_t version,
                std::vector<proto::ExportResponse>* responses) override;
  Status SetGroup(const proto::SetGroupRequest& request) override;
  Status Stats(PsId shard, proto::PsStatsResponse* response) override;

 private:
  template <typename Request, typename Response, typename Method>
  Status CallAll(const char* name, Method method, const std::vector<Request>& requests,
                 std::vector<Response>* responses, std::vector<int> shards);

  // A shard's region of shared memory; its lock is held through a push.
  struct Shared {
    std::mutex mu;
    bool local = false;   // served through a socket of this machine
    bool mapped = false;  // the server has read the region
    // The server answers pushes through the region (its last push's answer
    // said so).
    bool region_calls = false;
    std::unique_ptr<SharedTensorRegion> region;
    // Drops the region: the next push makes another.
    void Forget() {
      mapped = false;
      region_calls = false;
      region.reset();
    }
  };
  // Sends each shard of `shards` whose server answers calls through its
  // region (`used`, by shard) the call `fill(shard, &call)` makes there; the
  // calls sent, by shard. The others (no region, or refused: nothing sent)
  // go to `by_socket`.
  template <typename Fill>
  std::vector<std::pair<int, uint32_t>> SendRegionCalls(
      const std::vector<int>& shards, const std::vector<SharedTensorRegion*>& used, Fill fill,
      std::vector<int>* by_socket);
  // `s`, naming the call and the shard it failed at.
  Status AtShard(const char* name, int shard, const Status& s) const;
  // The answer to `call`, parsed into `answer`; its status, or the wait's.
  // `lost`: the wait failed (the server's process is gone, or `deadline`):
  // the region's call area is not to be used again (Shared::Forget).
  static Status AwaitRegionAnswer(SharedTensorRegion* region, uint32_t call,
                                  std::chrono::steady_clock::time_point deadline,
                                  proto::RegionAnswer* answer, bool* lost);
  // Push and PushFrom (`held`, `sink`: null for Push).
  Status PushTensors(std::vector<proto::PushRequest>* requests,
                     std::vector<proto::PushResponse>* responses, const std::vector<int>& shards,
                     const std::vector<HeldBytes>* held, const ValuesSink* sink);
  // Moves `request`'s tensors (their values where `held` says, when given)
  // into shard `shard`'s region when it is on this machine; the region used,
  // or null (nothing moved).
  SharedTensorRegion* ShareTensors(int shard, proto::PushRequest* request,
                                   const HeldBytes* held = nullptr);

  std::vector<std::string> addresses_;
  std::string token_;
  const std::string shared_dir_;
  std::vector<std::unique_ptr<Shared>> shared_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  std::chrono::milliseconds timeout_;
};

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_PS_CLIENT_H_
