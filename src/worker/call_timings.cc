#include "worker/call_timings.h"

#include <chrono>
#include <utility>

namespace elasticdl::worker {
namespace {

using Clock = std::chrono::steady_clock;

class TimedParameterServers final : public rpc::ParameterServers {
 public:
  TimedParameterServers(std::unique_ptr<rpc::ParameterServers> servers, CallTimings* timings)
      : servers_(std::move(servers)), timings_(timings) {}

  int num_shards() const override { return servers_->num_shards(); }
  Status Init(const std::vector<proto::InitRequest>& requests,
              std::vector<proto::InitResponse>* responses) override {
    return servers_->Init(requests, responses);
  }
  Status Pull(const std::vector<proto::PullRequest>& requests,
              std::vector<proto::PullResponse>* responses) override {
    return Timed("pull", [&] { return servers_->Pull(requests, responses); });
  }
  Status PullRows(const std::vector<proto::PullRowsRequest>& requests,
                  std::vector<proto::PullRowsResponse>* responses,
                  const std::vector<int>& shards) override {
    return Timed("pull_rows", [&] { return servers_->PullRows(requests, responses, shards); });
  }
  Status Push(std::vector<proto::PushRequest>* requests,
              std::vector<proto::PushResponse>* responses,
              const std::vector<int>& shards) override {
    return Timed("push", [&] { return servers_->Push(requests, responses, shards); });
  }
  Status PushFrom(std::vector<proto::PushRequest>* requests,
                  std::vector<proto::PushResponse>* responses, const std::vector<int>& shards,
                  const std::vector<HeldBytes>& held, const ValuesSink& sink) override {
    return Timed("push",
                 [&] { return servers_->PushFrom(requests, responses, shards, held, sink); });
  }
  Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) override {
    return servers_->Flush(responses, checkpoint);
  }
  Status Export(const std::string& dir, int64_t version,
                std::vector<proto::ExportResponse>* responses) override {
    return servers_->Export(dir, version, responses);
  }
  Status SetGroup(const proto::SetGroupRequest& request) override {
    return servers_->SetGroup(request);
  }
  Status Stats(PsId shard, proto::PsStatsResponse* response) override {
    return servers_->Stats(shard, response);
  }

 private:
  template <typename Call>
  Status Timed(const char* name, Call call) {
    const Clock::time_point start = Clock::now();
    Status s = call();
    timings_->Record(name, std::chrono::duration<double>(Clock::now() - start).count());
    return s;
  }

  const std::unique_ptr<rpc::ParameterServers> servers_;
  CallTimings* const timings_;
};

}  // namespace

void CallTimings::Record(const char* call, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  by_call_[call].Observe(seconds);
}

std::map<std::string, Histogram> CallTimings::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(by_call_, {});
}

std::unique_ptr<rpc::ParameterServers> TimedServers(std::unique_ptr<rpc::ParameterServers> servers,
                                                    CallTimings* timings) {
  if (servers == nullptr) return nullptr;
  return std::make_unique<TimedParameterServers>(std::move(servers), timings);
}

}  // namespace elasticdl::worker
