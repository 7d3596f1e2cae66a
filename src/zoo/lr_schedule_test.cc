#include "elasticdl/zoo/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "zoo/lr_schedule_config.h"

namespace elasticdl {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(LearningRateScheduleTest, ConstantIsTheBaseRate) {
  LearningRateSchedule s;
  EXPECT_TRUE(s.is_constant());
  EXPECT_DOUBLE_EQ(s.LearningRate(0.1, 0), 0.1);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.1, 1000000), 0.1);
}

TEST(LearningRateScheduleTest, StepMultipliesByGammaEveryNVersions) {
  auto s = LearningRateSchedule::Step(/*every=*/100, /*gamma=*/0.5);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.2, 0), 0.2);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.2, 99), 0.2);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.2, 100), 0.1);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.2, 250), 0.05);
}

TEST(LearningRateScheduleTest, MultiStepMultipliesByGammaAtEachMilestone) {
  // A milestone given twice decays twice there, as PyTorch's MultiStepLR.
  const auto s = LearningRateSchedule::MultiStep({3, 10, 10}, 0.5);
  // After a warm-up the milestones count from its end.
  const auto warm = LearningRateSchedule::MultiStep({0, 2}, 0.5).WithWarmup(4);
  const std::vector<std::tuple<const LearningRateSchedule*, int64_t, double>> expected = {
      {&s, 0, 0.8},       {&s, 2, 0.8},    {&s, 3, 0.4},    {&s, 9, 0.4},   {&s, 10, 0.1},
      {&s, 1000000, 0.1}, {&warm, 3, 0.8}, {&warm, 4, 0.4}, {&warm, 6, 0.2}};
  for (const auto& [schedule, version, lr] : expected) {
    EXPECT_DOUBLE_EQ(schedule->LearningRate(0.8, version), lr)
        << schedule->Describe() << " at version " << version;
  }
}

TEST(LearningRateScheduleTest, ExponentialDecaysSmoothlyOrInStairs) {
  auto smooth = LearningRateSchedule::Exponential(/*every=*/10, /*rate=*/0.5);
  EXPECT_DOUBLE_EQ(smooth.LearningRate(1, 0), 1);
  EXPECT_DOUBLE_EQ(smooth.LearningRate(1, 5), std::pow(0.5, 0.5));
  EXPECT_DOUBLE_EQ(smooth.LearningRate(1, 20), 0.25);
  auto stairs = LearningRateSchedule::Exponential(10, 0.5, /*staircase=*/true);
  EXPECT_DOUBLE_EQ(stairs.LearningRate(1, 5), 1);
  EXPECT_DOUBLE_EQ(stairs.LearningRate(1, 19), 0.5);
}

TEST(LearningRateScheduleTest, CosineReachesItsMinimumAndStays) {
  auto s = LearningRateSchedule::Cosine(/*total=*/100, /*min_lr=*/0.01);
  EXPECT_DOUBLE_EQ(s.LearningRate(0.1, 0), 0.1);
  EXPECT_NEAR(s.LearningRate(0.1, 50), 0.055, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 25), 0.01 + 0.09 * (1 + std::cos(kPi / 4)) / 2, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 100), 0.01, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 5000), 0.01, 1e-12);
}

// PyTorch's CosineAnnealingLR: past its total the rate climbs back to lr0
// (at 2 * total) and falls again.
TEST(LearningRateScheduleTest, PeriodicCosineClimbsBackAfterItsTotal) {
  auto s = LearningRateSchedule::Cosine(/*total=*/100, /*min_lr=*/0.01, /*periodic=*/true);
  EXPECT_NEAR(s.LearningRate(0.1, 50), 0.055, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 100), 0.01, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 150), 0.055, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 200), 0.1, 1e-12);
  EXPECT_NEAR(s.LearningRate(0.1, 325), s.LearningRate(0.1, 125), 1e-12);
}

TEST(LearningRateScheduleTest, WarmupClimbsLinearlyThenTheDecayStarts) {
  auto s = LearningRateSchedule::Step(10, 0.1).WithWarmup(4);
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 0), 0.25);
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 1), 0.5);
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 3), 1);
  // The decay runs on the versions after the warm-up.
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 4), 1);
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 13), 1);
  EXPECT_DOUBLE_EQ(s.LearningRate(1, 14), 0.1);
  auto cosine = LearningRateSchedule::Cosine(100).WithWarmup(10);
  EXPECT_DOUBLE_EQ(cosine.LearningRate(0.5, 9), 0.5);
  EXPECT_DOUBLE_EQ(cosine.LearningRate(0.5, 10), 0.5);
  EXPECT_NEAR(cosine.LearningRate(0.5, 60), 0.25, 1e-12);
  auto alone = LearningRateSchedule::Constant().WithWarmup(2);
  EXPECT_FALSE(alone.is_constant());
  EXPECT_DOUBLE_EQ(alone.LearningRate(1, 0), 0.5);
  EXPECT_DOUBLE_EQ(alone.LearningRate(1, 7), 1);
}

TEST(LearningRateScheduleTest, ValidationNamesTheBadPart) {
  EXPECT_EQ(LearningRateSchedule::MultiStep({}, 0.5).Validate().message(),
            "learning-rate schedule: milestones must name at least one version");
  EXPECT_EQ(LearningRateSchedule::Step(0, 0.5).Validate().message(),
            "learning-rate schedule: step=0 must be >= 1");
  EXPECT_EQ(LearningRateSchedule::Step(10, 1.5).Validate().message(),
            "learning-rate schedule: gamma=1.5 must be in (0, 1]");
  EXPECT_EQ(LearningRateSchedule::Exponential(10, 0).Validate().message(),
            "learning-rate schedule: rate=0 must be in (0, 1]");
  EXPECT_EQ(LearningRateSchedule::Cosine(10, -1).Validate().message(),
            "learning-rate schedule: min_lr=-1 must be >= 0");
  EXPECT_EQ(LearningRateSchedule::Cosine(10).WithWarmup(-3).Validate().message(),
            "learning-rate schedule: warmup=-3 must be >= 0");
  EXPECT_EQ(LearningRateSchedule::Cosine(10, 0.5).ValidateFor(0.1).message(),
            "learning-rate schedule: min_lr=0.5 exceeds the optimizer's lr 0.1");
  EXPECT_TRUE(LearningRateSchedule::Cosine(10, 0.05).ValidateFor(0.1).ok());
}

TEST(LearningRateScheduleTest, ParsesTheTextForm) {
  StatusOr<LearningRateSchedule> s =
      LearningRateSchedule::Parse("warmup=100,cosine=2000,min_lr=0.0001");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, LearningRateSchedule::Cosine(2000, 1e-4).WithWarmup(100));
  EXPECT_EQ(*LearningRateSchedule::Parse("step=1000, gamma=0.5"),
            LearningRateSchedule::Step(1000, 0.5));
  EXPECT_EQ(*LearningRateSchedule::Parse("exponential=10,rate=0.96,staircase=true"),
            LearningRateSchedule::Exponential(10, 0.96, true));
  EXPECT_EQ(*LearningRateSchedule::Parse("warmup=50"),
            LearningRateSchedule::Constant().WithWarmup(50));
  EXPECT_EQ(*LearningRateSchedule::Parse("constant"), LearningRateSchedule::Constant());
  EXPECT_EQ(*LearningRateSchedule::Parse("milestones = 7 : 9, gamma=0.5"),
            LearningRateSchedule::MultiStep({7, 9}, 0.5));
}

TEST(LearningRateScheduleTest, DescribeReadsBack) {
  for (const LearningRateSchedule& s :
       {LearningRateSchedule::Constant(), LearningRateSchedule::Step(7, 0.3).WithWarmup(2),
        LearningRateSchedule::Exponential(10, 0.96, true),
        LearningRateSchedule::Cosine(2000, 1e-4).WithWarmup(100),
        LearningRateSchedule::Cosine(500, 0, true),
        LearningRateSchedule::MultiStep({30, 80, 80}, 0.1).WithWarmup(5)}) {
    StatusOr<LearningRateSchedule> back = LearningRateSchedule::Parse(s.Describe());
    ASSERT_TRUE(back.ok()) << s.Describe() << ": " << back.status();
    EXPECT_EQ(*back, s) << s.Describe();
  }
  EXPECT_EQ(LearningRateSchedule::Cosine(2000, 1e-4).WithWarmup(100).Describe(),
            "warmup=100,cosine=2000,min_lr=0.0001");
  EXPECT_EQ(LearningRateSchedule::Cosine(500, 0, true).Describe(), "cosine=500,periodic=true");
  EXPECT_EQ(LearningRateSchedule::MultiStep({30, 80}, 0.1).Describe(),
            "milestones=30:80,gamma=0.1");
}

TEST(LearningRateScheduleTest, ParseErrorsNameTheBadPart) {
  auto error = [](const char* text) {
    return std::string(LearningRateSchedule::Parse(text).status().message());
  };
  EXPECT_EQ(error("cosin=100"),
            "learning-rate schedule: unknown key 'cosin' (expected warmup, step, milestones, "
            "gamma, exponential, rate, staircase, cosine, min_lr, periodic)");
  const std::vector<std::pair<const char*, const char*>> milestones = {
      {"milestones=30:x,gamma=0.1",
       "learning-rate schedule: 'milestones=30:x': item 2 ('x') is not an integer"},
      {"milestones=30::80,gamma=0.1",
       "learning-rate schedule: 'milestones=30::80': item 2 ('') is not an integer"},
      {"milestones=30:99999999999999999999,gamma=0.1",
       "learning-rate schedule: 'milestones=30:99999999999999999999': item 2 "
       "('99999999999999999999') is above the largest version, 9223372036854775807"},
      {"milestones=80:30,gamma=0.1",
       "learning-rate schedule: milestones=80:30: 30 comes after 80 (expected ascending order)"},
      {"milestones=-1,gamma=0.1",
       "learning-rate schedule: milestones=-1: -1 is below 0 (versions count from 0)"},
      {"milestones=30,gamma=nan", "learning-rate schedule: gamma=nan must be in (0, 1]"},
      {"milestones=30", "learning-rate schedule: 'milestones' needs 'gamma'"},
      {"milestones=30,gamma=2", "learning-rate schedule: gamma=2 must be in (0, 1]"},
      {"milestones=30,rate=0.5", "learning-rate schedule: 'rate' does not apply to 'milestones'"}};
  for (const auto& [text, message] : milestones) EXPECT_EQ(error(text), message) << text;
  EXPECT_EQ(error("step=x,gamma=0.5"), "learning-rate schedule: 'step=x': not an integer");
  EXPECT_EQ(error("step=10,gamma=abc"), "learning-rate schedule: 'gamma=abc': not a number");
  EXPECT_EQ(error("step=10"), "learning-rate schedule: 'step' needs 'gamma'");
  EXPECT_EQ(error("step=10,gamma=0.5,cosine=5"),
            "learning-rate schedule: two decays, 'cosine' and 'step'");
  EXPECT_EQ(error("cosine=10,gamma=0.5"),
            "learning-rate schedule: 'gamma' does not apply to 'cosine'");
  EXPECT_EQ(error("warmup=10,min_lr=0.1"),
            "learning-rate schedule: 'min_lr' does not apply to a schedule without decay");
  EXPECT_EQ(error("warmup"), "learning-rate schedule: 'warmup': expected key=value");
  EXPECT_EQ(error("warmup=1,,cosine=3"),
            "learning-rate schedule: empty part in 'warmup=1,,cosine=3'");
  EXPECT_EQ(error("warmup=1,warmup=2"), "learning-rate schedule: 'warmup' given twice");
  EXPECT_EQ(error("step=10,gamma=2"), "learning-rate schedule: gamma=2 must be in (0, 1]");
  EXPECT_EQ(error("exponential=10,rate=0.5,staircase=maybe"),
            "learning-rate schedule: 'staircase=maybe': expected true or false");
}

TEST(LearningRateScheduleTest, TravelsInItsProtoExactly) {
  for (const LearningRateSchedule& s :
       {LearningRateSchedule::Step(7, 0.3).WithWarmup(2),
        LearningRateSchedule::Exponential(10, 0.96, true), LearningRateSchedule::Cosine(20, 0.01),
        LearningRateSchedule::MultiStep({4, 4, 9}, 0.25)}) {
    StatusOr<LearningRateSchedule> back = LrScheduleFromProto(LrScheduleToProto(s));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s);
  }
  proto::LearningRateScheduleConfig bad;
  bad.mutable_step()->set_every(0);
  bad.mutable_step()->set_gamma(0.5);
  EXPECT_FALSE(LrScheduleFromProto(bad).ok());
}

}  // namespace
}  // namespace elasticdl
