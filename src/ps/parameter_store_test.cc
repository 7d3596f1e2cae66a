#include "ps/parameter_store.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

proto::ModelValues Values(float w) {
  proto::ModelValues v;
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::full({2}, w), v.add_parameters()).ok());
  EXPECT_TRUE(rpc::EncodeTensor("bn.mean", torch::zeros({2}), v.add_buffers()).ok());
  return v;
}

proto::PushRequest Push(float g, int64_t base_version) {
  proto::PushRequest r;
  r.set_base_version(base_version);
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::full({2}, g), r.add_gradients()).ok());
  return r;
}

proto::PullRequest Known(int64_t version, uint64_t instance = 0) {
  proto::PullRequest r;
  r.set_known_version(version);
  r.set_known_instance(instance);
  return r;
}

torch::Tensor PullW(ParameterStore& store) {
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull(Known(-1), &r).ok());
  auto t = rpc::DecodeTensors(r.values().parameters());
  return (*t)["w"];
}

TEST(ParameterStoreTest, FirstInitWins) {
  ParameterStore store({});
  bool accepted = false;
  int64_t version = -1;
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  EXPECT_TRUE(accepted);
  ASSERT_TRUE(store.Init(Values(5), &accepted, &version).ok());
  EXPECT_FALSE(accepted);
  EXPECT_FLOAT_EQ(PullW(store)[0].item<float>(), 1);
}

TEST(ParameterStoreTest, AsyncSgdAppliesEveryPush) {
  ParameterStore store({});  // SGD 0.1
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(Push(1, 0), &out).ok());
  ASSERT_TRUE(store.Push(Push(1, 0), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_EQ(out.version(), 2);
  EXPECT_NEAR(PullW(store)[0].item<float>(), 0.8, 1e-6);
}

TEST(ParameterStoreTest, PullWithCurrentVersionCarriesNoValues) {
  ParameterStore store({});
  bool accepted;
  int64_t version;
  proto::PullResponse before;
  ASSERT_TRUE(store.Pull(Known(-1), &before).ok());
  EXPECT_FALSE(before.initialized());
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  proto::PullResponse r;
  ASSERT_TRUE(store.Pull(Known(0, store.instance()), &r).ok());
  EXPECT_EQ(r.values().parameters_size(), 0);
  EXPECT_EQ(r.instance(), store.instance());
  ASSERT_TRUE(store.Pull(Known(-1), &r).ok());
  EXPECT_EQ(r.values().parameters_size(), 1);
  EXPECT_EQ(r.values().buffers_size(), 1);
}

TEST(ParameterStoreTest, SyncAveragesAndRefusesStaleGradients) {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 2;
  ParameterStore store(options);
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(Push(1, 0), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_EQ(out.version(), 0);  // waiting for a second gradient
  ASSERT_TRUE(store.Push(Push(3, 0), &out).ok());
  EXPECT_EQ(out.version(), 1);
  EXPECT_NEAR(PullW(store)[0].item<float>(), 1 - 0.1 * 2, 1e-6);  // mean gradient 2
  ASSERT_TRUE(store.Push(Push(1, 0), &out).ok());
  EXPECT_FALSE(out.accepted());  // computed on version 0, now 1
  EXPECT_EQ(store.version(), 1);
}

TEST(ParameterStoreTest, RefusesWrongNamesAndShapesAndAppliesNothing) {
  ParameterStore store({});
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  proto::PushRequest bad = Push(1, 0);
  ASSERT_TRUE(rpc::EncodeTensor("nope", torch::ones({2}), bad.add_gradients()).ok());
  proto::PushResponse out;
  Status s = store.Push(bad, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("'nope'"), std::string::npos);
  proto::PushRequest shape;
  ASSERT_TRUE(rpc::EncodeTensor("w", torch::ones({3}), shape.add_gradients()).ok());
  EXPECT_EQ(store.Push(shape, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.version(), 0);
  EXPECT_FLOAT_EQ(PullW(store)[0].item<float>(), 1);
}

TEST(ParameterStoreTest, ConcurrentPushesAreAllApplied) {
  ParameterStore store({});
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(0), &accepted, &version).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        proto::PushResponse out;
        EXPECT_TRUE(store.Push(Push(-1, 0), &out).ok());
        proto::PullResponse r;
        EXPECT_TRUE(store.Pull(Known(-1), &r).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.version(), 400);
  EXPECT_NEAR(PullW(store)[0].item<float>(), 40, 1e-3);
}

TEST(ParameterStoreTest, BufferUpdatesWithoutDecayAddUp) {
  ParameterStore store({});
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(0), &accepted, &version).ok());
  proto::PushRequest r = Push(0, 0);
  ASSERT_TRUE(rpc::EncodeTensor("bn.mean", torch::full({2}, 0.5), r.add_buffer_updates()).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(r, &out).ok());
  ASSERT_TRUE(store.Push(r, &out).ok());
  proto::PullResponse pulled;
  ASSERT_TRUE(store.Pull(Known(-1), &pulled).ok());
  auto buffers = rpc::DecodeTensors(pulled.values().buffers());
  EXPECT_FLOAT_EQ((*buffers)["bn.mean"][1].item<float>(), 1.0);
}

TEST(ParameterStoreTest, ABoolBufferTakesInt8SetsAndClears) {
  ParameterStore store({});
  proto::ModelValues values = Values(0);
  ASSERT_TRUE(
      rpc::EncodeTensor("mask", torch::tensor({false, true, true}), values.add_buffers()).ok());
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(values, &accepted, &version).ok());
  proto::PushRequest r = Push(0, 0);
  ASSERT_TRUE(
      rpc::EncodeTensor("mask", torch::tensor({1, 0, -1}, torch::kInt8), r.add_buffer_updates())
          .ok());
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(r, &out).ok());
  proto::PullResponse pulled;
  ASSERT_TRUE(store.Pull(Known(-1), &pulled).ok());
  auto buffers = rpc::DecodeTensors(pulled.values().buffers());
  EXPECT_TRUE(torch::equal((*buffers)["mask"], torch::tensor({true, true, false})));
  // An update of the bool type itself (no set or clear in it) is refused.
  proto::PushRequest same_type = Push(0, 1);
  ASSERT_TRUE(
      rpc::EncodeTensor("mask", torch::tensor({true, true, true}), same_type.add_buffer_updates())
          .ok());
  Status refused = store.Push(same_type, &out);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.message()).find("updated by a Char (int8) tensor"),
            std::string::npos)
      << refused;
}

TEST(ParameterStoreTest, HalfPrecisionParametersAreRefusedByName) {
  ParameterStore store({});
  proto::ModelValues values;
  ASSERT_TRUE(
      rpc::EncodeTensor("w", torch::ones({2}, torch::kFloat16), values.add_parameters()).ok());
  bool accepted = true;
  int64_t version;
  Status refused = store.Init(values, &accepted, &version);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(refused.message(),
            "parameter 'w' is Half; the parameter servers train float32 and float64 parameters "
            "(keep the model in float32)");
}

// ---------------------------------------------------------------- tagged pushes

constexpr uint64_t kInstance = 42;

proto::PushRequest Tagged(float g, int64_t task, int64_t minibatch, int64_t base_version = 0,
                          uint64_t instance = kInstance) {
  proto::PushRequest r = Push(g, base_version);
  r.set_instance(instance);
  r.mutable_tag()->set_task_id(task);
  r.mutable_tag()->set_minibatch(minibatch);
  return r;
}

std::unique_ptr<ParameterStore> InitializedStore(ParameterStoreOptions options = {}) {
  options.instance = kInstance;
  auto store = std::make_unique<ParameterStore>(options);
  bool accepted;
  int64_t version;
  EXPECT_TRUE(store->Init(Values(1), &accepted, &version).ok());
  return store;
}

TEST(ParameterStoreTest, TaggedPushIsAppliedOnceAndInOrder) {
  auto store = InitializedStore();
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Tagged(1, 7, 0), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_FALSE(out.duplicate());
  EXPECT_EQ(out.version(), 1);

  proto::PushResponse again;
  ASSERT_TRUE(store->Push(Tagged(1, 7, 0, 1), &again).ok());
  EXPECT_TRUE(again.accepted());
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.version(), 1);
  EXPECT_NEAR(PullW(*store)[0].item<float>(), 0.9, 1e-6);

  proto::PushResponse gap;
  Status s = store->Push(Tagged(1, 7, 2, 1), &gap);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("minibatch 2 of task 7 arrives before minibatch 1"),
            std::string::npos)
      << s;
  EXPECT_EQ(store->version(), 1);

  ASSERT_TRUE(store->Push(Tagged(1, 7, 1, 1), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_FALSE(out.duplicate());
  EXPECT_EQ(out.version(), 2);
  EXPECT_EQ(store->applied(), (std::map<int64_t, int64_t>{{7, 2}}));
}

TEST(ParameterStoreTest, DuplicateAppliesNoBufferUpdate) {
  auto store = InitializedStore();
  proto::PushRequest r = Tagged(0, 3, 0);
  ASSERT_TRUE(rpc::EncodeTensor("bn.mean", torch::full({2}, 0.5), r.add_buffer_updates()).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(r, &out).ok());
  ASSERT_TRUE(store->Push(r, &out).ok());
  EXPECT_TRUE(out.duplicate());
  proto::PullResponse pulled;
  ASSERT_TRUE(store->Pull(Known(-1), &pulled).ok());
  auto buffers = rpc::DecodeTensors(pulled.values().buffers());
  EXPECT_FLOAT_EQ((*buffers)["bn.mean"][0].item<float>(), 0.5);
}

// A push with want_values that makes a step is answered with the values
// after it, byte for byte what a pull returns then; one that makes none
// (waiting for its step, a duplicate, refused, or without want_values) with
// none.
TEST(ParameterStoreTest, PushMakingAStepIsAnsweredWithTheValuesAfterIt) {
  auto expect_as_pulled = [](ParameterStore& store, const proto::PushResponse& out) {
    ASSERT_TRUE(out.has_values());
    proto::PullResponse pulled;
    ASSERT_TRUE(store.Pull(Known(-1), &pulled).ok());
    EXPECT_EQ(out.values().version(), out.version());
    EXPECT_EQ(out.values().SerializeAsString(), pulled.values().SerializeAsString());
  };
  auto wanting = [](proto::PushRequest r) {
    r.set_want_values(true);
    return r;
  };
  {  // asynchronous: every applied push makes a step
    auto store = InitializedStore();
    proto::PushResponse out;
    ASSERT_TRUE(store->Push(wanting(Tagged(1, 7, 0)), &out).ok());
    EXPECT_EQ(out.version(), 1);
    expect_as_pulled(*store, out);
    EXPECT_NEAR(rpc::DecodeTensors(out.values().parameters())->at("w")[0].item<float>(), 0.9, 1e-6);
    ASSERT_TRUE(store->Push(wanting(Tagged(1, 7, 0, 1)), &out).ok());
    EXPECT_TRUE(out.duplicate());
    EXPECT_FALSE(out.has_values());
    ASSERT_TRUE(store->Push(wanting(Tagged(1, 7, 1, 1, kInstance + 1)), &out).ok());
    EXPECT_FALSE(out.accepted());  // another server instance's values
    EXPECT_FALSE(out.has_values());
    ASSERT_TRUE(store->Push(Tagged(1, 7, 1, 1), &out).ok());
    EXPECT_TRUE(out.accepted());
    EXPECT_FALSE(out.has_values());  // not asked for
  }
  {  // synchronous: the push that completes the step
    ParameterStoreOptions options;
    options.use_async = false;
    options.grads_to_wait = 2;
    auto store = InitializedStore(options);
    proto::PushResponse first, second;
    ASSERT_TRUE(store->Push(wanting(Tagged(1, 1, 0)), &first).ok());
    EXPECT_TRUE(first.accepted());
    EXPECT_FALSE(first.has_values());  // its step waits for the other gradient
    ASSERT_TRUE(store->Push(wanting(Tagged(3, 2, 0)), &second).ok());
    EXPECT_EQ(second.version(), 1);
    expect_as_pulled(*store, second);
    ASSERT_TRUE(store->Push(wanting(Tagged(1, 1, 1, 0)), &first).ok());
    EXPECT_FALSE(first.accepted());  // computed on version 0, now 1
    EXPECT_FALSE(first.has_values());
  }
}

// The server decodes a push's gradients into the tensors of that worker's
// last push when the store holds them no longer: a step lets go of them.
TEST(ParameterStoreTest, AStepLetsGoOfTheGradientsItApplied) {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 2;
  auto store = InitializedStore(options);
  auto push = [&](const proto::PushRequest& request, torch::Tensor* kept) {
    StatusOr<rpc::NamedTensors> gradients = rpc::DecodeTensors(request.gradients());
    ASSERT_TRUE(gradients.ok()) << gradients.status();
    *kept = gradients->at("w");
    proto::PushResponse out;
    std::shared_ptr<const proto::ModelValues> values;
    ASSERT_TRUE(store->Push(request, std::move(*gradients), {}, &out, &values).ok());
    ASSERT_TRUE(out.accepted());
  };
  torch::Tensor first, second;
  push(Tagged(1, 1, 0), &first);
  EXPECT_GT(first.use_count(), 1U);  // waits for the step, in the store
  push(Tagged(3, 2, 0), &second);
  EXPECT_EQ(first.use_count(), 1U);
  EXPECT_EQ(second.use_count(), 1U);
  EXPECT_NEAR(PullW(*store)[0].item<float>(), 0.8, 1e-6);  // 1 - 0.1 * (1 + 3) / 2
}

// The values a pull or a push was answered with are not written over by
// the next step while their reader holds them; once let go, the next
// snapshot is written into them, with the values after that step.
TEST(ParameterStoreTest, ASnapshotIsWrittenOverOnlyWhenNobodyHoldsIt) {
  auto store = InitializedStore();  // asynchronous: each push makes a step
  auto pull = [&] {
    proto::PullResponse out;
    std::shared_ptr<const proto::ModelValues> values;
    EXPECT_TRUE(store->Pull(Known(-1), &out, &values).ok());
    EXPECT_NE(values, nullptr);
    return values;
  };
  auto w = [](const proto::ModelValues& v) {
    return rpc::DecodeTensors(v.parameters())->at("w")[0].item<float>();
  };
  std::shared_ptr<const proto::ModelValues> held = pull();
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Tagged(1, 7, 0), &out).ok());
  std::shared_ptr<const proto::ModelValues> after = pull();
  EXPECT_NE(after.get(), held.get());
  EXPECT_EQ(held->version(), 0);
  EXPECT_FLOAT_EQ(w(*held), 1);
  EXPECT_EQ(after->version(), 1);
  EXPECT_NEAR(w(*after), 0.9, 1e-6);
  const proto::ModelValues* room = after.get();
  held.reset();
  after.reset();
  ASSERT_TRUE(store->Push(Tagged(1, 7, 1, 1), &out).ok());
  std::shared_ptr<const proto::ModelValues> again = pull();
  EXPECT_EQ(again.get(), room);  // written over
  EXPECT_EQ(again->version(), 2);
  EXPECT_EQ(again->parameters_size(), 1);
  EXPECT_EQ(again->buffers_size(), 1);
  EXPECT_NEAR(w(*again), 0.8, 1e-6);
}

// Worker A is slow; the master hands the task to worker B, which starts at
// the minibatch the servers had reported; both keep pushing.
TEST(ParameterStoreTest, TwoPushersOnOneTaskApplyEachMinibatchOnce) {
  auto store = InitializedStore();
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Tagged(1, 5, 0), &out).ok());     // A
  ASSERT_TRUE(store->Push(Tagged(1, 5, 1, 1), &out).ok());  // A
  ASSERT_TRUE(store->Push(Tagged(1, 5, 1, 1), &out).ok());  // B, from minibatch 1
  EXPECT_TRUE(out.duplicate());
  ASSERT_TRUE(store->Push(Tagged(1, 5, 2, 2), &out).ok());  // B
  EXPECT_FALSE(out.duplicate());
  ASSERT_TRUE(store->Push(Tagged(1, 5, 2, 2), &out).ok());  // A, late
  EXPECT_TRUE(out.duplicate());
  ASSERT_TRUE(store->Push(Tagged(1, 5, 3, 3), &out).ok());  // A
  EXPECT_FALSE(out.duplicate());
  ASSERT_TRUE(store->Push(Tagged(1, 5, 3, 3), &out).ok());  // B
  EXPECT_TRUE(out.duplicate());
  // Another task in between is independent.
  ASSERT_TRUE(store->Push(Tagged(1, 6, 0, 4), &out).ok());
  EXPECT_FALSE(out.duplicate());
  EXPECT_EQ(store->version(), 5);
  EXPECT_NEAR(PullW(*store)[0].item<float>(), 1 - 5 * 0.1, 1e-6);
  EXPECT_EQ(store->applied(), (std::map<int64_t, int64_t>{{5, 4}, {6, 1}}));
}

TEST(ParameterStoreTest, PushFromAnotherInstanceIsRefused) {
  auto store = InitializedStore();
  EXPECT_EQ(store->instance(), kInstance);
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Tagged(1, 1, 0, 0, kInstance + 1), &out).ok());
  EXPECT_FALSE(out.accepted());
  ASSERT_TRUE(store->Push(Tagged(1, 1, 0, 0, /*instance=*/0), &out).ok());
  EXPECT_FALSE(out.accepted());  // tagged pushes must name the instance
  EXPECT_EQ(store->version(), 0);
  EXPECT_TRUE(store->applied().empty());
  ASSERT_TRUE(store->Push(Tagged(1, 1, 0), &out).ok());
  EXPECT_TRUE(out.accepted());
  ASSERT_TRUE(store->Push(Push(1, 1), &out).ok());  // untagged, instance 0
  EXPECT_TRUE(out.accepted());
  EXPECT_EQ(store->version(), 2);

  // A pull from another instance at the same version gets the values.
  proto::PullResponse r;
  ASSERT_TRUE(store->Pull(Known(2, kInstance + 1), &r).ok());
  EXPECT_EQ(r.instance(), kInstance);
  EXPECT_EQ(r.values().parameters_size(), 1);
  ASSERT_TRUE(store->Pull(Known(2, kInstance), &r).ok());
  EXPECT_EQ(r.values().parameters_size(), 0);
}

TEST(ParameterStoreTest, RandomInstancesDiffer) {
  ParameterStore a({});
  ParameterStore b({});
  EXPECT_NE(a.instance(), 0u);
  EXPECT_NE(a.instance(), b.instance());
}

TEST(ParameterStoreTest, RefusedPushesDoNotCountAsApplied) {
  auto store = InitializedStore();
  proto::PushRequest bad = Tagged(1, 9, 0);
  bad.clear_gradients();
  ASSERT_TRUE(rpc::EncodeTensor("w", torch::ones({3}), bad.add_gradients()).ok());
  proto::PushResponse out;
  EXPECT_EQ(store->Push(bad, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Push(Tagged(1, 9, 0, /*base_version=*/5), &out).code(),
            absl::StatusCode::kInvalidArgument);  // newer than the server
  proto::PushRequest negative = Tagged(1, 9, -1);
  EXPECT_EQ(store->Push(negative, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->applied().empty());
  ASSERT_TRUE(store->Push(Tagged(1, 9, 0), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_FALSE(out.duplicate());
}

TEST(ParameterStoreTest, SyncStaleRefusalDoesNotCountAsApplied) {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 1;
  auto store = InitializedStore(options);
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(Tagged(1, 1, 0, 0), &out).ok());
  EXPECT_EQ(out.version(), 1);
  ASSERT_TRUE(store->Push(Tagged(1, 2, 0, /*base_version=*/0), &out).ok());
  EXPECT_FALSE(out.accepted());
  EXPECT_EQ(store->applied(), (std::map<int64_t, int64_t>{{1, 1}}));
  ASSERT_TRUE(store->Push(Tagged(1, 2, 0, 1), &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_FALSE(out.duplicate());
}

}  // namespace
}  // namespace elasticdl::ps

namespace elasticdl::ps {
namespace {

TEST(ParameterStoreFlushTest, AppliesWhatWaitsWithTheWeightOfAFullStep) {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 4;
  ParameterStore store(options);
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  ASSERT_TRUE(store.Flush(&version).ok());  // nothing waits: no step
  EXPECT_EQ(version, 0);
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(Push(2, 0), &out).ok());
  ASSERT_TRUE(store.Push(Push(6, 0), &out).ok());
  EXPECT_EQ(out.version(), 0);  // 2 of 4
  ASSERT_TRUE(store.Flush(&version).ok());
  EXPECT_EQ(version, 1);
  // (2 + 6) / 4, as if the missing two gradients were zero.
  EXPECT_NEAR(PullW(store)[0].item<float>(), 1 - 0.1 * 2, 1e-6);
  ASSERT_TRUE(store.Flush(&version).ok());
  EXPECT_EQ(version, 1);
}

TEST(ParameterStoreFlushTest, NeedsAModel) {
  ParameterStore store({});
  int64_t version = 0;
  EXPECT_EQ(store.Flush(&version).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace elasticdl::ps
