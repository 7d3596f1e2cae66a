#include "rpc/ps_client.h"

#include <condition_variable>
#include <mutex>

#include "common/strings.h"
#include "rpc/grpc_util.h"

namespace elasticdl::rpc {

PsClient::PsClient(const std::vector<std::string>& addresses, const JobCredentials& credentials,
                   std::chrono::milliseconds timeout)
    : addresses_(addresses), token_(credentials.token), timeout_(timeout) {
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::ParameterServer::NewStub(MakeChannel(a, credentials)));
  }
}

template <typename Request, typename Response, typename Method>
Status PsClient::CallAll(const char* name, Method method, const std::vector<Request>& requests,
                         std::vector<Response>* responses, std::vector<int> shards) {
  const size_t n = stubs_.size();
  if (shards.empty()) {
    for (size_t i = 0; i < n; ++i) shards.push_back(static_cast<int>(i));
  }
  responses->assign(n, Response());
  std::vector<grpc::Status> results(n);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(n);
  if (shards.size() == 1) {
    int i = shards[0];
    auto context = MakeContext(timeout_, token_);
    results[i] = (stubs_[i].get()->*method)(context.get(), requests[i], &(*responses)[i]);
  } else {
    std::mutex mu;
    std::condition_variable cv;
    size_t pending = shards.size();
    for (int i : shards) {
      contexts[i] = MakeContext(timeout_, token_);
      auto* async = stubs_[i]->async();
      // The generated async methods share one shape; dispatch on the name.
      auto done = [&, i](grpc::Status s) {
        std::lock_guard<std::mutex> lock(mu);
        results[i] = std::move(s);
        if (--pending == 0) cv.notify_one();
      };
      if constexpr (std::is_same_v<Request, proto::PullRequest>) {
        async->Pull(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::PullRowsRequest>) {
        async->PullRows(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::InitRequest>) {
        async->Init(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::ExportRequest>) {
        async->Export(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::FlushRequest>) {
        async->Flush(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::SetGroupRequest>) {
        async->SetGroup(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else if constexpr (std::is_same_v<Request, proto::PsStatsRequest>) {
        async->Stats(contexts[i].get(), &requests[i], &(*responses)[i], done);
      } else {
        async->Push(contexts[i].get(), &requests[i], &(*responses)[i], done);
      }
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }
  for (int i : shards) {
    if (!results[i].ok()) {
      Status s = FromGrpc(results[i]);
      return Status(s.code(), StrCat(name, " to parameter server ", i, " (", addresses_[i],
                                     "): ", s.message()));
    }
  }
  return absl::OkStatus();
}

Status PsClient::Pull(const std::vector<proto::PullRequest>& requests,
                      std::vector<proto::PullResponse>* responses) {
  return CallAll("pull", &proto::ParameterServer::Stub::Pull, requests, responses, {});
}

Status PsClient::PullRows(const std::vector<proto::PullRowsRequest>& requests,
                          std::vector<proto::PullRowsResponse>* responses,
                          const std::vector<int>& shards) {
  return CallAll("pulling rows", &proto::ParameterServer::Stub::PullRows, requests, responses,
                 shards);
}

Status PsClient::Init(const std::vector<proto::InitRequest>& requests,
                      std::vector<proto::InitResponse>* responses) {
  return CallAll("init", &proto::ParameterServer::Stub::Init, requests, responses, {});
}

Status PsClient::Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) {
  std::vector<proto::FlushRequest> requests(stubs_.size());
  for (proto::FlushRequest& r : requests) r.set_checkpoint(checkpoint);
  return CallAll("flush", &proto::ParameterServer::Stub::Flush, requests, responses, {});
}

Status PsClient::Export(const std::string& dir, int64_t version,
                        std::vector<proto::ExportResponse>* responses) {
  std::vector<proto::ExportRequest> requests(stubs_.size());
  for (auto& r : requests) {
    r.set_dir(dir);
    r.set_version(version);
  }
  return CallAll("export", &proto::ParameterServer::Stub::Export, requests, responses, {});
}

Status PsClient::SetGroup(const proto::SetGroupRequest& request) {
  std::vector<proto::SetGroupRequest> requests(stubs_.size(), request);
  std::vector<proto::SetGroupResponse> responses;
  return CallAll("setting the group", &proto::ParameterServer::Stub::SetGroup, requests, &responses,
                 {});
}

Status PsClient::Push(const std::vector<proto::PushRequest>& requests,
                      std::vector<proto::PushResponse>* responses, const std::vector<int>& shards) {
  return CallAll("push", &proto::ParameterServer::Stub::Push, requests, responses, shards);
}

Status PsClient::Stats(PsId shard, proto::PsStatsResponse* response) {
  std::vector<proto::PsStatsRequest> requests(stubs_.size());
  std::vector<proto::PsStatsResponse> responses;
  EDL_RETURN_IF_ERROR(CallAll("stats", &proto::ParameterServer::Stub::Stats, requests, &responses,
                              {shard.value()}));
  *response = std::move(responses[static_cast<size_t>(shard.value())]);
  return absl::OkStatus();
}

ConnectParameterServers GrpcParameterServers(JobCredentials credentials) {
  return [credentials = std::move(credentials)](const std::vector<std::string>& addresses,
                                                std::chrono::milliseconds timeout) {
    return std::unique_ptr<ParameterServers>(
        std::make_unique<PsClient>(addresses, credentials, timeout));
  };
}

}  // namespace elasticdl::rpc
