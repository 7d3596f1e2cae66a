#include "worker/sharded_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

#include "ps/parameter_store.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::worker {
namespace {

constexpr uint64_t kInstance = 3;

class BatchNormModel : public Model {
 public:
  BatchNormModel() : bn_(register_module("bn", torch::nn::BatchNorm2d(3))) {}
  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    return bn_(inputs.at("x"));
  }
  torch::nn::BatchNorm2d bn_;
};

// Worker i's minibatch: its own mean and spread.
torch::Tensor Batch(int i) {
  torch::manual_seed(1000 + i);
  return torch::randn({8, 3, 4, 4}) * (1 + 0.25 * i) + i;
}

proto::ModelValues PullAll(ps::ParameterStore& store) {
  proto::PullRequest request;
  request.set_known_version(-1);
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull(request, &r).ok());
  return r.values();
}

TEST(ShardedModelTest, PushesBatchNormStatisticsWithTheirDecay) {
  auto model = std::make_shared<BatchNormModel>();
  ShardedModel sharded(model, 1);
  model->train();
  model->forward({{"x", Batch(0)}}, true);
  proto::PushRequest request;
  ASSERT_TRUE(sharded.FillPush(0, &request).ok());
  ASSERT_EQ(request.buffer_updates_size(), 3);
  ASSERT_EQ(request.buffer_decays_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const std::string& name = request.buffer_updates(i).name();
    EXPECT_DOUBLE_EQ(request.buffer_decays(i), name == "bn.num_batches_tracked" ? 1.0 : 0.9)
        << name;
  }
  // A forward starts from what the servers hold: the buffers go back.
  sharded.RestoreBuffers();
  EXPECT_TRUE(torch::equal(model->bn_->running_mean, torch::zeros({3})));
  EXPECT_EQ(model->bn_->num_batches_tracked.item<int64_t>(), 0);
}

TEST(ShardedModelTest, APushHeldWhereItLiesNamesTheValuesACopiedPushCarries) {
  auto model = std::make_shared<BatchNormModel>();
  ShardedModel sharded(model, 1);
  model->train();
  model->forward({{"x", Batch(0)}}, true).sum().backward();
  proto::PushRequest copied;
  ASSERT_TRUE(sharded.FillPush(0, &copied).ok());
  proto::PushRequest described;
  ShardedModel::Held held;
  ASSERT_TRUE(sharded.FillPush(0, &described, &held).ok());
  ASSERT_EQ(described.gradients_size(), copied.gradients_size());
  ASSERT_EQ(described.buffer_updates_size(), copied.buffer_updates_size());
  ASSERT_EQ(held.bytes.size(),
            static_cast<size_t>(copied.gradients_size() + copied.buffer_updates_size()));
  // Gradients, then buffer updates: the request's order.
  size_t k = 0;
  for (const auto* field : {&described.gradients(), &described.buffer_updates()}) {
    const auto& same =
        field == &described.gradients() ? copied.gradients() : copied.buffer_updates();
    for (int i = 0; i < field->size(); ++i, ++k) {
      EXPECT_EQ(field->Get(i).name(), same.Get(i).name());
      EXPECT_TRUE(field->Get(i).content().empty());
      EXPECT_EQ(held.bytes[k], same.Get(i).content()) << same.Get(i).name();
    }
  }
  EXPECT_EQ(described.buffer_decays_size(), copied.buffer_decays_size());
}

TEST(ShardedModelTest, FindsNonFiniteGradients) {
  auto model = std::make_shared<BatchNormModel>();
  ShardedModel sharded(model, 1);
  model->forward({{"x", Batch(1)}}, true).sum().backward();
  EXPECT_EQ(sharded.FirstNonFinite(), std::nullopt);
  model->bn_->weight.mutable_grad()[1] = std::nanf("");
  EXPECT_EQ(sharded.FirstNonFinite(), "the gradient of 'bn.weight'");
}

// Sixteen workers pull the same model, each normalizes its own minibatch,
// and all push at once into one synchronous step. The server's running
// statistics must be those of one BatchNorm that saw the sixteen
// minibatches one after another (in the step's order: the tasks'), not the
// sum of sixteen changes.
TEST(ShardedModelTest, SixteenConcurrentWorkersKeepTheSequentialRunningStatistics) {
  constexpr int kWorkers = 16;
  ps::ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 0;
  options.instance = kInstance;
  ps::ParameterStore store(options);
  {
    auto initial = std::make_shared<BatchNormModel>();
    ShardedModel sharded(initial, 1);
    auto values = sharded.Encode(0);
    ASSERT_TRUE(values.ok());
    bool accepted;
    int64_t version;
    ASSERT_TRUE(store.Init(*values, &accepted, &version).ok());
  }
  std::vector<int32_t> group;
  for (int i = 0; i < kWorkers; ++i) group.push_back(i);
  store.SetGroup(1, group);

  const proto::ModelValues pulled = PullAll(store);
  std::vector<proto::PushRequest> pushes(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    auto model = std::make_shared<BatchNormModel>();
    ShardedModel sharded(model, 1);
    ASSERT_TRUE(sharded.Apply(pulled).ok());
    model->train();
    model->forward({{"x", Batch(i)}}, true).sum().backward();
    ASSERT_TRUE(sharded.FillPush(0, &pushes[i]).ok());
    pushes[i].set_worker_id(i);
    pushes[i].set_instance(kInstance);
    pushes[i].mutable_tag()->set_task_id(kWorkers - 1 - i);  // the step's order is reversed
    pushes[i].mutable_tag()->set_minibatch(0);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      proto::PushResponse out;
      EXPECT_TRUE(store.Push(pushes[i], &out).ok());
      EXPECT_TRUE(out.accepted());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(store.version(), 1);

  auto sequential = std::make_shared<BatchNormModel>();
  sequential->train();
  for (int task = 0; task < kWorkers; ++task) {
    sequential->forward({{"x", Batch(kWorkers - 1 - task)}}, true);
  }
  auto buffers = rpc::DecodeTensors(PullAll(store).buffers());
  ASSERT_TRUE(buffers.ok());
  EXPECT_TRUE(
      torch::allclose((*buffers)["bn.running_mean"], sequential->bn_->running_mean, 1e-5, 1e-5))
      << (*buffers)["bn.running_mean"] << sequential->bn_->running_mean;
  EXPECT_TRUE(
      torch::allclose((*buffers)["bn.running_var"], sequential->bn_->running_var, 1e-5, 1e-5))
      << (*buffers)["bn.running_var"] << sequential->bn_->running_var;
  EXPECT_EQ((*buffers)["bn.num_batches_tracked"].item<int64_t>(), kWorkers);
}

}  // namespace
}  // namespace elasticdl::worker
