// A worker's connection to every parameter-server shard. Calls to several
// shards go out together and the call returns when all have answered
// (ps-lite's push/pull, without the handles: callers always wait).
#ifndef ELASTICDL_RPC_PS_CLIENT_H_
#define ELASTICDL_RPC_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::rpc {

class PsClient {
 public:
  // `token`: the job's token (job_token.h), attached to every call.
  explicit PsClient(const std::vector<std::string>& addresses, std::string token = "",
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

  int num_shards() const { return static_cast<int>(stubs_.size()); }

  // One request per shard in, one response per shard out. The first error
  // (naming the shard) is returned after every call has finished. Push goes
  // to the shards listed in `shards` only (all when empty).
  Status Pull(const std::vector<proto::PullRequest>& requests,
              std::vector<proto::PullResponse>* responses);
  // Rows of embedding tables, from the shards listed in `shards` (all when
  // empty).
  Status PullRows(const std::vector<proto::PullRowsRequest>& requests,
                  std::vector<proto::PullRowsResponse>* responses,
                  const std::vector<int>& shards = {});
  Status Init(const std::vector<proto::InitRequest>& requests,
              std::vector<proto::InitResponse>* responses);
  Status Push(const std::vector<proto::PushRequest>& requests,
              std::vector<proto::PushResponse>* responses, const std::vector<int>& shards = {});
  // At the end of training: every shard applies what waits (sync mode) and,
  // with `checkpoint`, writes a checkpoint of the result before answering.
  Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint = false);
  // Every shard writes its whole state as a checkpoint under
  // `dir`/version-`version` (0: each under its own version).
  Status Export(const std::string& dir, int64_t version,
                std::vector<proto::ExportResponse>* responses);
  // Sync mode: the workers every shard's steps wait for.
  Status SetGroup(const proto::SetGroupRequest& request);
  // What shard `shard` holds and how its checkpoints go.
  Status Stats(int shard, proto::PsStatsResponse* response);

 private:
  template <typename Request, typename Response, typename Method>
  Status CallAll(const char* name, Method method, const std::vector<Request>& requests,
                 std::vector<Response>* responses, std::vector<int> shards);

  std::vector<std::string> addresses_;
  std::string token_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  std::chrono::milliseconds timeout_;
};

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_PS_CLIENT_H_
