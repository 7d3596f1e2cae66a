// The learning-rate schedule and max_steps on a parameter server: each step
// uses the rate of the version it starts from, and the version, checkpointed
// with the model, carries the schedule through a restore.
#include <gtest/gtest.h>

#include <memory>

#include "ps/parameter_store.h"
#include "ps/shard_state.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

constexpr uint64_t kScheduleInstance = 7;

// Plain SGD at lr 1, halved every 2 versions; w starts at 0.
ParameterStoreOptions Options(uint64_t instance = kScheduleInstance) {
  ParameterStoreOptions options;
  options.optimizer = torch::optim::SGDOptions(1.0);
  options.lr_schedule = LearningRateSchedule::Step(/*every=*/2, /*gamma=*/0.5);
  options.use_async = true;
  options.instance = instance;
  return options;
}

std::unique_ptr<ParameterStore> Store(ParameterStoreOptions options) {
  auto store = std::make_unique<ParameterStore>(options);
  proto::ModelValues v;
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::zeros({1}), v.add_parameters()).ok());
  bool accepted;
  int64_t version;
  EXPECT_TRUE(store->Init(v, &accepted, &version).ok());
  return store;
}

// A gradient of 1 computed on `version`, as minibatch `minibatch` of task 1.
proto::PushResponse Push(ParameterStore& store, int64_t version, int64_t minibatch,
                         uint64_t instance = kScheduleInstance) {
  proto::PushRequest r;
  r.set_worker_id(1);
  r.set_base_version(version);
  r.set_instance(instance);
  r.mutable_tag()->set_task_id(1);
  r.mutable_tag()->set_minibatch(minibatch);
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::ones({1}), r.add_gradients()).ok());
  proto::PushResponse out;
  EXPECT_TRUE(store.Push(r, &out).ok());
  return out;
}

float W(ParameterStore& store) {
  proto::PullRequest request;
  request.set_known_version(-1);
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull(request, &r).ok());
  return (*rpc::DecodeTensors(r.values().parameters()))["w"][0].item<float>();
}

TEST(LearningRateScheduleStepsTest, EachStepUsesTheRateOfItsVersion) {
  auto store = Store(Options());
  const double rates[] = {1, 1, 0.5, 0.5, 0.25};
  float w = 0;
  for (int v = 0; v < 5; ++v) {
    EXPECT_DOUBLE_EQ(store->learning_rate(), rates[v]);
    proto::PushResponse r = Push(*store, v, v);
    ASSERT_TRUE(r.accepted());
    EXPECT_DOUBLE_EQ(r.learning_rate(), rates[v]);
    w -= static_cast<float>(rates[v]);
    EXPECT_FLOAT_EQ(W(*store), w) << "after the step from version " << v;
  }
}

TEST(LearningRateScheduleStepsTest, ARestoredServerGoesOnWithTheSchedule) {
  auto live = Store(Options());
  for (int v = 0; v < 3; ++v) ASSERT_TRUE(Push(*live, v, v).accepted());
  auto snapshot = live->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  proto::ShardCheckpoint checkpoint;
  ASSERT_TRUE(EncodeSnapshot(*snapshot, &checkpoint).ok());

  ParameterStore restored(Options(kScheduleInstance + 1));
  ASSERT_TRUE(restored.Restore(checkpoint).ok());
  EXPECT_EQ(restored.version(), 3);
  EXPECT_DOUBLE_EQ(restored.learning_rate(), 0.5);
  EXPECT_DOUBLE_EQ(Push(restored, 3, 3, kScheduleInstance + 1).learning_rate(), 0.5);
  EXPECT_DOUBLE_EQ(Push(restored, 4, 4, kScheduleInstance + 1).learning_rate(), 0.25);
  EXPECT_DOUBLE_EQ(Push(*live, 3, 3).learning_rate(), 0.5);
  EXPECT_DOUBLE_EQ(Push(*live, 4, 4).learning_rate(), 0.25);
  EXPECT_FLOAT_EQ(W(restored), W(*live));
}

TEST(LearningRateScheduleStepsTest, NoStepBeyondMaxVersion) {
  ParameterStoreOptions options = Options();
  options.max_version = 3;
  auto store = Store(options);
  for (int v = 0; v < 3; ++v) ASSERT_TRUE(Push(*store, v, v).accepted());
  const float w = W(*store);
  proto::PushResponse refused = Push(*store, 3, 3);
  EXPECT_FALSE(refused.accepted());
  EXPECT_TRUE(refused.max_steps_reached());
  EXPECT_EQ(refused.version(), 3);
  EXPECT_EQ(store->version(), 3);
  EXPECT_FLOAT_EQ(W(*store), w);
  // Minibatches applied before are still acknowledged as duplicates.
  proto::PushResponse duplicate = Push(*store, 2, 2);
  EXPECT_TRUE(duplicate.accepted());
  EXPECT_TRUE(duplicate.duplicate());
}

TEST(LearningRateScheduleStepsTest, SynchronousStepsStopAtMaxVersionToo) {
  ParameterStoreOptions options = Options();
  options.use_async = false;
  options.grads_to_wait = 2;
  options.max_version = 1;
  auto store = Store(options);
  proto::PushResponse first = Push(*store, 0, 0);
  ASSERT_TRUE(first.accepted());
  proto::PushRequest second;
  second.set_worker_id(2);
  second.set_instance(kScheduleInstance);
  second.mutable_tag()->set_task_id(2);
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::ones({1}), second.add_gradients()).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store->Push(second, &out).ok());
  EXPECT_TRUE(out.accepted());
  EXPECT_EQ(store->version(), 1);
  EXPECT_TRUE(Push(*store, 1, 1).max_steps_reached());
}

}  // namespace
}  // namespace elasticdl::ps
