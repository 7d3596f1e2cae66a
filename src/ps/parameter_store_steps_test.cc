// How pushes become steps: synchronous groups, the order of a step's sums,
// buffer updates with decays, staleness bounds and non-finite values.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "ps/parameter_store.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

constexpr uint64_t kStepsInstance = 7;

ParameterStoreOptions Group() {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 0;
  options.instance = kStepsInstance;
  return options;
}

std::unique_ptr<ParameterStore> Store(ParameterStoreOptions options, float w = 1,
                                      torch::Tensor mean = torch::zeros({2})) {
  options.instance = kStepsInstance;
  auto store = std::make_unique<ParameterStore>(options);
  proto::ModelValues v;
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::full({2}, w), v.add_parameters()).ok());
  EXPECT_TRUE(rpc::EncodeTensor("bn.mean", mean, v.add_buffers()).ok());
  bool accepted;
  int64_t version;
  EXPECT_TRUE(store->Init(v, &accepted, &version).ok());
  return store;
}

proto::PushRequest Grad(int32_t worker, int64_t task, torch::Tensor g, int64_t base_version = 0) {
  proto::PushRequest r;
  r.set_worker_id(worker);
  r.set_base_version(base_version);
  r.set_instance(kStepsInstance);
  r.mutable_tag()->set_task_id(task);
  r.mutable_tag()->set_minibatch(0);
  EXPECT_TRUE(rpc::EncodeTensor("w", g, r.add_gradients()).ok());
  return r;
}

proto::PushRequest Grad(int32_t worker, int64_t task, float g, int64_t base_version = 0) {
  return Grad(worker, task, torch::full({2}, g), base_version);
}

// A push whose only content is the buffer update b <- decay * b + update.
proto::PushRequest BufferPush(int32_t worker, int64_t task, float update, double decay) {
  proto::PushRequest r;
  r.set_worker_id(worker);
  r.set_instance(kStepsInstance);
  r.mutable_tag()->set_task_id(task);
  r.mutable_tag()->set_minibatch(0);
  EXPECT_TRUE(rpc::EncodeTensor("bn.mean", torch::full({2}, update), r.add_buffer_updates()).ok());
  r.add_buffer_decays(decay);
  return r;
}

rpc::NamedTensors PullAll(ParameterStore& store, const char* which = "parameters") {
  proto::PullRequest request;
  request.set_known_version(-1);
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull(request, &r).ok());
  auto decoded = std::string(which) == "parameters" ? rpc::DecodeTensors(r.values().parameters())
                                                    : rpc::DecodeTensors(r.values().buffers());
  EXPECT_TRUE(decoded.ok());
  return *decoded;
}

float W(ParameterStore& store) { return PullAll(store)["w"][0].item<float>(); }
float Mean(ParameterStore& store) { return PullAll(store, "buffers")["bn.mean"][0].item<float>(); }

TEST(ParameterStoreGroupTest, AStepWaitsForEveryWorkerOfTheGroup) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_TRUE(out.step_pending());
  EXPECT_EQ(store->version(), 0);
  ASSERT_TRUE(store->Push(Grad(1, 11, 3), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_FALSE(out.step_pending());
  EXPECT_EQ(out.version(), 1);
  EXPECT_NEAR(W(*store), 1 - 0.1 * 2, 1e-6);  // the mean of 1 and 3
  // A gradient computed on version 0 is now stale.
  ASSERT_TRUE(store->Push(Grad(0, 12, 1, 0), &out).ok());
  EXPECT_FALSE(out.accepted());
  EXPECT_EQ(store->applied(), (std::map<int64_t, int64_t>{{10, 1}, {11, 1}}));
}

TEST(ParameterStoreGroupTest, NoStepBeforeTheFirstGroup) {
  auto store = Store(Group());
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());
  EXPECT_TRUE(out.step_pending());
  ASSERT_TRUE(store->Push(Grad(1, 11, 1), &out).ok());
  EXPECT_TRUE(out.step_pending());
  EXPECT_EQ(store->version(), 0);
  store->SetGroup(1, {0, 1});
  EXPECT_EQ(store->version(), 1);
}

TEST(ParameterStoreGroupTest, AWorkerLeavingCompletesTheStepWithoutIt) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1, 2});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());
  ASSERT_TRUE(store->Push(Grad(2, 12, 3), &out).ok());
  EXPECT_EQ(store->version(), 0);
  store->SetGroup(2, {0, 2});  // worker 1 is gone
  EXPECT_EQ(store->version(), 1);
  EXPECT_NEAR(W(*store), 1 - 0.1 * 2, 1e-6);
  // An older generation arriving late changes nothing.
  store->SetGroup(1, {0, 1, 2});
  ASSERT_TRUE(store->Push(Grad(0, 13, 1, 1), &out).ok());
  EXPECT_TRUE(out.step_pending());
  ASSERT_TRUE(store->Push(Grad(2, 14, 1, 1), &out).ok());
  EXPECT_EQ(out.version(), 2);
}

TEST(ParameterStoreGroupTest, AnEmptyGroupOrANewcomerDoesNotHoldAStepBack) {
  auto store = Store(Group());
  store->SetGroup(1, {0});
  proto::PushResponse out;
  // Worker 5 is not in the group (yet): its gradient counts in the step, but
  // the step does not wait for it.
  ASSERT_TRUE(store->Push(Grad(5, 10, 4), &out).ok());
  EXPECT_TRUE(out.step_pending());
  ASSERT_TRUE(store->Push(Grad(0, 11, 2), &out).ok());
  EXPECT_EQ(out.version(), 1);
  EXPECT_NEAR(W(*store), 1 - 0.1 * 3, 1e-6);
  store->SetGroup(2, {});
  ASSERT_TRUE(store->Push(Grad(3, 12, 1, 1), &out).ok());
  EXPECT_FALSE(out.step_pending());
  EXPECT_EQ(out.version(), 2);
}

// After a server went back to a checkpoint, a worker redoing minibatches
// gets duplicates from the servers that kept them, and gradients into the
// restored one's steps. A duplicate counts as the worker's presence, so
// that no step waits for a gradient the worker will send only after another
// shard's step, which waits for this one's (a deadlock between shards).
TEST(ParameterStoreGroupTest, ADuplicatePushCountsAsPresence) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());
  ASSERT_TRUE(store->Push(Grad(1, 11, 3), &out).ok());
  ASSERT_EQ(store->version(), 1);
  ASSERT_TRUE(store->Push(Grad(1, 12, 2, 1), &out).ok());
  EXPECT_TRUE(out.step_pending());
  // Worker 0 redoes task 10's minibatch 0: a duplicate, and the step is
  // complete with worker 1's gradient alone.
  ASSERT_TRUE(store->Push(Grad(0, 10, 5, 1), &out).ok());
  EXPECT_TRUE(out.duplicate());
  EXPECT_EQ(out.version(), 2);
  EXPECT_NEAR(W(*store), 1 - 0.1 * 2 - 0.1 * 2, 1e-6);
  // Presence lasts one step: the next one waits for both again.
  ASSERT_TRUE(store->Push(Grad(1, 13, 1, 2), &out).ok());
  EXPECT_TRUE(out.step_pending());
  EXPECT_EQ(store->version(), 2);
}

TEST(ParameterStoreGroupTest, AStepSumsInTagOrderWhateverTheArrivalOrder) {
  // Values whose float sum depends on the order of additions.
  const std::vector<float> values = {1e8f, 1.0f, -1e8f, 3.5f, 1e-3f};
  std::vector<torch::Tensor> results;
  for (const std::vector<int>& order :
       {std::vector<int>{0, 1, 2, 3, 4}, std::vector<int>{4, 2, 0, 3, 1},
        std::vector<int>{1, 3, 4, 0, 2}}) {
    auto store = Store(Group());
    store->SetGroup(1, {0, 1, 2, 3, 4});
    for (int i : order) {
      proto::PushResponse out;
      ASSERT_TRUE(store->Push(Grad(i, 100 + i, values[i]), &out).ok());
    }
    ASSERT_EQ(store->version(), 1);
    results.push_back(PullAll(*store)["w"]);
  }
  EXPECT_TRUE(torch::equal(results[0], results[1]));
  EXPECT_TRUE(torch::equal(results[0], results[2]));
}

TEST(ParameterStoreGroupTest, APullWaitsForTheStep) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());
  proto::PullRequest request;
  request.set_known_version(0);
  request.set_known_instance(kStepsInstance);
  request.set_wait_ms(50);
  proto::PullResponse idle;
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(store->Pull(request, &idle).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(45));
  EXPECT_EQ(idle.values().version(), 0);
  EXPECT_EQ(idle.values().parameters_size(), 0);

  request.set_wait_ms(5000);
  proto::PullResponse stepped;
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    proto::PushResponse o;
    EXPECT_TRUE(store->Push(Grad(1, 11, 1), &o).ok());
  });
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(store->Pull(request, &stepped).ok());
  other.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(stepped.values().version(), 1);
  EXPECT_EQ(stepped.values().parameters_size(), 1);
}

TEST(ParameterStoreGroupTest, AServerThatIsGoingStopsItsPullsWaiting) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 1), &out).ok());  // the step waits for worker 1
  proto::PullRequest request;
  request.set_known_version(0);
  request.set_known_instance(kStepsInstance);
  request.set_wait_ms(5000);
  std::thread going([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    store->StopWaiting();
  });
  auto start = std::chrono::steady_clock::now();
  proto::PullResponse waited;
  ASSERT_TRUE(store->Pull(request, &waited).ok());
  going.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(waited.values().version(), 0);  // no step: answered as it is
  // Later pulls do not wait at all.
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(store->Pull(request, &waited).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(ParameterStoreGroupTest, FlushAveragesWhatWaits) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1, 2});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 2), &out).ok());
  ASSERT_TRUE(store->Push(Grad(1, 11, 4), &out).ok());
  int64_t version = 0;
  ASSERT_TRUE(store->Flush(&version).ok());
  EXPECT_EQ(version, 1);
  EXPECT_NEAR(W(*store), 1 - 0.1 * 3, 1e-6);
}

TEST(ParameterStoreGroupTest, SnapshotLeavesOutWhatWaits) {
  auto store = Store(Group());
  store->SetGroup(1, {0, 1});
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 10, 2), &out).ok());
  auto snapshot = store->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  EXPECT_TRUE(snapshot->applied.empty());
  EXPECT_EQ(store->applied(), (std::map<int64_t, int64_t>{{10, 1}}));
}

// ---------------------------------------------------------------- buffers

TEST(ParameterStoreBufferTest, AnUpdateFollowsItsDecay) {
  auto store = Store({}, 1, torch::full({2}, 2.0));
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(BufferPush(0, 1, 0.5, 0.75), &out).ok());
  EXPECT_FLOAT_EQ(Mean(*store), 0.75 * 2 + 0.5);
  proto::PushRequest bad = BufferPush(0, 2, 0.5, std::nan(""));
  EXPECT_EQ(store->Push(bad, &out).code(), absl::StatusCode::kInvalidArgument);
  bad = BufferPush(0, 2, 0.5, 0.9);
  bad.add_buffer_decays(0.9);  // two decays for one update
  EXPECT_EQ(store->Push(bad, &out).code(), absl::StatusCode::kInvalidArgument);
}

// Sixteen workers pulled the same running mean 0 and each saw batch mean 1:
// BatchNorm (momentum 0.1) moved each one's copy to 0.1. Applied one after
// another, the server's mean must be what sixteen such batches in sequence
// give, 1 - 0.9^16, in whatever order the pushes land: not 16 * 0.1.
TEST(ParameterStoreBufferTest, SixteenConcurrentPushersKeepARunningAverage) {
  for (bool use_async : {true, false}) {
    ParameterStoreOptions options = Group();
    options.use_async = use_async;
    auto store = Store(options);
    std::vector<int32_t> workers;
    for (int i = 0; i < 16; ++i) workers.push_back(i);
    store->SetGroup(1, workers);
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) {
      threads.emplace_back([&, i] {
        proto::PushResponse out;
        EXPECT_TRUE(store->Push(BufferPush(i, i, 0.1f - 0.9f * 0.0f, 0.9), &out).ok());
        EXPECT_TRUE(out.accepted());
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(store->version(), use_async ? 16 : 1);
    EXPECT_NEAR(Mean(*store), 1 - std::pow(0.9, 16), 1e-6) << (use_async ? "async" : "sync");
  }
}

// Sixteen different batch means s_i in one synchronous step: the result is
// the sequence of the sixteen EMA updates in tag order, exactly as one
// BatchNorm would have computed it seeing the batches in that order.
TEST(ParameterStoreBufferTest, ASynchronousStepAppliesBufferUpdatesInTagOrder) {
  auto store = Store(Group(), 1, torch::full({2}, 0.25));
  std::vector<int32_t> workers;
  for (int i = 0; i < 16; ++i) workers.push_back(i);
  store->SetGroup(1, workers);
  std::vector<std::thread> threads;
  const float pulled = 0.25f;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      const float local = 0.9f * pulled + 0.1f * static_cast<float>(i);  // BatchNorm's update
      proto::PushResponse out;
      EXPECT_TRUE(store->Push(BufferPush(i, 15 - i, local - 0.9f * pulled, 0.9), &out).ok());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(store->version(), 1);
  float expected = pulled;
  for (int task = 0; task < 16; ++task) expected = 0.9f * expected + 0.1f * (15 - task);
  EXPECT_NEAR(Mean(*store), expected, 1e-5);
}

// ---------------------------------------------------------------- staleness, non-finite

TEST(ParameterStoreStalenessTest, AsyncRefusesGradientsOlderThanTheBound) {
  ParameterStoreOptions options;
  options.max_staleness = 1;
  auto store = Store(options);
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Grad(0, 1, 1, 0), &out).ok());
  ASSERT_TRUE(store->Push(Grad(1, 2, 1, 0), &out).ok());  // one step old: fine
  EXPECT_TRUE(out.accepted());
  EXPECT_EQ(store->version(), 2);
  ASSERT_TRUE(store->Push(Grad(0, 3, 1, 0), &out).ok());  // two steps old
  EXPECT_FALSE(out.accepted());
  EXPECT_EQ(store->version(), 2);
  EXPECT_EQ(store->applied().count(3), 0u);
  ASSERT_TRUE(store->Push(Grad(0, 3, 1, 2), &out).ok());
  EXPECT_TRUE(out.accepted());
}

TEST(ParameterStoreNonFiniteTest, NonFiniteValuesAreRefusedAndNothingIsApplied) {
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    auto store = Store({});
    proto::PushResponse out;
    Status s = store->Push(Grad(0, 1, torch::tensor({1.0f, bad})), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(s.message()).find("gradient of 'w' holds non-finite values"),
              std::string::npos)
        << s;
    s = store->Push(BufferPush(0, 1, bad, 1), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(s.message()).find("buffer 'bn.mean'"), std::string::npos) << s;
    EXPECT_EQ(store->version(), 0);
    EXPECT_TRUE(store->applied().empty());
  }
}

}  // namespace
}  // namespace elasticdl::ps
