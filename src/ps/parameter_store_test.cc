#include "ps/parameter_store.h"

#include <gtest/gtest.h>

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

torch::Tensor PullW(ParameterStore& store) {
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull(-1, &r).ok());
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
  ASSERT_TRUE(store.Pull(-1, &before).ok());
  EXPECT_FALSE(before.initialized());
  ASSERT_TRUE(store.Init(Values(1), &accepted, &version).ok());
  proto::PullResponse r;
  ASSERT_TRUE(store.Pull(0, &r).ok());
  EXPECT_EQ(r.values().parameters_size(), 0);
  ASSERT_TRUE(store.Pull(-1, &r).ok());
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
        EXPECT_TRUE(store.Pull(-1, &r).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.version(), 400);
  EXPECT_NEAR(PullW(store)[0].item<float>(), 40, 1e-3);
}

TEST(ParameterStoreTest, BufferDeltasAddUp) {
  ParameterStore store({});
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(Values(0), &accepted, &version).ok());
  proto::PushRequest r = Push(0, 0);
  ASSERT_TRUE(rpc::EncodeTensor("bn.mean", torch::full({2}, 0.5), r.add_buffer_deltas()).ok());
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(r, &out).ok());
  ASSERT_TRUE(store.Push(r, &out).ok());
  proto::PullResponse pulled;
  ASSERT_TRUE(store.Pull(-1, &pulled).ok());
  auto buffers = rpc::DecodeTensors(pulled.values().buffers());
  EXPECT_FLOAT_EQ((*buffers)["bn.mean"][1].item<float>(), 1.0);
}

}  // namespace
}  // namespace elasticdl::ps
