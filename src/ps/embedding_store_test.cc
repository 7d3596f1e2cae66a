// Embedding tables in a ParameterStore: pulls and pushes of rows under the
// store's tags, versions and steps, and checkpoints across numbers of shards.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "ps/checkpoint.h"
#include "ps/parameter_store.h"
#include "ps/placement.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

constexpr int64_t kStoreDim = 8;

proto::ModelValues Model() {
  proto::ModelValues v;
  EXPECT_TRUE(rpc::EncodeTensor("w", torch::zeros({2}), v.add_parameters()).ok());
  proto::EmbeddingTableSpec* users = v.add_embedding_tables();
  users->set_name("users");
  users->set_dim(kStoreDim);
  users->set_dtype(proto::DT_FLOAT32);
  users->mutable_initializer()->set_kind(proto::EmbeddingInitializer::NORMAL);
  users->mutable_initializer()->set_b(0.1);
  users->set_seed(9);
  proto::EmbeddingTableSpec* items = v.add_embedding_tables();
  *items = *users;
  items->set_name("items");
  items->set_dim(2);
  items->set_num_rows(1000);
  items->mutable_optimizer()->mutable_adagrad()->set_lr(0.5);
  items->mutable_optimizer()->mutable_adagrad()->set_eps(1e-10);
  return v;
}

ParameterStoreOptions Options(int ps_id = 0, int num_ps = 1) {
  ParameterStoreOptions o;
  o.optimizer = torch::optim::AdamOptions(0.01);
  o.ps_id = ps_id;
  o.num_ps = num_ps;
  return o;
}

std::unique_ptr<ParameterStore> Initialized(ParameterStoreOptions options) {
  // The dense parameters of this shard, as a worker initializes it.
  proto::ModelValues model = Model();
  if (ps::ShardOf("w", options.num_ps) != options.ps_id) model.clear_parameters();
  auto store = std::make_unique<ParameterStore>(std::move(options));
  bool accepted = false;
  int64_t version = 0;
  Status s = store->Init(model, &accepted, &version);
  EXPECT_TRUE(s.ok()) << s;
  return store;
}

proto::EmbeddingRows Rows(const std::string& table, const std::vector<int64_t>& ids,
                          const torch::Tensor& values = {}) {
  proto::EmbeddingRows rows;
  rows.set_table(table);
  for (int64_t id : ids) rows.add_ids(id);
  if (values.defined()) {
    torch::Tensor v = values.contiguous();
    rows.set_values(static_cast<const char*>(v.data_ptr()), v.numel() * sizeof(float));
  }
  return rows;
}

StatusOr<torch::Tensor> PullRows(ParameterStore& store, const std::string& table,
                                 const std::vector<int64_t>& ids, int64_t dim = kStoreDim) {
  proto::PullRowsRequest request;
  *request.add_tables() = Rows(table, ids);
  proto::PullRowsResponse response;
  EDL_RETURN_IF_ERROR(store.PullRows(request, &response));
  torch::Tensor out = torch::empty({static_cast<int64_t>(ids.size()), dim});
  std::memcpy(out.data_ptr(), response.tables(0).values().data(),
              response.tables(0).values().size());
  return out;
}

proto::PushRequest SparsePush(int64_t task, int64_t minibatch, int64_t base_version,
                              uint64_t instance, const proto::EmbeddingRows& rows) {
  proto::PushRequest r;
  r.set_base_version(base_version);
  r.set_instance(instance);
  r.mutable_tag()->set_task_id(task);
  r.mutable_tag()->set_minibatch(minibatch);
  *r.add_sparse_gradients() = rows;
  return r;
}

TEST(EmbeddingStoreTest, PushedRowsAreAppliedOncePerTag) {
  ParameterStoreOptions o = Options();
  o.optimizer = torch::optim::SGDOptions(0.5);
  auto store = Initialized(o);
  const std::vector<int64_t> ids = {4, -2, 1LL << 50};
  auto initial = PullRows(*store, "users", ids);
  ASSERT_TRUE(initial.ok()) << initial.status();
  EXPECT_NEAR(initial->std().item<float>(), 0.1, 0.05);

  const torch::Tensor g = torch::ones({3, kStoreDim});
  proto::PushResponse out;
  proto::PushRequest push = SparsePush(1, 0, 0, store->instance(), Rows("users", ids, g));
  ASSERT_TRUE(store->Push(push, &out).ok());
  EXPECT_TRUE(out.accepted());
  ASSERT_TRUE(store->Push(push, &out).ok());  // the same minibatch again
  EXPECT_TRUE(out.duplicate());
  EXPECT_TRUE(torch::allclose(*PullRows(*store, "users", ids), *initial - 0.5));
  EXPECT_EQ(store->embedding_counters().at("users").rows, 3);
  EXPECT_EQ(store->version(), 1);
}

TEST(EmbeddingStoreTest, ATableOfTheModelsOptimizerFollowsTheSchedule) {
  // "users" follows the model's SGD(0.5), halved every version; "items" has
  // an Adagrad of its own, which keeps its lr (another optimizer in PyTorch's
  // terms, without a scheduler): as a store without the schedule steps it.
  // Each push is a step, applied at once or as a synchronous step of one.
  for (bool async : {true, false}) {
    SCOPED_TRACE(async ? "asynchronous" : "synchronous");
    ParameterStoreOptions o = Options();
    o.optimizer = torch::optim::SGDOptions(0.5);
    o.use_async = async;
    o.grads_to_wait = 1;
    ParameterStoreOptions constant = o;
    o.lr_schedule = LearningRateSchedule::Step(1, 0.5);
    auto store = Initialized(o);
    auto reference = Initialized(constant);
    const std::vector<int64_t> ids = {3, 9};
    auto users = PullRows(*store, "users", ids);
    ASSERT_TRUE(users.ok()) << users.status();
    for (int64_t v = 0; v < 3; ++v) {
      for (ParameterStore* s : {store.get(), reference.get()}) {
        proto::PushRequest push =
            SparsePush(1, v, v, s->instance(), Rows("users", ids, torch::ones({2, kStoreDim})));
        *push.add_sparse_gradients() = Rows("items", ids, torch::full({2, 2}, 0.25 * (v + 1)));
        proto::PushResponse out;
        ASSERT_TRUE(s->Push(push, &out).ok());
        ASSERT_TRUE(out.accepted());
        ASSERT_EQ(s->version(), v + 1);
      }
    }
    // 0.5 + 0.25 + 0.125 where the constant rate took 3 * 0.5.
    EXPECT_TRUE(torch::allclose(*PullRows(*store, "users", ids), *users - 0.875));
    EXPECT_TRUE(torch::allclose(*PullRows(*reference, "users", ids), *users - 1.5));
    EXPECT_TRUE(
        torch::equal(*PullRows(*store, "items", ids, 2), *PullRows(*reference, "items", ids, 2)));
  }
}

TEST(EmbeddingStoreTest, RefusesBadRowsAndChangesNothing) {
  auto store = Initialized(Options());
  const uint64_t instance = store->instance();
  auto refused = [&](const proto::EmbeddingRows& rows) {
    proto::PushResponse out;
    Status s = store->Push(SparsePush(1, 0, 0, instance, rows), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_EQ(refused(Rows("nope", {1}, torch::ones({1, kStoreDim}))),
            "rows of embedding table 'nope', which the model does not have");
  EXPECT_EQ(refused(Rows("users", {1, 1}, torch::ones({2, kStoreDim}))),
            "embedding table 'users': id 1 twice in one request");
  EXPECT_EQ(refused(Rows("items", {1000}, torch::ones({1, 2}))),
            "embedding table 'items': id 1000 outside [0, 1000)");
  EXPECT_EQ(refused(Rows("items", {3, -1}, torch::ones({2, 2}))),
            "embedding table 'items': id -1 outside [0, 1000)");
  EXPECT_EQ(refused(Rows("users", {1, 2}, torch::ones({1, kStoreDim}))),
            "embedding table 'users': 32 bytes of gradients for 2 rows of 32 bytes");
  EXPECT_EQ(refused(Rows("users", {1}, torch::full({1, kStoreDim}, NAN))),
            "the gradient of embedding table 'users' holds non-finite values; nothing applied");
  EXPECT_EQ(store->version(), 0);
  EXPECT_TRUE(store->applied().empty());
  EXPECT_EQ(store->embedding_counters().at("users").rows, 0);

  // A row of another shard.
  auto sharded = Initialized(Options(0, 2));
  int64_t foreign = 0;
  while (ps::RowShardOf(foreign, 2) == 0) ++foreign;
  auto pulled = PullRows(*sharded, "users", {foreign});
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pulled.status().message().find("is held by parameter server 1, not 0"),
            std::string::npos);
}

TEST(EmbeddingStoreTest, ASyncStepAveragesTheRowsOfItsPushesInTagOrder) {
  ParameterStoreOptions o = Options();
  o.optimizer = torch::optim::SGDOptions(1);
  o.use_async = false;
  o.grads_to_wait = 2;
  auto store = Initialized(o);
  const torch::Tensor initial = *PullRows(*store, "users", {1, 2, 3});
  proto::PushResponse out;
  // Worker A trains rows 1 and 2, worker B rows 2 and 3.
  ASSERT_TRUE(store
                  ->Push(SparsePush(7, 0, 0, store->instance(),
                                    Rows("users", {1, 2}, torch::full({2, kStoreDim}, 2.0))),
                         &out)
                  .ok());
  EXPECT_TRUE(out.step_pending() || out.version() == 0);
  EXPECT_TRUE(torch::equal(*PullRows(*store, "users", {1, 2, 3}), initial));  // not yet
  ASSERT_TRUE(store
                  ->Push(SparsePush(3, 0, 0, store->instance(),
                                    Rows("users", {3, 2}, torch::full({2, kStoreDim}, 4.0))),
                         &out)
                  .ok());
  EXPECT_EQ(out.version(), 1);
  torch::Tensor expected = initial.clone();
  expected[0] -= 1.0;  // 2 / 2
  expected[1] -= 3.0;  // (2 + 4) / 2
  expected[2] -= 2.0;  // 4 / 2
  EXPECT_TRUE(torch::allclose(*PullRows(*store, "users", {1, 2, 3}), expected));

  // A table only one push of the step has rows of: its rows as they came,
  // averaged over the step's pushes all the same.
  ASSERT_TRUE(store
                  ->Push(SparsePush(7, 1, 1, store->instance(),
                                    Rows("users", {1}, torch::full({1, kStoreDim}, 8.0))),
                         &out)
                  .ok());
  ASSERT_TRUE(store
                  ->Push(SparsePush(3, 1, 1, store->instance(),
                                    Rows("items", {5}, torch::full({1, 2}, 6.0))),
                         &out)
                  .ok());
  EXPECT_EQ(out.version(), 2);
  expected[0] -= 4.0;  // 8 / 2
  EXPECT_TRUE(torch::allclose(*PullRows(*store, "users", {1, 2, 3}), expected));
}

// Trains rows of both tables on `stores` (a job's shards), routing each row
// to its shard as a worker does.
void Train(std::vector<std::unique_ptr<ParameterStore>>& stores, int64_t task, int64_t minibatch,
           const std::vector<int64_t>& ids, uint64_t seed) {
  const int n = static_cast<int>(stores.size());
  torch::manual_seed(seed);
  torch::Tensor gu = torch::randn({static_cast<int64_t>(ids.size()), kStoreDim});
  torch::Tensor gi = torch::randn({static_cast<int64_t>(ids.size()), 2});
  for (int shard = 0; shard < n; ++shard) {
    std::vector<int64_t> mine;
    std::vector<int64_t> rows;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ps::RowShardOf(ids[i], n) == shard) {
        mine.push_back(ids[i]);
        rows.push_back(static_cast<int64_t>(i));
      }
    }
    torch::Tensor index = torch::tensor(rows, torch::kLong);
    proto::PushRequest push =
        SparsePush(task, minibatch, stores[shard]->version(), stores[shard]->instance(),
                   Rows("users", mine, gu.index_select(0, index)));
    *push.add_sparse_gradients() = Rows("items", mine, gi.index_select(0, index));
    proto::PushResponse out;
    Status s = stores[shard]->Push(push, &out);
    ASSERT_TRUE(s.ok() && out.accepted()) << s;
  }
}

// Every row of `ids` as the shards that hold them read it.
torch::Tensor ReadAll(std::vector<std::unique_ptr<ParameterStore>>& stores,
                      const std::string& table, const std::vector<int64_t>& ids, int64_t dim) {
  std::vector<torch::Tensor> rows;
  for (int64_t id : ids) {
    auto& store = stores[ps::RowShardOf(id, static_cast<int>(stores.size()))];
    rows.push_back(*PullRows(*store, table, {id}, dim));
  }
  return torch::cat(rows);
}

TEST(EmbeddingStoreTest, CheckpointOfTwoServersRestoresIntoThreeAndIntoOne) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 600; ++i) ids.push_back(i);
  std::vector<std::unique_ptr<ParameterStore>> two;
  for (int s = 0; s < 2; ++s) two.push_back(Initialized(Options(s, 2)));
  Train(two, 1, 0, ids, 1);
  Train(two, 1, 1, std::vector<int64_t>(ids.begin(), ids.begin() + 200), 2);  // steps differ

  const std::string dir = ::testing::TempDir() + "/embedding-reshard";
  std::vector<proto::ShardCheckpoint> files;
  for (auto& store : two) {
    auto snapshot = store->Snapshot();
    ASSERT_TRUE(snapshot.ok());
    proto::ShardCheckpoint checkpoint;
    ASSERT_TRUE(EncodeSnapshot(std::move(*snapshot), &checkpoint).ok());
    ASSERT_TRUE(WriteCheckpoint(dir, &checkpoint).ok());
  }
  auto read = ReadNewestCompleteCheckpoint(dir);
  ASSERT_TRUE(read.ok()) << read.status();

  for (int n : {3, 1}) {
    std::vector<std::unique_ptr<ParameterStore>> restored;
    int64_t rows = 0;
    for (int s = 0; s < n; ++s) {
      restored.push_back(std::make_unique<ParameterStore>(Options(s, n)));
      Status init = restored.back()->InitFromCheckpoints(*read);
      ASSERT_TRUE(init.ok()) << init;
      rows += restored.back()->embedding_counters().at("users").rows;
    }
    EXPECT_EQ(rows, 600) << n << " servers";
    EXPECT_TRUE(torch::equal(ReadAll(restored, "users", ids, kStoreDim),
                             ReadAll(two, "users", ids, kStoreDim)));
    EXPECT_TRUE(torch::equal(ReadAll(restored, "items", ids, 2), ReadAll(two, "items", ids, 2)));
  }
  // Slots and steps came along: one more identical step keeps them equal
  // (Adam's moments and per-row steps, Adagrad's sums).
  std::vector<std::unique_ptr<ParameterStore>> three;
  for (int s = 0; s < 3; ++s) {
    three.push_back(std::make_unique<ParameterStore>(Options(s, 3)));
    ASSERT_TRUE(three.back()->InitFromCheckpoints(*read).ok());
  }
  Train(two, 2, 0, ids, 3);
  Train(three, 2, 0, ids, 3);
  EXPECT_TRUE(torch::allclose(ReadAll(three, "users", ids, kStoreDim),
                              ReadAll(two, "users", ids, kStoreDim), 1e-6, 1e-7));
  EXPECT_TRUE(
      torch::allclose(ReadAll(three, "items", ids, 2), ReadAll(two, "items", ids, 2), 1e-6, 1e-7))
      << (ReadAll(three, "items", ids, 2) - ReadAll(two, "items", ids, 2)).abs().max();
}

TEST(EmbeddingStoreTest, RestoredServerHoldsItsRowsAndTheirTags) {
  auto store = Initialized(Options());
  std::vector<std::unique_ptr<ParameterStore>> one;
  one.push_back(std::move(store));
  std::vector<int64_t> ids = {1, 2, 3, 500};
  Train(one, 4, 0, ids, 5);
  auto snapshot = one[0]->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  proto::ShardCheckpoint checkpoint;
  ASSERT_TRUE(EncodeSnapshot(std::move(*snapshot), &checkpoint).ok());

  ParameterStore restored(Options());
  ASSERT_TRUE(restored.Restore(checkpoint).ok());
  EXPECT_EQ(restored.applied().at(4), 1);
  std::vector<std::unique_ptr<ParameterStore>> view;
  view.push_back(std::make_unique<ParameterStore>(Options()));
  ASSERT_TRUE(view[0]->Restore(checkpoint).ok());
  EXPECT_TRUE(
      torch::equal(ReadAll(view, "users", ids, kStoreDim), ReadAll(one, "users", ids, kStoreDim)));

  // The model offered afterwards must have the same tables.
  proto::ModelValues other = Model();
  other.mutable_embedding_tables(0)->set_dim(kStoreDim + 1);
  bool accepted = true;
  int64_t version = 0;
  Status s = restored.Init(other, &accepted, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("embedding table 'users' (dimension 9"), std::string::npos) << s;
  EXPECT_TRUE(restored.Init(Model(), &accepted, &version).ok());
}

}  // namespace
}  // namespace elasticdl::ps
