#include "ps/embedding_table.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/zoo/optimizer.h"
#include "ps/shard_state.h"

namespace elasticdl::ps {
namespace {

constexpr int64_t kTableDim = 4;

proto::EmbeddingTableSpec Spec(const std::string& name = "t", int64_t dim = kTableDim) {
  proto::EmbeddingTableSpec spec;
  spec.set_name(name);
  spec.set_dim(dim);
  spec.set_dtype(proto::DT_FLOAT32);
  spec.mutable_initializer()->set_kind(proto::EmbeddingInitializer::UNIFORM);
  spec.mutable_initializer()->set_a(-0.5);
  spec.mutable_initializer()->set_b(0.5);
  spec.set_seed(42);
  return spec;
}

proto::OptimizerConfig Config(const OptimizerSpec& spec) {
  proto::OptimizerConfig config;
  EXPECT_TRUE(config.ParseFromString(SerializeOptimizer(spec)));
  return config;
}

std::unique_ptr<EmbeddingTable> Table(const proto::EmbeddingTableSpec& spec,
                                      const proto::OptimizerConfig& optimizer) {
  auto table = EmbeddingTable::Create(spec, optimizer);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
}

torch::Tensor Read(const EmbeddingTable& table, const std::vector<int64_t>& ids) {
  torch::Tensor out = torch::empty({static_cast<int64_t>(ids.size()), table.dim()});
  table.Read(ids.data(), ids.size(), static_cast<char*>(out.data_ptr()));
  return out;
}

void Apply(EmbeddingTable& table, const std::vector<int64_t>& ids, const torch::Tensor& grads,
           int64_t version, double scale = 1, std::optional<double> lr = std::nullopt) {
  torch::Tensor g = grads.contiguous();
  table.Apply(ids.data(), ids.size(), static_cast<const char*>(g.data_ptr()), scale, version,
              lr.value_or(table.base_lr()));
}

// The sparse optimizers against LibTorch's dense ones: a dense tensor of the
// touched rows, stepped with the same gradients, holds the same values.
class AgainstLibTorch : public ::testing::TestWithParam<OptimizerSpec> {};

TEST_P(AgainstLibTorch, TouchedRowsMatchTheDenseOptimizer) {
  const OptimizerSpec& spec = GetParam();
  auto table = Table(Spec(), Config(spec));
  const std::vector<int64_t> ids = {3, 17, -99, int64_t{1} << 40};
  torch::Tensor dense = Read(*table, ids).clone().requires_grad_(true);
  auto optimizer = MakeOptimizer(spec, {dense});
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  torch::manual_seed(1);
  for (int step = 1; step <= 6; ++step) {
    torch::Tensor g = torch::randn({static_cast<int64_t>(ids.size()), kTableDim});
    Apply(*table, ids, g, step);
    dense.mutable_grad() = g.clone();
    (*optimizer)->step();
    EXPECT_TRUE(torch::allclose(Read(*table, ids), dense.detach(), 1e-5, 1e-6))
        << DescribeOptimizer(spec) << " step " << step << "\n"
        << Read(*table, ids) << "\n"
        << dense;
  }
  EXPECT_EQ(table->counters().rows, 4);
}

// A learning rate that changes from step to step (a schedule's) steps the
// rows as LibTorch's optimizer does with its group's lr set before each step.
TEST_P(AgainstLibTorch, AChangingLearningRateStepsAsLibTorchsGroupLr) {
  const OptimizerSpec& spec = GetParam();
  auto table = Table(Spec(), Config(spec));
  const std::vector<int64_t> ids = {5, 6, 7};
  torch::Tensor dense = Read(*table, ids).clone().requires_grad_(true);
  auto optimizer = MakeOptimizer(spec, {dense});
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  torch::manual_seed(2);
  for (int step = 1; step <= 6; ++step) {
    const double lr = table->base_lr() * std::pow(0.5, step / 2);
    torch::Tensor g = torch::randn({static_cast<int64_t>(ids.size()), kTableDim});
    Apply(*table, ids, g, step, 1, lr);
    (*optimizer)->param_groups()[0].options().set_lr(lr);
    dense.mutable_grad() = g.clone();
    (*optimizer)->step();
    EXPECT_TRUE(torch::allclose(Read(*table, ids), dense.detach(), 1e-5, 1e-6))
        << DescribeOptimizer(spec) << " step " << step << " lr " << lr;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, AgainstLibTorch,
    ::testing::Values(
        OptimizerSpec(torch::optim::SGDOptions(0.1)),
        OptimizerSpec(torch::optim::SGDOptions(0.1).momentum(0.9).dampening(0.1)),
        OptimizerSpec(
            torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01)),
        OptimizerSpec(torch::optim::AdamOptions(0.01)),
        OptimizerSpec(torch::optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1)),
        OptimizerSpec(torch::optim::AdamWOptions(0.01)),
        OptimizerSpec(torch::optim::AdamWOptions(0.05).amsgrad(true).weight_decay(0.5)),
        OptimizerSpec(torch::optim::AdagradOptions(0.1)
                          .lr_decay(0.01)
                          .weight_decay(0.01)
                          .initial_accumulator_value(0.1)),
        OptimizerSpec(torch::optim::RMSpropOptions(0.01)),
        OptimizerSpec(torch::optim::RMSpropOptions(0.01).centered(true).momentum(0.5))));

// Adam and AdamW alike: AdamW's decay, too, touches only the rows stepped.
class Lazy : public ::testing::TestWithParam<OptimizerSpec> {};

TEST_P(Lazy, AdamStepsOnlyTheRowsOfEachGradient) {
  const OptimizerSpec& adam = GetParam();
  auto table = Table(Spec(), Config(adam));
  const torch::Tensor initial = Read(*table, {1, 2, 3});
  // Row 1 is trained at versions 1, 2, 3; row 2 only at version 2; row 3 never.
  torch::manual_seed(2);
  std::vector<torch::Tensor> g1 = {torch::randn({1, kTableDim}), torch::randn({1, kTableDim}),
                                   torch::randn({1, kTableDim})};
  torch::Tensor g2 = torch::randn({1, kTableDim});
  Apply(*table, {1}, g1[0], 1);
  Apply(*table, {1, 2}, torch::cat({g1[1], g2}), 2);
  Apply(*table, {1}, g1[2], 3);

  // Each row is what a dense Adam over that row alone gives for the
  // minibatches that trained it: row 2's first step is a first step (bias
  // correction of step 1), not one of step 2.
  auto dense = [&](int row, const std::vector<torch::Tensor>& grads) {
    torch::Tensor w = initial[row].unsqueeze(0).clone().requires_grad_(true);
    auto optimizer = MakeOptimizer(adam, {w});
    for (const torch::Tensor& g : grads) {
      w.mutable_grad() = g.clone();
      (*optimizer)->step();
    }
    return w.detach();
  };
  EXPECT_TRUE(torch::allclose(Read(*table, {1}), dense(0, g1), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(Read(*table, {2}), dense(1, {g2}), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(Read(*table, {3}), initial[2].unsqueeze(0)));
  EXPECT_EQ(table->counters().rows, 2);  // row 3 was only read
}

INSTANTIATE_TEST_SUITE_P(
    AdamAndAdamW, Lazy,
    ::testing::Values(OptimizerSpec(torch::optim::AdamOptions(0.1)),
                      OptimizerSpec(torch::optim::AdamWOptions(0.1).weight_decay(0.3))));

// FTRL-proximal as McMahan et al. write it (algorithm 1, per coordinate,
// lr_power -1/2 in general form), in doubles.
TEST(EmbeddingTableTest, FtrlFollowsTheProximalUpdate) {
  proto::OptimizerConfig ftrl;
  ftrl.mutable_ftrl()->set_lr(0.1);
  ftrl.mutable_ftrl()->set_lr_power(-0.5);
  ftrl.mutable_ftrl()->set_l1(0.01);
  ftrl.mutable_ftrl()->set_l2(0.1);
  ftrl.mutable_ftrl()->set_initial_accumulator_value(0.1);
  auto table = Table(Spec(), ftrl);
  const std::vector<int64_t> ids = {5};
  std::vector<double> w(kTableDim), n(kTableDim, 0.1), z(kTableDim, 0);
  {
    torch::Tensor initial = Read(*table, ids);
    for (int k = 0; k < kTableDim; ++k) w[k] = initial[0][k].item<float>();
  }
  torch::manual_seed(3);
  for (int step = 1; step <= 5; ++step) {
    torch::Tensor g = torch::randn({1, kTableDim}) * (step == 3 ? 0.001 : 1.0);
    Apply(*table, ids, g, step);
    for (int k = 0; k < kTableDim; ++k) {
      const double gk = g[0][k].item<float>();
      const double sigma = (std::sqrt(n[k] + gk * gk) - std::sqrt(n[k])) / 0.1;
      z[k] += gk - sigma * w[k];
      n[k] += gk * gk;
      w[k] = std::abs(z[k]) <= 0.01
                 ? 0.0
                 : -(z[k] - (z[k] > 0 ? 1 : -1) * 0.01) / (std::sqrt(n[k]) / 0.1 + 2 * 0.1);
    }
    torch::Tensor got = Read(*table, ids);
    for (int k = 0; k < kTableDim; ++k) {
      EXPECT_NEAR(got[0][k].item<float>(), w[k], 1e-5) << "step " << step << " k " << k;
    }
  }
}

TEST(EmbeddingTableTest, DoubleTablesComputeInDoubles) {
  const OptimizerSpec sgd = torch::optim::SGDOptions(0.3).momentum(0.5);
  proto::EmbeddingTableSpec spec = Spec();
  spec.set_dtype(proto::DT_FLOAT64);
  auto table = Table(spec, Config(sgd));
  EXPECT_EQ(table->row_bytes(), kTableDim * sizeof(double));
  const std::vector<int64_t> ids = {8, 9};
  torch::Tensor out = torch::empty({2, kTableDim}, torch::kFloat64);
  table->Read(ids.data(), 2, static_cast<char*>(out.data_ptr()));
  torch::Tensor dense = out.clone().requires_grad_(true);
  auto optimizer = MakeOptimizer(sgd, {dense});
  for (int step = 1; step <= 3; ++step) {
    torch::Tensor g = torch::randn({2, kTableDim}, torch::kFloat64);
    table->Apply(ids.data(), 2, static_cast<const char*>(g.data_ptr()), 1, step, table->base_lr());
    dense.mutable_grad() = g.clone();
    (*optimizer)->step();
  }
  table->Read(ids.data(), 2, static_cast<char*>(out.data_ptr()));
  EXPECT_TRUE(torch::allclose(out, dense.detach(), 1e-12, 1e-14));
}

TEST(EmbeddingTableTest, InitialValuesDependOnSeedAndIdAlone) {
  const proto::OptimizerConfig sgd = Config(torch::optim::SGDOptions(0.1));
  auto a = Table(Spec(), sgd);
  auto b = Table(Spec(), sgd);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 5000; ++i) ids.push_back(i * 7919 - 100000);
  torch::Tensor ra = Read(*a, ids);
  // b creates some rows (in another order) before reading: same values.
  Apply(*b, {ids[10], ids[3]}, torch::zeros({2, kTableDim}), 1);
  EXPECT_TRUE(torch::equal(ra, Read(*b, ids)));
  EXPECT_GE(ra.min().item<float>(), -0.5f);
  EXPECT_LT(ra.max().item<float>(), 0.5f);
  EXPECT_NEAR(ra.mean().item<float>(), 0, 0.01);

  proto::EmbeddingTableSpec other = Spec();
  other.set_seed(43);
  EXPECT_FALSE(torch::equal(ra, Read(*Table(other, sgd), ids)));

  proto::EmbeddingTableSpec normal = Spec();
  normal.mutable_initializer()->set_kind(proto::EmbeddingInitializer::NORMAL);
  normal.mutable_initializer()->set_a(1);
  normal.mutable_initializer()->set_b(0.2);
  torch::Tensor rn = Read(*Table(normal, sgd), ids);
  EXPECT_NEAR(rn.mean().item<float>(), 1, 0.01);
  EXPECT_NEAR(rn.std().item<float>(), 0.2, 0.01);

  proto::EmbeddingTableSpec constant = Spec("c", 3);
  constant.mutable_initializer()->set_kind(proto::EmbeddingInitializer::CONSTANT);
  constant.mutable_initializer()->set_a(0.25);
  EXPECT_TRUE(torch::equal(Read(*Table(constant, sgd), {1}), torch::full({1, 3}, 0.25)));
}

TEST(EmbeddingTableTest, AdmissionCreatesARowAtItsKthMinibatch) {
  proto::EmbeddingTableSpec spec = Spec();
  spec.set_admit_after(3);
  spec.set_unadmitted_value(0.5);
  auto table = Table(spec, Config(torch::optim::SGDOptions(1)));
  const torch::Tensor ones = torch::ones({1, kTableDim});
  EXPECT_TRUE(torch::equal(Read(*table, {7}), torch::full({1, kTableDim}, 0.5)));
  Apply(*table, {7}, ones, 1);
  Apply(*table, {7}, ones, 2);
  EXPECT_TRUE(torch::equal(Read(*table, {7}), torch::full({1, kTableDim}, 0.5)));
  EXPECT_EQ(table->counters().awaiting_admission, 1);
  EXPECT_EQ(table->counters().dropped_gradients, 2);
  Apply(*table, {7}, ones, 3);  // admitted: initial value, then this gradient
  EmbeddingCounters c = table->counters();
  EXPECT_EQ(c.rows, 1);
  EXPECT_EQ(c.created, 1);
  EXPECT_EQ(c.awaiting_admission, 0);
  auto plain = Table(Spec(), Config(torch::optim::SGDOptions(1)));
  EXPECT_TRUE(torch::equal(Read(*table, {7}), Read(*plain, {7}) - 1));
}

TEST(EmbeddingTableTest, EvictsRowsNotUpdatedForAWhile) {
  proto::EmbeddingTableSpec spec = Spec();
  spec.set_evict_after_versions(4);
  auto table = Table(spec, Config(torch::optim::SGDOptions(1)));
  const torch::Tensor initial = Read(*table, {1, 2});
  Apply(*table, {1, 2}, torch::ones({2, kTableDim}), 1);
  for (int64_t v = 2; v <= 8; ++v) Apply(*table, {1}, torch::ones({1, kTableDim}), v);
  EmbeddingCounters c = table->counters();
  EXPECT_EQ(c.rows, 1);
  EXPECT_EQ(c.evicted_by_age, 1);
  EXPECT_TRUE(torch::equal(Read(*table, {2}), initial[1].unsqueeze(0)));  // starts again
  EXPECT_TRUE(torch::allclose(Read(*table, {1}), initial[0].unsqueeze(0) - 8));
}

TEST(EmbeddingTableTest, KeepsTheMostRecentlyUpdatedRowsWithinItsBudget) {
  proto::EmbeddingTableSpec spec = Spec();
  spec.set_max_rows(32);
  auto table = Table(spec, Config(torch::optim::SGDOptions(1)));
  for (int64_t v = 1; v <= 100; ++v) Apply(*table, {v}, torch::ones({1, kTableDim}), v);
  EmbeddingCounters c = table->counters();
  EXPECT_LE(c.rows, 32);
  EXPECT_EQ(c.created, 100);
  EXPECT_EQ(c.rows + c.evicted_by_budget, 100);
  // The newest rows are held (trained once: initial - 1), the oldest not.
  auto fresh = Table(Spec(), Config(torch::optim::SGDOptions(1)));
  EXPECT_TRUE(torch::equal(Read(*table, {100}), Read(*fresh, {100}) - 1));
  EXPECT_TRUE(torch::equal(Read(*table, {1}), Read(*fresh, {1})));
}

TEST(EmbeddingTableTest, SnapshotLoadsIntoAnyNumberOfTablesWithSlotsAndSteps) {
  const OptimizerSpec adam = torch::optim::AdamOptions(0.05).amsgrad(true);
  auto table = Table(Spec(), Config(adam));
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 50; ++i) ids.push_back(i * 31);
  torch::manual_seed(4);
  for (int64_t v = 1; v <= 3; ++v) Apply(*table, ids, torch::randn({50, kTableDim}), v);
  Apply(*table, {ids[0]}, torch::randn({1, kTableDim}), 4);  // steps differ per row

  std::vector<proto::EmbeddingRowBlock> blocks = table->Snapshot(16);
  ASSERT_EQ(blocks.size(), 4u);
  // Into two tables by id parity, as two servers would take them.
  auto even = Table(Spec(), Config(adam));
  auto odd = Table(Spec(), Config(adam));
  for (const auto& block : blocks) {
    ASSERT_TRUE(even->Load(
                        block, [](int64_t id) { return id % 2 == 0; }, Config(adam), 4)
                    .ok());
    ASSERT_TRUE(odd->Load(
                       block, [](int64_t id) { return id % 2 != 0; }, Config(adam), 4)
                    .ok());
  }
  EXPECT_EQ(even->counters().rows + odd->counters().rows, 50);
  // Trained further, every row goes on exactly as in the original table.
  torch::Tensor g = torch::randn({1, kTableDim});
  for (int64_t id : ids) {
    EmbeddingTable& part = id % 2 == 0 ? *even : *odd;
    Apply(*table, {id}, g, 5);
    Apply(part, {id}, g, 5);
    EXPECT_TRUE(torch::equal(Read(*table, {id}), Read(part, {id}))) << "row " << id;
  }
  // Without slots (another optimizer in the checkpoint), values only.
  const proto::OptimizerConfig sgd = Config(torch::optim::SGDOptions(0.1));
  auto fresh = Table(Spec(), Config(adam));
  ASSERT_TRUE(fresh
                  ->Load(
                      blocks[0], [](int64_t) { return true; }, sgd, 4)
                  .ok());
  EXPECT_EQ(fresh->counters().rows, 16);
  // A row loaded twice is an error.
  EXPECT_FALSE(fresh
                   ->Load(
                       blocks[0], [](int64_t) { return true; }, sgd, 4)
                   .ok());
}

// Every row of `table` as one block loaded into a new table under `now`.
StatusOr<std::unique_ptr<EmbeddingTable>> Reloaded(const EmbeddingTable& table,
                                                   const proto::OptimizerConfig& now) {
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTable> loaded, EmbeddingTable::Create(Spec(), now));
  for (const proto::EmbeddingRowBlock& block : table.Snapshot(1000)) {
    EDL_RETURN_IF_ERROR(loaded->Load(
        block, [](int64_t) { return true; }, table.optimizer(), 9));
  }
  return loaded;
}

TEST(EmbeddingTableTest, AdamsRowsContinueUnderAdamWAndTheReverse) {
  // AdamW without weight decay steps as Adam does: a table reloaded under the
  // other goes on bit for bit, its moments and steps carried over.
  const std::vector<std::pair<OptimizerSpec, OptimizerSpec>> pairs = {
      {torch::optim::AdamOptions(0.05), torch::optim::AdamWOptions(0.05).weight_decay(0)},
      {torch::optim::AdamWOptions(0.05).weight_decay(0).amsgrad(true),
       torch::optim::AdamOptions(0.05).amsgrad(true)}};
  for (const auto& [written, now] : pairs) {
    auto live = Table(Spec(), Config(written));
    const std::vector<int64_t> ids = {4, 8, 15, 16};
    torch::manual_seed(6);
    for (int64_t v = 1; v <= 3; ++v) Apply(*live, ids, torch::randn({4, kTableDim}), v);
    auto loaded = Reloaded(*live, Config(now));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (int64_t v = 4; v <= 6; ++v) {
      torch::Tensor g = torch::randn({4, kTableDim});
      Apply(*live, ids, g, v);
      Apply(**loaded, ids, g, v);
      EXPECT_TRUE(torch::equal(Read(*live, ids), Read(**loaded, ids)))
          << DescribeOptimizer(written) << " into " << DescribeOptimizer(now) << ", version " << v;
    }
  }
}

TEST(EmbeddingTableTest, ASlotTheCheckpointDidNotKeepStartsAsANewRowsDoes) {
  const std::vector<int64_t> ids = {1, 2, 3};
  torch::manual_seed(8);
  const torch::Tensor g1 = torch::randn({3, kTableDim});
  const torch::Tensor g2 = torch::randn({3, kTableDim});
  struct Case {
    OptimizerSpec written, now;
    bool carries;  // whether the written state carries over
  };
  // amsgrad turned on and off, momentum added (SGD's buffer starts as the
  // first gradient, RMSprop's at zero), RMSprop centered; and a buffer of the
  // same name kept by another kind of optimizer, which does not carry over.
  const std::vector<Case> cases = {
      {torch::optim::AdamOptions(0.05), torch::optim::AdamOptions(0.05).amsgrad(true), true},
      {torch::optim::AdamWOptions(0.05).amsgrad(true), torch::optim::AdamWOptions(0.05), true},
      {torch::optim::SGDOptions(0.1), torch::optim::SGDOptions(0.1).momentum(0.9), true},
      {torch::optim::RMSpropOptions(0.01), torch::optim::RMSpropOptions(0.01).momentum(0.5), true},
      {torch::optim::RMSpropOptions(0.01), torch::optim::RMSpropOptions(0.01).centered(true), true},
      {torch::optim::RMSpropOptions(0.01).momentum(0.5),
       torch::optim::SGDOptions(0.1).momentum(0.9), false}};
  for (const Case& c : cases) {
    auto live = Table(Spec(), Config(c.written));
    Apply(*live, ids, g1, 1);
    auto loaded = Reloaded(*live, Config(c.now));
    ASSERT_TRUE(loaded.ok()) << DescribeOptimizer(c.written) << " into " << DescribeOptimizer(c.now)
                             << ": " << loaded.status();
    // As LibTorch's own optimizer goes on from the written one's state
    // (ImportOptimizerState: a new slot at zero, or made by its first step),
    // or from none.
    torch::Tensor reference = Read(*Table(Spec(), Config(c.written)), ids).requires_grad_(true);
    auto first = MakeOptimizer(c.written, {reference});
    ASSERT_TRUE(first.ok());
    reference.mutable_grad() = g1.clone();
    (*first)->step();
    auto after = MakeOptimizer(c.now, {reference});
    ASSERT_TRUE(after.ok());
    if (c.carries) {
      ParameterSnapshot state;
      ExportOptimizerState(c.written, **first, reference, &state);
      ASSERT_TRUE(
          ImportOptimizerState(c.now, "rows", state.slots, state.step, reference, after->get())
              .ok());
    }
    reference.mutable_grad() = g2.clone();
    (*after)->step();
    Apply(**loaded, ids, g2, 10);
    EXPECT_TRUE(torch::allclose(Read(**loaded, ids), reference.detach(), 1e-5, 1e-6))
        << DescribeOptimizer(c.written) << " into " << DescribeOptimizer(c.now) << "\n"
        << Read(**loaded, ids) << "\n"
        << reference;
  }
}

TEST(EmbeddingTableTest, ABlockLackingASlotItsOptimizerKeptIsAnError) {
  const proto::OptimizerConfig adam = Config(torch::optim::AdamOptions(0.05));
  auto live = Table(Spec(), adam);
  Apply(*live, {1, 2}, torch::ones({2, kTableDim}), 1);
  std::vector<proto::EmbeddingRowBlock> blocks = live->Snapshot(10);
  ASSERT_EQ(blocks.size(), 1u);
  blocks[0].mutable_slots()->RemoveLast();  // exp_avg_sq
  auto loaded = Table(Spec(), Config(torch::optim::AdamWOptions(0.05)));
  Status s = loaded->Load(
      blocks[0], [](int64_t) { return true; }, adam, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lacks slot 'exp_avg_sq'"), std::string::npos) << s;
}

TEST(EmbeddingTableTest, RejectsBadSpecsAndIdsOutOfRange) {
  const proto::OptimizerConfig sgd = Config(torch::optim::SGDOptions(0.1));
  proto::EmbeddingTableSpec spec = Spec();
  spec.set_dim(0);
  EXPECT_NE(EmbeddingTable::Create(spec, sgd).status().message().find("'t': dimension 0"),
            std::string::npos);
  spec = Spec();
  spec.set_dtype(proto::DT_INT64);
  EXPECT_FALSE(EmbeddingTable::Create(spec, sgd).ok());
  spec = Spec();
  spec.mutable_initializer()->set_b(-1);
  EXPECT_FALSE(EmbeddingTable::Create(spec, sgd).ok());
  spec = Spec();
  spec.mutable_optimizer()->mutable_ftrl()->set_lr(-1);
  EXPECT_NE(EmbeddingTable::Create(spec, sgd).status().message().find("FTRL needs lr > 0"),
            std::string::npos);
}

}  // namespace
}  // namespace elasticdl::ps
