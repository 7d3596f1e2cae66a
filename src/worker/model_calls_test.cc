// The calls into the model's code a worker's heartbeat thread watches: the
// longest under way, on whichever thread, and what it is said to be.
#include "worker/model_calls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <thread>

#include "elasticdl/zoo/embedding.h"
#include "rpc/parameter_servers.h"
#include "worker/pipeline_ahead.h"
#include "worker/server_rows.h"

namespace elasticdl::worker {
namespace {

TEST(ModelCallsTest, TheLongestCallUnderWayOnAnyThread) {
  ModelCalls calls;
  EXPECT_FALSE(calls.Longest().has_value());
  {
    const ModelCalls::Scope outer = calls.Enter(ModelCalls::kForward, 5, 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const ModelCalls::Scope inner = calls.Enter(ModelCalls::kLoss, 5, 3);
    std::optional<ModelCalls::Call> longest = calls.Longest();
    ASSERT_TRUE(longest.has_value());
    EXPECT_STREQ(longest->what, ModelCalls::kForward);
    EXPECT_EQ(longest->Describe(), "forward (minibatch 3 of task 5)");
    EXPECT_EQ(longest->thread, static_cast<uint64_t>(pthread_self()));
    EXPECT_THAT(calls.Threads(), ::testing::ElementsAre(static_cast<uint64_t>(pthread_self())));
  }
  EXPECT_FALSE(calls.Longest().has_value());

  // Another thread's call, begun first, is the longest; ended, it is gone.
  std::atomic<bool> entered{false}, release{false};
  uint64_t other = 0;
  std::thread t([&] {
    other = static_cast<uint64_t>(pthread_self());
    const ModelCalls::Scope call = calls.Enter(ModelCalls::kDatasetFn, 7);
    entered = true;
    while (!release) std::this_thread::yield();
  });
  while (!entered) std::this_thread::yield();
  {
    const ModelCalls::Scope mine = calls.Run(
        ModelCalls::kBackward, 5, 4, [&] { return calls.Enter(ModelCalls::kBackward, 5, 4); });
    EXPECT_EQ(calls.Longest()->Describe(), "dataset_fn (task 7)");
    EXPECT_EQ(calls.Longest()->thread, other);
    EXPECT_EQ(calls.Threads().size(), 2u);
    release = true;
    t.join();
    EXPECT_EQ(calls.Longest()->Describe(), "backward (minibatch 4 of task 5)");
  }
  EXPECT_FALSE(calls.Longest().has_value());
  EXPECT_EQ(
      calls.Run(ModelCalls::kEvalMetricsFn, -1, -1, [&] { return calls.Longest()->Describe(); }),
      "eval_metrics_fn");
}

TEST(ModelCallsTest, WaitingForTheServersAndBeingStoppedDoNotCount) {
  using std::chrono::milliseconds;
  ModelCalls calls;
  const ModelCalls::Scope forward = calls.Enter(ModelCalls::kForward, 5, 3);
  const uint64_t id = calls.Longest()->id;
  const ModelCalls::Clock::time_point began = calls.Longest()->since;
  {
    // An Embedding layer's lookup: the call is not running while it waits.
    const ModelCalls::Waiting waiting = calls.Wait();
    EXPECT_FALSE(calls.Longest().has_value());
    EXPECT_FALSE(calls.Overdue(id, milliseconds(0)));
    std::this_thread::sleep_for(milliseconds(20));
  }
  // Its clock starts again where it stopped.
  ASSERT_TRUE(calls.Longest().has_value());
  EXPECT_GE(calls.Longest()->since - began, milliseconds(20));
  EXPECT_TRUE(calls.Overdue(id, milliseconds(0)));
  EXPECT_FALSE(calls.Overdue(id, std::chrono::hours(1)));
  // Another thread's wait is not this call's.
  std::thread([&] {
    const ModelCalls::Waiting waiting = calls.Wait();
    EXPECT_TRUE(calls.Longest().has_value());
  }).join();
  // A stopped process: no call ran meanwhile; one begun since it went on
  // is not moved into the future.
  std::this_thread::sleep_for(milliseconds(20));
  const ModelCalls::Scope loss = calls.Enter(ModelCalls::kLoss, 5, 3);
  const ModelCalls::Clock::time_point before = calls.Longest()->since;
  calls.Shift(milliseconds(10));
  EXPECT_EQ(calls.Longest()->since - before, milliseconds(10));
  EXPECT_STREQ(calls.Longest()->what, ModelCalls::kForward);
  calls.Shift(std::chrono::seconds(30));
  EXPECT_LE(calls.Longest()->since, ModelCalls::Clock::now());
  EXPECT_FALSE(calls.Overdue(id, milliseconds(1000)));
}

TEST(ModelCallsTest, APipelineAheadMakesItsElementsAsCalls) {
  ModelCalls calls;
  std::atomic<int> made{0};
  std::atomic<bool> release{false};
  {
    PipelineAhead<int64_t> ahead(1, 0, &calls);
    // The third element waits until released: a call of the task's
    // pipeline, its index the element's.
    ahead.Start(Dataset<int64_t>::FromVector({0, 1, 2, 3}).map([&](int64_t i) {
      ++made;
      while (i == 2 && !release) std::this_thread::yield();
      return i;
    }),
                /*task=*/9);
    EXPECT_EQ(**ahead.Next(), 0);
    EXPECT_EQ(**ahead.Next(), 1);
    while (made < 3) std::this_thread::yield();
    std::optional<ModelCalls::Call> call = calls.Longest();
    ASSERT_TRUE(call.has_value());
    EXPECT_EQ(call->Describe(),
              "the pipeline that reads the task's records through dataset_fn (minibatch 2 of task "
              "9)");
    release = true;
    EXPECT_EQ(**ahead.Next(), 2);
  }
  EXPECT_FALSE(calls.Longest().has_value());

  // A pipeline whose first minibatch the training thread took (the probe)
  // is numbered on from the next.
  made = 0;
  release = false;
  {
    PipelineAhead<int64_t> ahead(1, 0, &calls);
    ahead.Start(Dataset<int64_t>::FromVector({1, 2}).map([&](int64_t i) {
      ++made;
      while (!release) std::this_thread::yield();
      return i;
    }),
                /*task=*/4, /*first=*/1);
    while (made < 1) std::this_thread::yield();
    EXPECT_EQ(calls.Longest()->minibatch, 1);
    release = true;
  }
}

// Parameter servers that answer a lookup of rows only after a while, and
// see whether the lookup's forward counted as running meanwhile.
class SlowRowServers : public rpc::ParameterServers {
 public:
  explicit SlowRowServers(const ModelCalls* calls) : calls_(calls) {}
  int num_shards() const override { return 1; }
  Status PullRows(const std::vector<proto::PullRowsRequest>&, std::vector<proto::PullRowsResponse>*,
                  const std::vector<int>&) override {
    running_during_lookup = calls_->Longest().has_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return absl::UnavailableError("parameter server 0: gone");
  }
  Status Init(const std::vector<proto::InitRequest>&, std::vector<proto::InitResponse>*) override {
    return Unused();
  }
  Status Pull(const std::vector<proto::PullRequest>&, std::vector<proto::PullResponse>*) override {
    return Unused();
  }
  Status Push(std::vector<proto::PushRequest>*, std::vector<proto::PushResponse>*,
              const std::vector<int>&) override {
    return Unused();
  }
  Status Flush(std::vector<proto::FlushResponse>*, bool) override { return Unused(); }
  Status Export(const std::string&, int64_t, std::vector<proto::ExportResponse>*) override {
    return Unused();
  }
  Status SetGroup(const proto::SetGroupRequest&) override { return Unused(); }
  Status Stats(PsId, proto::PsStatsResponse*) override { return Unused(); }

  bool running_during_lookup = true;

 private:
  static Status Unused() { return absl::UnimplementedError("not a lookup"); }
  const ModelCalls* calls_;
};

TEST(ModelCallsTest, AnEmbeddingLookupWaitsForTheServersOutsideItsForward) {
  ModelCalls calls;
  SlowRowServers servers(&calls);
  ServerRows rows;
  rows.set_servers(&servers);
  rows.set_calls(&calls);
  const EmbeddingImpl table(EmbeddingOptions("items", 2));
  const ModelCalls::Scope forward = calls.Enter(ModelCalls::kForward, 1, 0);
  const ModelCalls::Clock::time_point began = calls.Longest()->since;
  EXPECT_THROW(rows.Rows(table, torch::tensor({3, 5}, torch::kInt64), false), std::runtime_error);
  EXPECT_FALSE(servers.running_during_lookup);
  ASSERT_TRUE(calls.Longest().has_value());
  EXPECT_GE(calls.Longest()->since - began, std::chrono::milliseconds(20));
}

}  // namespace
}  // namespace elasticdl::worker
