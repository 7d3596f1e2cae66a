#include "experiment/searcher.h"

#include <gtest/gtest.h>

#include <map>

namespace elasticdl::experiment {
namespace {

SearchSpace Space() {
  Hyperparameter lr;
  lr.name = "lr";
  lr.type = HparamType::kLog;
  lr.minval = -4;
  lr.maxval = -1;
  lr.count = 2;
  Hyperparameter opt;
  opt.name = "opt";
  opt.type = HparamType::kCategorical;
  opt.vals = {std::string("adam"), std::string("sgd")};
  return SearchSpace::Create({lr, opt}).value();
}

SearcherConfig Asha(int64_t trials, int64_t rungs, double divisor) {
  SearcherConfig c;
  c.kind = SearcherKind::kAsha;
  c.metric = "accuracy";
  c.max_trials = trials;
  c.num_rungs = rungs;
  c.divisor = divisor;
  c.max_length.epochs = 16;
  return c;
}

TEST(SearchSpaceTest, SamplesAreAFunctionOfSeedAndTrial) {
  const SearchSpace space = Space();
  EXPECT_EQ(space.Sample(7, 3), space.Sample(7, 3));
  EXPECT_FALSE(space.Sample(7, 3) == space.Sample(7, 4));
  for (int64_t i = 0; i < 50; ++i) {
    const Params p = space.Sample(1, i);
    const double lr = p.get<double>("lr");
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    const std::string opt = p.get<std::string>("opt");
    EXPECT_TRUE(opt == "adam" || opt == "sgd") << opt;
  }
}

TEST(SearchSpaceTest, GridIsTheProductOfThePoints) {
  const std::vector<Params> grid = Space().Grid().value();
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_DOUBLE_EQ(grid[0].get<double>("lr"), 1e-4);
  EXPECT_EQ(grid[0].get<std::string>("opt"), "adam");
  EXPECT_EQ(grid[1].get<std::string>("opt"), "sgd");
  EXPECT_DOUBLE_EQ(grid[3].get<double>("lr"), 1e-1);
}

TEST(SearchSpaceTest, ErrorsNameTheHyperparameter) {
  Hyperparameter h;
  h.name = "dropout";
  h.type = HparamType::kDouble;
  h.minval = 0.5;
  h.maxval = 0.1;
  Status s = SearchSpace::Create({h}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("hyperparameters.dropout: empty range"),
            std::string::npos)
      << s;
  Hyperparameter c;
  c.name = "layers";
  c.type = HparamType::kCategorical;
  s = SearchSpace::Create({c}).status();
  EXPECT_NE(std::string(s.message()).find("hyperparameters.layers: empty range"), std::string::npos)
      << s;
  Hyperparameter r;
  r.name = "units";
  r.type = HparamType::kInt;
  r.minval = 1;
  r.maxval = 8;
  s = SearchSpace::Create({r}).value().Grid().status();
  EXPECT_NE(std::string(s.message()).find("hyperparameters.units: a grid search needs `count`"),
            std::string::npos)
      << s;
}

TEST(RungEpochsTest, AshaBudgetsDivideMaxLength) {
  EXPECT_EQ(RungEpochs(Asha(16, 3, 4), 1000).value(), (std::vector<int64_t>{1, 4, 16}));
  SearcherConfig records = Asha(16, 3, 4);
  records.max_length = {0, 32000};
  EXPECT_EQ(RungEpochs(records, 2000).value(), (std::vector<int64_t>{1, 4, 16}));
  records.max_length = {0, 24000};
  Status s = RungEpochs(records, 2000).status();
  EXPECT_NE(std::string(s.message()).find("rung 0's budget is 1500 records"), std::string::npos)
      << s;
}

// Completes every rung it is given with the metric of its trial, as a
// trial that reaches `quality[trial]` at every rung.
std::vector<RungRun> Drive(Searcher* s, const std::map<int64_t, double>& quality, int concurrent) {
  std::vector<RungRun> order;
  std::vector<RungRun> running;
  while (true) {
    while (static_cast<int>(running.size()) < concurrent) {
      std::optional<RungRun> next = s->Next();
      if (!next) break;
      order.push_back(*next);
      running.push_back(*next);
    }
    if (running.empty()) return order;
    const RungRun done = running.front();
    running.erase(running.begin());
    s->Completed(done, quality.at(done.trial));
  }
}

TEST(SearcherTest, AshaPromotesTheTopOfEachRung) {
  auto s = Searcher::Create(Asha(16, 3, 4), Space(), 1).value();
  std::map<int64_t, double> quality;
  for (int64_t t = 0; t < 16; ++t) quality[t] = static_cast<double>((t * 7) % 16);  // a permutation
  const std::vector<RungRun> order = Drive(s.get(), quality, 2);
  std::map<int, int> per_rung;
  for (const RungRun& r : order) ++per_rung[r.rung];
  EXPECT_EQ(per_rung[0], 16);
  EXPECT_EQ(per_rung[1], 4);
  EXPECT_EQ(per_rung[2], 1);
  // The best trial (quality 15: t = 9) reaches the top rung.
  ASSERT_TRUE(s->Best().has_value());
  EXPECT_EQ(s->Best()->trial, 9);
  EXPECT_EQ(s->Best()->rung, 2);
}

TEST(SearcherTest, SmallerIsBetterRanksTheOtherWay) {
  SearcherConfig c = Asha(4, 2, 2);
  c.smaller_is_better = true;
  auto s = Searcher::Create(c, Space(), 1).value();
  const std::vector<RungRun> order = Drive(s.get(), {{0, 0.5}, {1, 0.2}, {2, 0.9}, {3, 0.7}}, 1);
  EXPECT_EQ(s->Best()->trial, 1);
}

TEST(SearcherTest, SameCallsSameAnswers) {
  auto a = Searcher::Create(Asha(8, 2, 2), Space(), 5).value();
  auto b = Searcher::Create(Asha(8, 2, 2), Space(), 5).value();
  std::map<int64_t, double> q;
  for (int64_t t = 0; t < 8; ++t) q[t] = 1.0 / static_cast<double>(t + 1);
  const auto order_a = Drive(a.get(), q, 2);
  const auto order_b = Drive(b.get(), q, 2);
  ASSERT_EQ(order_a.size(), order_b.size());
  for (size_t i = 0; i < order_a.size(); ++i) EXPECT_TRUE(order_a[i] == order_b[i]) << i;
  for (int64_t t = 0; t < 8; ++t) EXPECT_EQ(a->hparams(t), b->hparams(t));
}

TEST(SearcherTest, RandomAndGridRunEachTrialOnce) {
  SearcherConfig random;
  random.kind = SearcherKind::kRandom;
  random.max_trials = 3;
  auto s = Searcher::Create(random, Space(), 1).value();
  const auto order = Drive(s.get(), {{0, 1}, {1, 3}, {2, 2}}, 2);
  ASSERT_EQ(order.size(), 3u);
  for (const RungRun& r : order) EXPECT_EQ(r.rung, 0);
  EXPECT_EQ(s->Best()->trial, 1);

  SearcherConfig grid;
  grid.kind = SearcherKind::kGrid;
  grid.max_trials = 4;
  auto g = Searcher::Create(grid, Space(), 1).value();
  EXPECT_EQ(Drive(g.get(), {{0, 1}, {1, 1}, {2, 1}, {3, 1}}, 3).size(), 4u);
  EXPECT_DOUBLE_EQ(g->hparams(3).get<double>("lr"), 1e-1);
}

TEST(SearcherTest, AFailedRungStopsItsTrial) {
  auto s = Searcher::Create(Asha(2, 2, 2), Space(), 1).value();
  ASSERT_TRUE(s->Next().has_value());
  ASSERT_TRUE(s->Next().has_value());
  s->Completed({0, 0}, std::nullopt);
  s->Completed({1, 0}, 0.5);
  // One result in rung 0: 1/2 of it rounds down to none promoted.
  EXPECT_FALSE(s->Next().has_value());
  EXPECT_EQ(s->Best()->trial, 1);
}

}  // namespace
}  // namespace elasticdl::experiment
