// ParameterServers over gRPC: a channel to every shard. Calls to several
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
#include "rpc/job_credentials.h"
#include "rpc/parameter_servers.h"

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
  Status Push(const std::vector<proto::PushRequest>& requests,
              std::vector<proto::PushResponse>* responses, const std::vector<int>& shards) override;
  Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) override;
  Status Export(const std::string& dir, int64_t version,
                std::vector<proto::ExportResponse>* responses) override;
  Status SetGroup(const proto::SetGroupRequest& request) override;
  Status Stats(PsId shard, proto::PsStatsResponse* response) override;

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
