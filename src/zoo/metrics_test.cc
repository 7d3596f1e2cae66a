#include "elasticdl/zoo/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "elasticdl/zoo/metric_state.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;

double ResultOf(Metric& m) { return MetricResult(m.state()); }

TEST(MetricsTest, SeedAccuracyLambdaIsAMean) {
  MetricMap metrics = {
      {"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
         return torch::eq(torch::argmax(predictions, 1), labels.flatten());
       }}};
  auto metric = metrics.at("accuracy").Make();
  metric->Update(torch::tensor({{1}, {1}, {0}}),
                 torch::tensor({{0.1, 0.9}, {0.8, 0.2}, {0.7, 0.3}}));
  metric->Update(torch::tensor({{0}}), torch::tensor({{0.0, 1.0}}));
  MetricState state = metric->state();
  EXPECT_EQ(state.kind, MetricKind::kMean);
  EXPECT_EQ(state.values, (std::vector<double>{2, 4}));
  EXPECT_DOUBLE_EQ(MetricResult(state), 0.5);
}

TEST(MetricsTest, AMeanMetricTakesOneValuePerExampleOrPerOutput) {
  const torch::Tensor labels = torch::tensor({{1}, {0}, {1}, {0}});
  const torch::Tensor predictions =
      torch::tensor({{0.25, 0.75}, {0.75, 0.25}, {0.25, 0.75}, {0.75, 0.25}});
  auto give = [&](MeanMetric::Fn fn) {
    MeanMetric metric(std::move(fn));
    metric.Update(labels, predictions);
    return MetricResult(metric.state());
  };
  EXPECT_DOUBLE_EQ(give([](const torch::Tensor& l, const torch::Tensor& p) {
                     return p.argmax(1) == l.view(-1);
                   }),
                   1.0);
  EXPECT_DOUBLE_EQ(give([](const torch::Tensor& l, const torch::Tensor&) { return l; }), 0.5);
  EXPECT_DOUBLE_EQ(give([](const torch::Tensor&, const torch::Tensor& p) { return p; }), 0.5);
  EXPECT_DOUBLE_EQ(give([](const torch::Tensor&, const torch::Tensor& p) { return p.flatten(); }),
                   0.5);
  // [4] against [4, 1] broadcasts to [4, 4]: a quarter right, silently, were
  // it taken.
  try {
    give([](const torch::Tensor& l, const torch::Tensor& p) { return p.argmax(1) == l; });
    ADD_FAILURE() << "a [B, B] result was taken";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(),
                HasSubstr("gave 16 values (shape [4, 4]) for a minibatch of 4 examples"));
    EXPECT_THAT(e.what_without_backtrace(), HasSubstr("labels.view(-1)"));
  }
  // The minibatch's mean is one value for four examples.
  try {
    give([](const torch::Tensor& l, const torch::Tensor& p) {
      return (p.argmax(1) == l.view(-1)).to(torch::kFloat).mean();
    });
    ADD_FAILURE() << "a minibatch's mean was taken";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(), HasSubstr("return the values, not their mean"));
  }
}

TEST(MetricsTest, BuiltInMeans) {
  // Of every output of a model with two.
  auto squared = MeanSquaredError();
  squared->Update(torch::tensor({{1.0, 0.0}, {0.0, 0.0}}), torch::tensor({{0.5, 0.0}, {0.0, 1.0}}));
  EXPECT_DOUBLE_EQ(ResultOf(*squared), (0.25 + 1) / 4);
  auto accuracy = Accuracy();
  accuracy->Update(torch::tensor({1, 1, 1}), torch::tensor({{0.1, 0.9}, {0.8, 0.2}, {0.3, 0.7}}));
  EXPECT_DOUBLE_EQ(ResultOf(*accuracy), 2.0 / 3);
  auto binary = Accuracy();
  binary->Update(torch::tensor({1.0, 1.0}), torch::tensor({{0.7}, {0.2}}));
  EXPECT_DOUBLE_EQ(ResultOf(*binary), 0.5);

  auto mse = MeanSquaredError();
  auto mae = MeanAbsoluteError();
  for (Metric* m : {mse.get(), mae.get()})
    m->Update(torch::zeros({2, 1}), torch::tensor({1.0, -2.0}));
  EXPECT_DOUBLE_EQ(ResultOf(*mse), 2.5);
  EXPECT_DOUBLE_EQ(ResultOf(*mae), 1.5);
  EXPECT_THROW(mse->Update(torch::zeros({3}), torch::zeros({2})), c10::Error);
}

TEST(MetricsTest, AucMatchesHandComputedValues) {
  const torch::Tensor labels = torch::tensor({0, 0, 1, 1});
  const torch::Tensor predictions = torch::tensor({0.1, 0.6, 0.35, 0.8});
  // 3 of the 4 (positive, negative) pairs are ordered right.
  auto fine = AUC();
  fine->Update(labels, predictions);
  EXPECT_NEAR(ResultOf(*fine), 0.75, 1e-12);
  // Three thresholds (-eps, 0.5, 1+eps): buckets [0, 0.5] and (0.5, 1] each
  // hold one positive and one negative, so the curve is the diagonal.
  auto coarse = AUC(3);
  coarse->Update(labels, predictions);
  EXPECT_EQ(coarse->state().values, (std::vector<double>{1, 1, 0, 1, 1, 0}));
  EXPECT_NEAR(ResultOf(*coarse), 0.5, 1e-12);
}

TEST(MetricsTest, AucStatesMergeExactly) {
  torch::manual_seed(7);
  torch::Tensor labels = torch::rand({1000}).gt(0.5);
  torch::Tensor predictions = (torch::rand({1000}) + labels.to(torch::kFloat) * 0.3).clamp(0, 1);
  auto whole = AUC(50), first = AUC(50), second = AUC(50);
  whole->Update(labels, predictions);
  first->Update(labels.slice(0, 0, 400), predictions.slice(0, 0, 400));
  second->Update(labels.slice(0, 400), predictions.slice(0, 400));
  MetricStates merged;
  ASSERT_TRUE(MergeMetricStates({{"auc", first->state()}}, &merged).ok());
  ASSERT_TRUE(MergeMetricStates({{"auc", second->state()}}, &merged).ok());
  EXPECT_EQ(merged["auc"].values, whole->state().values);
  EXPECT_GT(MetricResult(merged["auc"]), 0.6);
}

TEST(MetricStateTest, ResultsOfEmptyStatesAreNaN) {
  EXPECT_TRUE(std::isnan(MetricResult(MetricState{MetricKind::kMean, {0, 0}})));
  EXPECT_TRUE(std::isnan(MetricResult(MetricState{MetricKind::kMean, {}})));
  // Only positives: no ROC curve.
  EXPECT_TRUE(std::isnan(MetricResult(MetricState{MetricKind::kAuc, {3, 1, 0, 0}})));
}

TEST(MetricStateTest, MergeChecksKindAndSize) {
  MetricState mean{MetricKind::kMean, {1, 2}};
  MetricState auc{MetricKind::kAuc, {1, 0, 0, 1}};
  MetricState into = mean;
  ASSERT_TRUE(MergeMetricState(mean, &into).ok());
  EXPECT_EQ(into.values, (std::vector<double>{2, 4}));
  Status status = MergeMetricState(auc, &into);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot merge an AUC metric state"));

  MetricStates states = {{"auc", auc}};
  status = MergeMetricStates({{"auc", MetricState{MetricKind::kAuc, {1, 1}}}}, &states);
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("metric 'auc': cannot merge an AUC metric state of 2 values into one of 4"));
}

}  // namespace
}  // namespace elasticdl
