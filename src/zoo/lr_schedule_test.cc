#include "elasticdl/zoo/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "common/strings.h"
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

// PyTorch's LinearLR and PolynomialLR: a factor moving over `total` versions,
// then holding.
TEST(LearningRateScheduleTest, LinearAndPolynomialMoveOverTheirTotalThenHold) {
  const auto climb = LearningRateSchedule::Linear(/*total=*/4, /*start_factor=*/0.25);
  const auto fall = LearningRateSchedule::Linear(4, 1, /*end_factor=*/0);
  const auto poly = LearningRateSchedule::Polynomial(/*total=*/4, /*power=*/2);
  const std::vector<std::tuple<const LearningRateSchedule*, int64_t, double>> expected = {
      {&climb, 0, 0.25}, {&climb, 1, 0.4375}, {&climb, 3, 0.8125}, {&climb, 4, 1},
      {&climb, 900, 1},  {&fall, 0, 1},       {&fall, 2, 0.5},     {&fall, 4, 0},
      {&fall, 5, 0},     {&poly, 0, 1},       {&poly, 1, 0.5625},  {&poly, 3, 0.0625},
      {&poly, 4, 0},     {&poly, 40, 0}};
  for (const auto& [schedule, version, factor] : expected) {
    EXPECT_DOUBLE_EQ(schedule->LearningRate(0.4, version), 0.4 * factor)
        << schedule->Describe() << " at version " << version;
  }
}

// PyTorch's SequentialLR: from each phase's version on, its schedule runs on
// the versions since; a later phase ends the ones before it.
TEST(LearningRateScheduleTest, PhasesRunOnTheVersionsSinceTheyBegan) {
  const auto s = LearningRateSchedule::Linear(4, 0.25).Then(4, LearningRateSchedule::Step(2, 0.5));
  ASSERT_EQ(s.phases().size(), 1u);
  EXPECT_FALSE(s.is_constant());
  // ConstantLR(factor=0.5, total_iters=6) is two phases; ended at 3 by a third.
  const auto held = LearningRateSchedule::Linear(6, 0.5, 0.5).Then(6, LearningRateSchedule());
  const auto cut = LearningRateSchedule::Step(1, 0.5).Then(3, held);
  const auto replaced = held.Then(3, LearningRateSchedule::Exponential(1, 0.5));
  ASSERT_EQ(cut.phases().size(), 2u);
  EXPECT_EQ(cut.phases()[1].at, 9);
  ASSERT_EQ(replaced.phases().size(), 1u);
  // A phase from the version another begins at replaces it (SequentialLR's
  // equal milestones: the later scheduler runs).
  const auto same = held.Then(6, LearningRateSchedule::Step(1, 0.5));
  ASSERT_EQ(same.phases().size(), 1u);
  EXPECT_EQ(same.phases()[0].schedule, LearningRateSchedule::Step(1, 0.5));
  const std::vector<std::tuple<const LearningRateSchedule*, int64_t, double>> expected = {
      {&s, 3, 0.8125},
      {&s, 4, 1},
      {&s, 5, 1},
      {&s, 6, 0.5},
      {&s, 9, 0.25},
      {&held, 5, 0.5},
      {&held, 6, 1},
      {&cut, 2, 0.25},
      {&cut, 3, 0.5},
      {&cut, 8, 0.5},
      {&cut, 9, 1},
      {&replaced, 2, 0.5},
      {&replaced, 3, 1},
      {&replaced, 6, 0.125},
      {&replaced, 100, std::pow(0.5, 97)}};
  for (const auto& [schedule, version, factor] : expected) {
    EXPECT_DOUBLE_EQ(schedule->LearningRate(0.4, version), 0.4 * factor)
        << schedule->Describe() << " at version " << version;
  }
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
  const std::vector<std::pair<LearningRateSchedule, const char*>> cases = {
      {LearningRateSchedule::Linear(0, 0.5), "linear=0 must be >= 1"},
      {LearningRateSchedule::Linear(5, 0), "start_factor=0 must be in (0, 1]"},
      {LearningRateSchedule::Linear(5, 0.5, 1.5), "end_factor=1.5 must be in [0, 1]"},
      {LearningRateSchedule::Polynomial(5, 0), "power=0 must be above 0"},
      {LearningRateSchedule::Polynomial(5, INFINITY), "power=inf is not finite"},
      {LearningRateSchedule::Cosine(5, INFINITY), "min_lr=inf is not finite"},
      {LearningRateSchedule().Then(0, LearningRateSchedule::Step(1, 0.5)),
       "phase 2 (at=0): must start at version 1 or later"},
      {LearningRateSchedule().Then(5, LearningRateSchedule::Step(0, 0.5)),
       "phase 2 (at=5): step=0 must be >= 1"}};
  for (const auto& [schedule, message] : cases) {
    EXPECT_EQ(schedule.Validate().message(), StrCat("learning-rate schedule: ", message));
  }
  EXPECT_EQ(LearningRateSchedule::Step(1, 0.5)
                .Then(5, LearningRateSchedule::Cosine(10, 0.5))
                .ValidateFor(0.1)
                .message(),
            "learning-rate schedule: phase 2 (at=5): min_lr=0.5 exceeds the optimizer's lr 0.1");
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
  EXPECT_EQ(
      *LearningRateSchedule::Parse("linear=5,start_factor=0.01;at=5,cosine=95,periodic=true"),
      LearningRateSchedule::Linear(5, 0.01).Then(5, LearningRateSchedule::Cosine(95, 0, true)));
  EXPECT_EQ(*LearningRateSchedule::Parse("linear=6,start_factor=0.5,end_factor=0.5 ; at = 6"),
            LearningRateSchedule::Linear(6, 0.5, 0.5).Then(6, LearningRateSchedule::Constant()));
  EXPECT_EQ(*LearningRateSchedule::Parse("step=2,gamma=0.5;at=4,constant"),
            LearningRateSchedule::Step(2, 0.5).Then(4, LearningRateSchedule::Constant()));
  EXPECT_EQ(*LearningRateSchedule::Parse("constant;at=3,polynomial=10,power=2;at=13,warmup=2"),
            LearningRateSchedule()
                .Then(3, LearningRateSchedule::Polynomial(10, 2))
                .Then(13, LearningRateSchedule::Constant().WithWarmup(2)));
}

TEST(LearningRateScheduleTest, DescribeReadsBack) {
  for (const LearningRateSchedule& s :
       {LearningRateSchedule::Constant(), LearningRateSchedule::Step(7, 0.3).WithWarmup(2),
        LearningRateSchedule::Exponential(10, 0.96, true),
        LearningRateSchedule::Cosine(2000, 1e-4).WithWarmup(100),
        LearningRateSchedule::Cosine(500, 0, true),
        LearningRateSchedule::MultiStep({30, 80, 80}, 0.1).WithWarmup(5),
        LearningRateSchedule::Linear(5, 1.0 / 3), LearningRateSchedule::Linear(5, 1, 0.1),
        LearningRateSchedule::Polynomial(9), LearningRateSchedule::Polynomial(9, 0.7),
        LearningRateSchedule::Linear(6, 0.5, 0.5)
            .Then(6, LearningRateSchedule::Constant())
            .Then(20, LearningRateSchedule::Step(3, 0.5).WithWarmup(2))}) {
    StatusOr<LearningRateSchedule> back = LearningRateSchedule::Parse(s.Describe());
    ASSERT_TRUE(back.ok()) << s.Describe() << ": " << back.status();
    EXPECT_EQ(*back, s) << s.Describe();
  }
  EXPECT_EQ(LearningRateSchedule::Cosine(2000, 1e-4).WithWarmup(100).Describe(),
            "warmup=100,cosine=2000,min_lr=0.0001");
  EXPECT_EQ(LearningRateSchedule::Cosine(500, 0, true).Describe(), "cosine=500,periodic=true");
  EXPECT_EQ(LearningRateSchedule::MultiStep({30, 80}, 0.1).Describe(),
            "milestones=30:80,gamma=0.1");
  EXPECT_EQ(LearningRateSchedule::Linear(6, 0.5, 0.5)
                .Then(6, LearningRateSchedule::Constant())
                .Then(20, LearningRateSchedule::Polynomial(3, 2))
                .Describe(),
            "linear=6,start_factor=0.5,end_factor=0.5;at=6;at=20,polynomial=3,power=2");
}

TEST(LearningRateScheduleTest, ParseErrorsNameTheBadPart) {
  auto error = [](const char* text) {
    return std::string(LearningRateSchedule::Parse(text).status().message());
  };
  EXPECT_EQ(error("cosin=100"),
            "learning-rate schedule: unknown key 'cosin' (expected warmup, step, milestones, "
            "gamma, exponential, rate, staircase, cosine, min_lr, periodic, linear, "
            "start_factor, end_factor, polynomial, power, at)");
  const std::vector<std::pair<const char*, const char*>> phases = {
      {"linear=5", "'linear' needs 'start_factor'"},
      {"linear=5,start_factor=0", "start_factor=0 must be in (0, 1]"},
      {"polynomial=5,power=-1", "power=-1 must be above 0"},
      {"polynomial=5,gamma=0.5", "'gamma' does not apply to 'polynomial'"},
      {"at=5,step=1,gamma=0.5",
       "'at=5' starts a later phase: put it after a ';' (e.g. "
       "'linear=5,start_factor=0.1;at=5,cosine=95')"},
      {"step=1,gamma=0.5;cosine=5",
       "phase 2 ('cosine=5'): needs at=VERSION, the version it starts from"},
      {"step=1,gamma=0.5;at=x,cosine=5", "phase 2 ('at=x,cosine=5'): 'at=x': not an integer"},
      {"step=1,gamma=0.5;at=0,cosine=5", "phase 2 (at=0): must start at version 1 or later"},
      {"constant;at=10,cosine=5;at=10,step=1,gamma=0.5",
       "phase 3 (at=10): must start after phase 2 (at=10)"},
      {"constant;at=10,cosine=5;at=4", "phase 3 (at=4): must start after phase 2 (at=10)"},
      {"constant;at=5,linear=0,start_factor=0.5",
       "phase 2 ('at=5,linear=0,start_factor=0.5'): linear=0 must be >= 1"},
      {"constant;at=5,constant,warmup=2",
       "phase 2 ('at=5,constant,warmup=2'): 'constant' takes no other keys than at= ('warmup' "
       "given)"},
      {"constant;at=5,constant,constant",
       "phase 2 ('at=5,constant,constant'): 'constant': expected key=value"},
      {"step=1,gamma=0.5;", "phase 2 of 'step=1,gamma=0.5;' is empty"},
      {" ", "the text is empty (expected e.g. 'warmup=100,cosine=2000' or 'constant')"}};
  for (const auto& [text, message] : phases) {
    EXPECT_EQ(error(text), StrCat("learning-rate schedule: ", message)) << text;
  }
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
        LearningRateSchedule::MultiStep({4, 4, 9}, 0.25),
        LearningRateSchedule::Linear(5, 0.01, 0.5)
            .WithWarmup(1)
            .Then(5, LearningRateSchedule::Polynomial(7, 1.5))
            .Then(12, LearningRateSchedule::Constant())}) {
    StatusOr<LearningRateSchedule> back = LrScheduleFromProto(LrScheduleToProto(s));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s) << s.Describe();
  }
  proto::LearningRateScheduleConfig bad;
  bad.mutable_step()->set_every(0);
  bad.mutable_step()->set_gamma(0.5);
  EXPECT_FALSE(LrScheduleFromProto(bad).ok());
  proto::LearningRateScheduleConfig nested =
      LrScheduleToProto(LearningRateSchedule().Then(4, LearningRateSchedule::Step(1, 0.5)));
  const proto::LearningRatePhase inner = nested.phases(0);
  *nested.mutable_phases(0)->mutable_schedule()->add_phases() = inner;
  EXPECT_EQ(LrScheduleFromProto(nested).status().message(),
            "learning-rate schedule: phase 2 (at=4): has phases of its own");
  proto::LearningRateScheduleConfig backwards =
      LrScheduleToProto(LearningRateSchedule().Then(4, LearningRateSchedule::Step(1, 0.5)));
  backwards.add_phases()->set_at(2);
  EXPECT_EQ(LrScheduleFromProto(backwards).status().message(),
            "learning-rate schedule: phase 3 (at=2): must start after phase 2 (at=4)");
  proto::LearningRateScheduleConfig bad_phase =
      LrScheduleToProto(LearningRateSchedule().Then(4, LearningRateSchedule::Step(1, 0.5)));
  bad_phase.mutable_phases(0)->mutable_schedule()->mutable_step()->set_every(0);
  EXPECT_EQ(LrScheduleFromProto(bad_phase).status().message(),
            "learning-rate schedule: phase 2 (at=4): step=0 must be >= 1");
}

}  // namespace
}  // namespace elasticdl
