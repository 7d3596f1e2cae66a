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
#include <string_view>
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

  // A push's tensor values held by the caller (PushFrom), by tensor of a
  // request's gradients then its buffer_updates, in order; an empty view
  // where the tensor's content holds them.
  using HeldBytes = std::vector<std::string_view>;
  // Takes the values that answer a push, of each shard whose answer has
  // them: `values` describes them, their bytes in each tensor's content or
  // at its shared_offset in `shared` (readable during the call only).
  using ValuesSink =
      std::function<Status(int shard, const proto::ModelValues& values, std::string_view shared)>;
  // As Push, without copies the caller would make: each request's tensors
  // are read from `held` (one HeldBytes per request, valid until PushFrom
  // returns; INVALID_ARGUMENT, with nothing sent, when a target shard's does
  // not name one view per tensor) once, into the memory shared with the
  // server or into the message, and the values that answer are given to
  // `sink`, on the calling thread, where they were received instead of
  // copied into the responses (whose values are then not to be applied
  // again). The sink must not call these servers. A sink's error is the
  // push's (the push was applied); a push that fails may have given some
  // shards' values to the sink. Values found overwritten after the sink read
  // them (rpc/shared_tensors.h) are dropped from their response as if never
  // sent: the caller pulls, which replaces what the sink wrote. This default
  // puts the held bytes in the messages, pushes, and gives the sink each
  // answer's values.
  virtual Status PushFrom(std::vector<proto::PushRequest>* requests,
                          std::vector<proto::PushResponse>* responses,
                          const std::vector<int>& shards, const std::vector<HeldBytes>& held,
                          const ValuesSink& sink);
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

 protected:
  // `shards`, or every shard when it is empty.
  std::vector<int> Targets(const std::vector<int>& shards) const;
  // INVALID_ARGUMENT, naming the shard, unless `held` has a HeldBytes for
  // each request and each of the `shards` (all when empty) names one view
  // per tensor of its request.
  Status CheckHeld(const std::vector<HeldBytes>& held,
                   const std::vector<proto::PushRequest>& requests,
                   const std::vector<int>& shards) const;
  // Copies the bytes `held` names into `request`'s tensors' contents (one
  // view per tensor, CheckHeld's).
  static void CopyHeld(const HeldBytes& held, proto::PushRequest* request);
};

// Connects to the servers at `addresses` (by shard); each call gives up
// after `timeout` (DEADLINE_EXCEEDED).
using ConnectParameterServers = std::function<std::unique_ptr<ParameterServers>(
    const std::vector<std::string>& addresses, std::chrono::milliseconds timeout)>;

// Over gRPC with the job's `credentials` (TLS, and the token on every call).
ConnectParameterServers GrpcParameterServers(JobCredentials credentials);

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_PARAMETER_SERVERS_H_
