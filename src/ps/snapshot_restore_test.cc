// Snapshots and restores of a ParameterStore: a restored store continues
// bit for bit like one that never stopped, and checkpoints reshard.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/parameter_store.h"
#include "ps/placement.h"
#include "ps/shard_state.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

constexpr uint64_t kRestoreInstance = 7;

// Deterministic values for parameter `name`.
torch::Tensor ValueOf(const std::string& name, std::vector<int64_t> shape, int seed) {
  auto gen =
      at::detail::createCPUGenerator(static_cast<uint64_t>(std::hash<std::string>()(name)) + seed);
  return torch::randn(shape, gen);
}

struct Model {
  std::map<std::string, std::vector<int64_t>> parameters;
  std::map<std::string, std::vector<int64_t>> buffers;
};

Model SmallModel() {
  Model m;
  for (int i = 0; i < 8; ++i) m.parameters["layer" + std::to_string(i) + ".weight"] = {3, 2};
  m.parameters["bias"] = {4};
  m.buffers["bn.running_mean"] = {4};
  m.buffers["bn.num_batches"] = {1};
  return m;
}

bool Owns(const std::string& name, int ps_id, int num_ps) {
  return ps::ShardOf(name, num_ps) == ps_id;
}

proto::ModelValues ValuesFor(const Model& m, int ps_id, int num_ps) {
  proto::ModelValues v;
  for (const auto& [name, shape] : m.parameters) {
    if (!Owns(name, ps_id, num_ps)) continue;
    EXPECT_TRUE(rpc::EncodeTensor(name, ValueOf(name, shape, 0), v.add_parameters()).ok());
  }
  for (const auto& [name, shape] : m.buffers) {
    if (!Owns(name, ps_id, num_ps)) continue;
    EXPECT_TRUE(rpc::EncodeTensor(name, ValueOf(name, shape, 1), v.add_buffers()).ok());
  }
  return v;
}

// Push number `step` of a deterministic sequence: random gradients for the
// parameters the shard owns, skipping one parameter on odd steps (so that
// per-parameter optimizer steps differ), and buffer deltas.
proto::PushRequest PushFor(const Model& m, int ps_id, int num_ps, int step, int64_t base_version,
                           uint64_t instance) {
  proto::PushRequest r;
  r.set_base_version(base_version);
  r.set_instance(instance);
  r.mutable_tag()->set_task_id(100 + step / 4);
  r.mutable_tag()->set_minibatch(step % 4);
  int i = 0;
  for (const auto& [name, shape] : m.parameters) {
    if (!Owns(name, ps_id, num_ps)) continue;
    if (step % 2 == 1 && i++ == 0) continue;
    EXPECT_TRUE(rpc::EncodeTensor(name, ValueOf(name, shape, 10 + step), r.add_gradients()).ok());
  }
  for (const auto& [name, shape] : m.buffers) {
    if (!Owns(name, ps_id, num_ps)) continue;
    EXPECT_TRUE(
        rpc::EncodeTensor(name, ValueOf(name, shape, 50 + step), r.add_buffer_updates()).ok());
  }
  return r;
}

std::unique_ptr<ParameterStore> NewStore(const OptimizerSpec& optimizer, int ps_id = 0,
                                         int num_ps = 1, uint64_t instance = kRestoreInstance) {
  ParameterStoreOptions options;
  options.optimizer = optimizer;
  options.ps_id = ps_id;
  options.num_ps = num_ps;
  options.instance = instance;
  return std::make_unique<ParameterStore>(options);
}

void Train(ParameterStore& store, const Model& m, int ps_id, int num_ps, int from, int to) {
  for (int step = from; step < to; ++step) {
    proto::PushResponse out;
    Status s = store.Push(PushFor(m, ps_id, num_ps, step, store.version(), store.instance()), &out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(out.accepted());
    ASSERT_FALSE(out.duplicate());
  }
}

rpc::NamedTensors Pulled(ParameterStore& store, bool buffers = false) {
  proto::PullResponse r;
  EXPECT_TRUE(store.Pull({}, &r).ok());
  auto t = rpc::DecodeTensors(buffers ? r.values().buffers() : r.values().parameters());
  EXPECT_TRUE(t.ok());
  return *t;
}

void ExpectIdentical(const rpc::NamedTensors& a, const rpc::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
  }
}

proto::ShardCheckpoint Checkpoint(const ParameterStore& store) {
  auto snapshot = store.Snapshot();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  proto::ShardCheckpoint checkpoint;
  EXPECT_TRUE(EncodeSnapshot(*snapshot, &checkpoint).ok());
  // Through the bytes, as a file would.
  proto::ShardCheckpoint parsed;
  EXPECT_TRUE(parsed.ParseFromString(checkpoint.SerializeAsString()));
  return parsed;
}

class RestoreTest : public testing::TestWithParam<OptimizerSpec> {};

TEST_P(RestoreTest, RestoredStoreContinuesBitForBit) {
  const Model m = SmallModel();
  auto live = NewStore(GetParam());
  bool accepted;
  int64_t version;
  ASSERT_TRUE(live->Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  Train(*live, m, 0, 1, 0, 6);
  proto::ShardCheckpoint checkpoint = Checkpoint(*live);
  EXPECT_EQ(checkpoint.version(), 6);

  auto restored = NewStore(GetParam(), 0, 1, kRestoreInstance + 1);
  Status s = restored->Restore(checkpoint);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(restored->version(), 6);
  EXPECT_EQ(restored->applied(), live->applied());
  EXPECT_EQ(restored->applied(), (std::map<int64_t, int64_t>{{100, 4}, {101, 2}}));
  ExpectIdentical(Pulled(*live), Pulled(*restored));

  Train(*live, m, 0, 1, 6, 12);
  Train(*restored, m, 0, 1, 6, 12);
  ExpectIdentical(Pulled(*live), Pulled(*restored));
  ExpectIdentical(Pulled(*live, true), Pulled(*restored, true));

  // Workers' Init after a restore is ignored.
  ASSERT_TRUE(restored->Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  EXPECT_FALSE(accepted);
  EXPECT_EQ(version, 12);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, RestoreTest,
    testing::Values(
        OptimizerSpec(torch::optim::SGDOptions(0.1).momentum(0.9)),
        OptimizerSpec(torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true)),
        OptimizerSpec(torch::optim::AdamOptions(0.01)),
        OptimizerSpec(torch::optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1)),
        OptimizerSpec(torch::optim::AdamWOptions(0.01).amsgrad(true).weight_decay(0.1)),
        OptimizerSpec(torch::optim::AdagradOptions(0.1).lr_decay(0.01)),
        OptimizerSpec(torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true))));

TEST(RestoreTest, RefusesAnotherShardsCheckpointAndASecondInit) {
  const Model m = SmallModel();
  auto live = NewStore(torch::optim::SGDOptions(0.1), 1, 2);
  bool accepted;
  int64_t version;
  ASSERT_TRUE(live->Init(ValuesFor(m, 1, 2), &accepted, &version).ok());
  proto::ShardCheckpoint checkpoint = Checkpoint(*live);
  auto other = NewStore(torch::optim::SGDOptions(0.1), 0, 2);
  EXPECT_EQ(other->Restore(checkpoint).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(live->Restore(checkpoint).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RestoreTest, InitAfterCheckpointNamesMissingParameters) {
  Model m = SmallModel();
  auto live = NewStore(torch::optim::SGDOptions(0.1));
  bool accepted;
  int64_t version;
  ASSERT_TRUE(live->Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  auto restored = NewStore(torch::optim::SGDOptions(0.1));
  ASSERT_TRUE(restored->InitFromCheckpoints({Checkpoint(*live)}).ok());
  m.parameters["head.weight"] = {2, 2};
  Status s = restored->Init(ValuesFor(m, 0, 1), &accepted, &version);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("lacks the model's parameter(s) 'head.weight'"),
            std::string::npos)
      << s;
}

// A job with `from` shards trains; a new job with `to` shards starts from
// its checkpoint: every parameter lands exactly, on the shard that owns it.
void Reshard(int from, int to) {
  const Model m = SmallModel();
  const OptimizerSpec adam = torch::optim::AdamOptions(0.01);
  std::vector<proto::ShardCheckpoint> files;
  rpc::NamedTensors trained;
  rpc::NamedTensors trained_buffers;
  for (int i = 0; i < from; ++i) {
    auto store = NewStore(adam, i, from);
    bool accepted;
    int64_t version;
    ASSERT_TRUE(store->Init(ValuesFor(m, i, from), &accepted, &version).ok());
    Train(*store, m, i, from, 0, 5);
    files.push_back(Checkpoint(*store));
    for (auto& [name, t] : Pulled(*store)) trained[name] = t;
    for (auto& [name, t] : Pulled(*store, true)) trained_buffers[name] = t;
  }
  ASSERT_EQ(trained.size(), m.parameters.size());
  rpc::NamedTensors restored;
  rpc::NamedTensors restored_buffers;
  for (int i = 0; i < to; ++i) {
    auto store = NewStore(adam, i, to);
    Status s = store->InitFromCheckpoints(files);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(store->version(), 5);
    EXPECT_TRUE(store->applied().empty());
    for (auto& [name, t] : Pulled(*store)) {
      EXPECT_TRUE(Owns(name, i, to)) << name;
      EXPECT_TRUE(restored.emplace(name, t).second) << name;
    }
    for (auto& [name, t] : Pulled(*store, true)) restored_buffers[name] = t;
    // The optimizer state came along: a step matches one on the old shard.
    auto snapshot = store->Snapshot();
    ASSERT_TRUE(snapshot.ok());
    for (const auto& [name, p] : snapshot->parameters) {
      EXPECT_EQ(p.slots.size(), 2u) << name;  // exp_avg, exp_avg_sq
      EXPECT_GT(p.step, 0) << name;
    }
  }
  ExpectIdentical(trained, restored);
  ExpectIdentical(trained_buffers, restored_buffers);
}

TEST(ReshardTest, TwoShardsToThree) { Reshard(2, 3); }
TEST(ReshardTest, ThreeShardsToOne) { Reshard(3, 1); }

TEST(ReshardTest, OtherOptimizerStartsFresh) {
  const Model m = SmallModel();
  auto store = NewStore(torch::optim::AdamOptions(0.01));
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store->Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  Train(*store, m, 0, 1, 0, 2);
  auto sgd = NewStore(torch::optim::SGDOptions(0.1).momentum(0.9));
  ASSERT_TRUE(sgd->InitFromCheckpoints({Checkpoint(*store)}).ok());
  ExpectIdentical(Pulled(*store), Pulled(*sgd));
  auto snapshot = sgd->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  for (const auto& [name, p] : snapshot->parameters) EXPECT_TRUE(p.slots.empty()) << name;
}

// AdamW without weight decay steps as Adam does, so a job that switches one
// for the other between checkpoint and restart goes on bit for bit: the
// moments and steps carry over, as PyTorch's load_state_dict carries them.
TEST(ReshardTest, AdamsStateCarriesIntoAdamWAndBack) {
  const Model m = SmallModel();
  const std::vector<std::pair<OptimizerSpec, OptimizerSpec>> pairs = {
      {torch::optim::AdamOptions(0.01), torch::optim::AdamWOptions(0.01).weight_decay(0)},
      {torch::optim::AdamWOptions(0.01).weight_decay(0).amsgrad(true),
       torch::optim::AdamOptions(0.01).amsgrad(true)}};
  for (const auto& [written, now] : pairs) {
    SCOPED_TRACE(DescribeOptimizer(written) + " into " + DescribeOptimizer(now));
    auto live = NewStore(written);
    bool accepted;
    int64_t version;
    ASSERT_TRUE(live->Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
    Train(*live, m, 0, 1, 0, 6);
    const proto::ShardCheckpoint checkpoint = Checkpoint(*live);
    auto restored = NewStore(now, 0, 1, kRestoreInstance + 1);
    Status s = restored->Restore(checkpoint);
    ASSERT_TRUE(s.ok()) << s;
    auto started = NewStore(now);
    s = started->InitFromCheckpoints({checkpoint});
    ASSERT_TRUE(s.ok()) << s;
    Train(*live, m, 0, 1, 6, 12);
    Train(*restored, m, 0, 1, 6, 12);
    Train(*started, m, 0, 1, 20, 26);  // a new job's tasks
    ExpectIdentical(Pulled(*live), Pulled(*restored));
    auto other = NewStore(written);
    ASSERT_TRUE(other->InitFromCheckpoints({checkpoint}).ok());
    Train(*other, m, 0, 1, 20, 26);
    ExpectIdentical(Pulled(*other), Pulled(*started));
  }
}

TEST(SnapshotTest, SyncModeLeavesOutPendingPushes) {
  ParameterStoreOptions options;
  options.use_async = false;
  options.grads_to_wait = 2;
  options.instance = kRestoreInstance;
  ParameterStore store(options);
  const Model m = SmallModel();
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  const rpc::NamedTensors initial = Pulled(store);
  const rpc::NamedTensors initial_buffers = Pulled(store, true);
  proto::PushResponse out;
  ASSERT_TRUE(store.Push(PushFor(m, 0, 1, 0, 0, kRestoreInstance), &out).ok());  // task 100, mb 0
  EXPECT_EQ(store.applied(), (std::map<int64_t, int64_t>{{100, 1}}));
  auto pending = store.Snapshot();
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->version, 0);
  EXPECT_TRUE(pending->applied.empty());
  for (const auto& [name, t] : initial) {
    EXPECT_TRUE(torch::equal(pending->parameters.at(name).value, t)) << name;
  }
  for (const auto& [name, t] : initial_buffers) {
    EXPECT_TRUE(torch::equal(pending->buffers.at(name), t)) << name;
  }
  ASSERT_TRUE(store.Push(PushFor(m, 0, 1, 1, 0, kRestoreInstance), &out).ok());  // mb 1: a step
  EXPECT_EQ(out.version(), 1);
  auto stepped = store.Snapshot();
  ASSERT_TRUE(stepped.ok());
  EXPECT_EQ(stepped->version, 1);
  EXPECT_EQ(stepped->applied, (std::map<int64_t, int64_t>{{100, 2}}));
}

TEST(SnapshotTest, DeliveredAfterInitAndEveryNVersions) {
  std::vector<int64_t> versions;
  ParameterStoreOptions options;
  options.instance = kRestoreInstance;
  options.snapshot_every = 3;
  options.on_snapshot = [&versions](ShardSnapshot s) { versions.push_back(s.version); };
  ParameterStore store(options);
  const Model m = SmallModel();
  bool accepted;
  int64_t version;
  ASSERT_TRUE(store.Init(ValuesFor(m, 0, 1), &accepted, &version).ok());
  Train(store, m, 0, 1, 0, 7);
  EXPECT_EQ(versions, (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(store.Snapshot().status().code(), absl::StatusCode::kOk);
  ParameterStore empty({});
  EXPECT_EQ(empty.Snapshot().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace elasticdl::ps
