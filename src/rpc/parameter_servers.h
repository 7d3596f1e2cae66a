// The job's parameter servers as one peer, for every role that calls them:
// the worker initialises, pulls and pushes; the master flushes, reads,
// exports, tells them the training group and asks for their figures. One
// request per shard in, one response per shard out; the first error (naming
// the shard) is returned after every call has finished. Each call is a
// single attempt: callers decide when to retry and reconnect.
// rpc::PsClient is the gRPC implementation; tests give fakes.
#ifndef ELASTICDL_RPC_PARAMETER_SERVERS_H_
#define ELASTICDL_RPC_PARAMETER_SERVERS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "rpc/job_credentials.h"

namespace elasticdl::rpc {

class ParameterServers {
 public:
  virtual ~ParameterServers() = default;

  virtual int num_shards() const = 0;
  virtual Status Init(const std::vector<proto::InitRequest>& requests,
                      std::vector<proto::InitResponse>* responses) = 0;
  virtual Status Pull(const std::vector<proto::PullRequest>& requests,
                      std::vector<proto::PullResponse>* responses) = 0;
  // Rows of embedding tables, from the shards listed in `shards` (all when
  // empty).
  virtual Status PullRows(const std::vector<proto::PullRowsRequest>& requests,
                          std::vector<proto::PullRowsResponse>* responses,
                          const std::vector<int>& shards) = 0;
  // To the shards listed in `shards` (all when empty). The requests' tensor
  // values may be moved out of them on the way (to memory shared with a
  // server on this machine: rpc/shared_tensors.h).
  virtual Status Push(std::vector<proto::PushRequest>* requests,
                      std::vector<proto::PushResponse>* responses,
                      const std::vector<int>& shards) = 0;
  // At the end of training: every shard applies what waits (sync mode) and,
  // with `checkpoint`, writes a checkpoint of the result before answering.
  virtual Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) = 0;
  // Every shard writes its whole state as a checkpoint under
  // `dir`/version-`version` (0: each under its own version).
  virtual Status Export(const std::string& dir, int64_t version,
                        std::vector<proto::ExportResponse>* responses) = 0;
  // Sync mode: the workers every shard's steps wait for.
  virtual Status SetGroup(const proto::SetGroupRequest& request) = 0;
  // What server `shard` holds and how its checkpoints go.
  virtual Status Stats(PsId shard, proto::PsStatsResponse* response) = 0;
};

// Connects to the servers at `addresses` (by shard); each call gives up
// after `timeout` (DEADLINE_EXCEEDED).
using ConnectParameterServers = std::function<std::unique_ptr<ParameterServers>(
    const std::vector<std::string>& addresses, std::chrono::milliseconds timeout)>;

// Over gRPC with the job's `credentials` (TLS, and the token on every call).
ConnectParameterServers GrpcParameterServers(JobCredentials credentials);

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_PARAMETER_SERVERS_H_
