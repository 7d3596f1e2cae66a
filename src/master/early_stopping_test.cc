#include "master/early_stopping.h"

#include <gtest/gtest.h>

namespace elasticdl::master {
namespace {

proto::EarlyStopping Spec(const std::string& metric, bool maximize, int patience,
                          double min_delta = 0) {
  proto::EarlyStopping s;
  s.set_metric(metric);
  s.set_maximize(maximize);
  s.set_patience(patience);
  s.set_min_delta(min_delta);
  return s;
}

TEST(EarlyStoppingTest, StopsAfterPatienceEvaluationsWithoutImprovement) {
  EarlyStopping es(Spec("accuracy", /*maximize=*/true, /*patience=*/2, /*min_delta=*/0.01));
  EXPECT_EQ(es.Observe(10, {{"accuracy", 0.5}}), std::nullopt);
  EXPECT_EQ(es.Observe(20, {{"accuracy", 0.6}}), std::nullopt);
  // Within min_delta: no improvement.
  EXPECT_EQ(es.Observe(30, {{"accuracy", 0.605}}), std::nullopt);
  EXPECT_EQ(es.evaluations_without_improvement(), 1);
  std::optional<std::string> stop = es.Observe(40, {{"accuracy", 0.59}});
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(*stop,
            "early stopping: accuracy has not risen by more than 0.01 for 2 evaluations; best 0.6 "
            "at model version 20");
  EXPECT_DOUBLE_EQ(es.best(), 0.6);
  EXPECT_EQ(es.best_version(), 20);
}

TEST(EarlyStoppingTest, AnImprovementResetsTheCount) {
  EarlyStopping es(Spec("loss", /*maximize=*/false, /*patience=*/2));
  EXPECT_EQ(es.Observe(1, {{"loss", 1.0}}), std::nullopt);
  EXPECT_EQ(es.Observe(2, {{"loss", 1.5}}), std::nullopt);
  EXPECT_EQ(es.Observe(3, {{"loss", 0.9}}), std::nullopt);
  EXPECT_EQ(es.evaluations_without_improvement(), 0);
  EXPECT_EQ(es.Observe(4, {{"loss", 0.9}}), std::nullopt);
  EXPECT_TRUE(es.Observe(5, {{"loss", 0.95}}).has_value());
}

TEST(EarlyStoppingTest, DisabledWatchesNothing) {
  EarlyStopping es(proto::EarlyStopping{});
  EXPECT_FALSE(es.enabled());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(es.Observe(i, {}), std::nullopt);
}

TEST(EarlyStoppingTest, AMissingMetricIsNamed) {
  EarlyStopping es(Spec("auc", true, 3));
  std::optional<std::string> stop = es.Observe(7, {{"accuracy", 0.5}});
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(*stop,
            "early stopping watches metric 'auc', which the evaluation of model version 7 lacks");
}

TEST(EarlyStoppingTest, StateSurvivesTheLedger) {
  EarlyStopping es(Spec("accuracy", true, 3));
  es.Observe(10, {{"accuracy", 0.8}});
  es.Observe(20, {{"accuracy", 0.7}});
  es.Observe(30, {{"accuracy", 0.7}});
  proto::TaskLedger ledger;
  es.Save(&ledger);
  EarlyStopping restored(Spec("accuracy", true, 3));
  restored.Load(ledger);
  EXPECT_EQ(restored.evaluations_without_improvement(), 2);
  EXPECT_EQ(restored.best_version(), 10);
  // The third evaluation without improvement stops, as it would have.
  EXPECT_TRUE(restored.Observe(40, {{"accuracy", 0.79}}).has_value());
}

}  // namespace
}  // namespace elasticdl::master
