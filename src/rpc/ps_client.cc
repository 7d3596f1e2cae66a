#include "rpc/ps_client.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <numeric>

#include "common/strings.h"
#include "rpc/grpc_util.h"

namespace elasticdl::rpc {

PsClient::PsClient(const std::vector<std::string>& addresses, const JobCredentials& credentials,
                   std::chrono::milliseconds timeout)
    : addresses_(addresses),
      token_(credentials.token),
      shared_dir_(SharedTensorRegion::DefaultDir()),
      timeout_(timeout) {
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::ParameterServer::NewStub(MakeChannel(a, credentials)));
    shared_.push_back(std::make_unique<Shared>());
    shared_.back()->local = !shared_dir_.empty() && ServedLocally(a, credentials);
  }
}

SharedTensorRegion* PsClient::ShareTensors(int shard, proto::PushRequest* request,
                                           const HeldBytes* held) {
  Shared& s = *shared_[static_cast<size_t>(shard)];
  // Embedding rows stay in the message, and with them a push's other
  // tensors (the server would copy the rows to put the dense tensors back).
  if (!s.local || request->sparse_gradients_size() > 0) return nullptr;
  const size_t bytes =
      SharedTensorRegion::BytesFor({&request->gradients(), &request->buffer_updates()}, held);
  if (bytes == 0) return nullptr;
  if (s.region == nullptr || s.region->area_bytes() < bytes) {
    s.Forget();
    // Room for a quarter more: a model whose tensors grow a little keeps it.
    StatusOr<std::unique_ptr<SharedTensorRegion>> made =
        SharedTensorRegion::Create(shared_dir_, bytes + bytes / 4);
    if (!made.ok()) {
      s.local = false;  // no memory to share: the messages carry the tensors
      return nullptr;
    }
    s.region = std::move(*made);
  }
  StatusOr<uint64_t> sequence =
      s.region->Put(SharedTensorRegion::Area::kPush,
                    {request->mutable_gradients(), request->mutable_buffer_updates()}, held);
  if (!sequence.ok()) return nullptr;
  request->mutable_shared()->set_region(s.region->name());
  request->mutable_shared()->set_sequence(*sequence);
  return s.region.get();
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
      return AtShard(name, i, FromGrpc(results[i]));
    }
  }
  return absl::OkStatus();
}

template <typename Fill>
std::vector<std::pair<int, uint32_t>> PsClient::SendRegionCalls(
    const std::vector<int>& shards, const std::vector<SharedTensorRegion*>& used, Fill fill,
    std::vector<int>* by_socket) {
  std::vector<std::pair<int, uint32_t>> sent;
  for (int i : shards) {
    auto u = static_cast<size_t>(i);
    Shared& shared = *shared_[u];
    if (used[u] != nullptr && shared.region_calls) {
      proto::RegionCall call;
      fill(i, &call);
      StatusOr<uint32_t> number = used[u]->SendCall(call.SerializeAsString());
      if (number.ok()) {
        sent.emplace_back(i, *number);
        continue;
      }
      shared.region_calls = false;  // refused, nothing sent: over the socket from now on
    }
    by_socket->push_back(i);
  }
  return sent;
}

Status PsClient::AtShard(const char* name, int shard, const Status& s) const {
  return Status(s.code(), StrCat(name, " to parameter server ", shard, " (",
                                 addresses_[static_cast<size_t>(shard)], "): ", s.message()));
}

Status PsClient::AwaitRegionAnswer(SharedTensorRegion* region, uint32_t call,
                                   std::chrono::steady_clock::time_point deadline,
                                   proto::RegionAnswer* answer, bool* lost) {
  StatusOr<std::string> bytes = region->AwaitAnswer(call, deadline);
  *lost = !bytes.ok();
  if (*lost) return bytes.status();
  if (!answer->ParseFromString(*bytes)) {
    return absl::InternalError("an answer through the region that does not parse");
  }
  return Status(static_cast<absl::StatusCode>(answer->code()), answer->message());
}

Status PsClient::Pull(const std::vector<proto::PullRequest>& requests,
                      std::vector<proto::PullResponse>* responses) {
  // Servers that have read a region of ours may answer in its values area,
  // and those that answer calls there are asked there.
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<proto::PullRequest> asked = requests;
  std::vector<SharedTensorRegion*> used(stubs_.size(), nullptr);
  for (size_t i = 0; i < stubs_.size(); ++i) {
    Shared& shared = *shared_[i];
    locks.emplace_back(shared.mu);
    if (shared.region != nullptr && shared.mapped) {
      used[i] = shared.region.get();
      asked[i].mutable_shared()->set_region(used[i]->name());
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::vector<int> all(stubs_.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<int> by_socket;
  const std::vector<std::pair<int, uint32_t>> by_region = SendRegionCalls(
      all, used,
      [&](int i, proto::RegionCall* call) {
        *call->mutable_pull() = asked[static_cast<size_t>(i)];
      },
      &by_socket);
  Status s = absl::OkStatus();
  if (by_socket.empty()) {
    responses->assign(stubs_.size(), proto::PullResponse());
  } else {
    s = CallAll("pull", &proto::ParameterServer::Stub::Pull, asked, responses, by_socket);
  }
  std::vector<int> again;
  for (auto [i, call] : by_region) {
    auto u = static_cast<size_t>(i);
    proto::RegionAnswer answer;
    bool lost = false;
    Status answered = AwaitRegionAnswer(used[u], call, deadline, &answer, &lost);
    if (!answered.ok()) {
      used[u] = nullptr;
      if (lost) shared_[u]->Forget();
      if (s.ok()) s = AtShard("pull", i, answered);
    } else if (answer.too_big()) {
      used[u] = nullptr;
      asked[u].clear_shared();
      again.push_back(i);
    } else {
      (*responses)[u] = std::move(*answer.mutable_pull());
    }
  }
  EDL_RETURN_IF_ERROR(s);
  for (size_t i = 0; i < stubs_.size(); ++i) {
    proto::PullResponse& response = (*responses)[i];
    if (response.shared_unreadable()) shared_[i]->Forget();  // the values came in the message
    if (used[i] == nullptr || !response.has_shared_values()) continue;
    proto::ModelValues* values = response.mutable_values();
    Status taken =
        used[i]->Take(SharedTensorRegion::Area::kValues, response.shared_values().sequence(),
                      {values->mutable_parameters(), values->mutable_buffers()});
    response.clear_shared_values();
    if (!taken.ok()) {
      // Overwritten before read (an earlier push of ours answered late):
      // asked again, in the message.
      asked[i].clear_shared();
      again.push_back(static_cast<int>(i));
    }
  }
  if (again.empty()) return absl::OkStatus();
  std::vector<proto::PullResponse> retried;
  s = CallAll("pull", &proto::ParameterServer::Stub::Pull, asked, &retried, again);
  for (int i : again)
    (*responses)[static_cast<size_t>(i)] = std::move(retried[static_cast<size_t>(i)]);
  return s;
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

Status PsClient::Push(std::vector<proto::PushRequest>* requests,
                      std::vector<proto::PushResponse>* responses, const std::vector<int>& shards) {
  return PushTensors(requests, responses, shards, nullptr, nullptr);
}

Status PsClient::PushFrom(std::vector<proto::PushRequest>* requests,
                          std::vector<proto::PushResponse>* responses,
                          const std::vector<int>& shards, const std::vector<HeldBytes>& held,
                          const ValuesSink& sink) {
  EDL_RETURN_IF_ERROR(CheckHeld(held, *requests, shards));
  return PushTensors(requests, responses, shards, &held, sink ? &sink : nullptr);
}

Status PsClient::PushTensors(std::vector<proto::PushRequest>* requests,
                             std::vector<proto::PushResponse>* responses,
                             const std::vector<int>& shards, const std::vector<HeldBytes>* held,
                             const ValuesSink* sink) {
  std::vector<int> targets = Targets(shards);
  std::sort(targets.begin(), targets.end());  // locks taken in one order
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<SharedTensorRegion*> used(stubs_.size(), nullptr);
  for (int i : targets) {
    const auto u = static_cast<size_t>(i);
    locks.emplace_back(shared_[u]->mu);
    const HeldBytes* bytes = held != nullptr ? &(*held)[u] : nullptr;
    used[u] = ShareTensors(i, &(*requests)[u], bytes);
    if (used[u] == nullptr && bytes != nullptr) CopyHeld(*bytes, &(*requests)[u]);  // the message's
  }
  // Through the regions of the servers that answer there, over the sockets
  // to the others; the regions' calls are sent first, so that their servers
  // work while the sockets' calls are made.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::vector<int> by_socket;
  const std::vector<std::pair<int, uint32_t>> by_region = SendRegionCalls(
      targets, used,
      [&](int i, proto::RegionCall* call) {
        *call->mutable_push() = (*requests)[static_cast<size_t>(i)];
      },
      &by_socket);
  Status s = absl::OkStatus();
  if (by_socket.empty()) {
    responses->assign(stubs_.size(), proto::PushResponse());
  } else {
    s = CallAll("push", &proto::ParameterServer::Stub::Push, *requests, responses, by_socket);
  }
  std::vector<int> forget;  // regions whose call area is no longer to be used
  for (auto [i, call] : by_region) {
    auto u = static_cast<size_t>(i);
    proto::RegionAnswer answer;
    bool lost = false;
    Status answered = AwaitRegionAnswer(used[u], call, deadline, &answer, &lost);
    if (lost) forget.push_back(i);
    if (answered.ok()) {
      (*responses)[u] = std::move(*answer.mutable_push());
    } else if (s.ok()) {
      s = AtShard("push", i, answered);
    }
  }
  // Shards whose push goes again with its tensors in the message: the
  // server could not map the region (it was made on another machine, or
  // the server dropped it), or the call failed and the caller may retry.
  std::vector<int> again;
  // Shards whose values the sink has had.
  std::vector<bool> sunk(stubs_.size(), false);
  Status sinking = absl::OkStatus();
  for (int i : targets) {
    auto u = static_cast<size_t>(i);
    SharedTensorRegion* region = used[u];
    if (region == nullptr) continue;
    proto::PushRequest& request = (*requests)[u];
    proto::PushResponse& response = (*responses)[u];
    if (!s.ok() || response.shared_unreadable()) {
      // Only this client writes the push area: what it put there is intact.
      Status back = region->Take(SharedTensorRegion::Area::kPush, request.shared().sequence(),
                                 {request.mutable_gradients(), request.mutable_buffer_updates()});
      if (!back.ok()) return back;
      request.clear_shared();
      if (s.ok()) {
        Shared& shared = *shared_[u];
        // Unreadable from the first push: this server cannot map regions of
        // ours (another machine's, or another container's memory). Later: it
        // dropped this one (relaunched, or too many workers); make another.
        if (!shared.mapped) shared.local = false;
        shared.Forget();
        again.push_back(i);
      }
      continue;
    }
    shared_[u]->mapped = true;
    if (response.region_calls()) shared_[u]->region_calls = true;
    if (response.has_shared_values()) {
      const uint64_t sequence = response.shared_values().sequence();
      proto::ModelValues* values = response.mutable_values();
      Status taken;
      if (sink != nullptr) {
        // Read where they lie; checked once read, as Take does.
        Status given = (*sink)(i, *values, region->Bytes(SharedTensorRegion::Area::kValues));
        if (sinking.ok()) sinking = given;
        taken = region->Check(SharedTensorRegion::Area::kValues, sequence);
        sunk[u] = true;
      } else {
        taken = region->Take(SharedTensorRegion::Area::kValues, sequence,
                             {values->mutable_parameters(), values->mutable_buffers()});
      }
      // Values overwritten before they were read: the worker pulls instead.
      if (!taken.ok()) response.clear_values();
      response.clear_shared_values();
    }
  }
  for (int i : forget) shared_[static_cast<size_t>(i)]->Forget();
  if (s.ok() && !again.empty()) {
    std::vector<proto::PushResponse> retried;
    s = CallAll("push", &proto::ParameterServer::Stub::Push, *requests, &retried, again);
    for (int i : again)
      (*responses)[static_cast<size_t>(i)] = std::move(retried[static_cast<size_t>(i)]);
  }
  if (!s.ok()) return s;
  if (sink != nullptr) {
    for (int i : targets) {
      const auto u = static_cast<size_t>(i);
      const proto::PushResponse& response = (*responses)[u];
      if (sunk[u] || !response.has_values()) continue;
      Status given = (*sink)(i, response.values(), {});
      if (sinking.ok()) sinking = given;
    }
  }
  return sinking;
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
