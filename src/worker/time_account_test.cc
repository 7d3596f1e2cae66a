#include "worker/time_account.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace elasticdl::worker {
namespace {

using namespace std::chrono_literals;

TEST(TimeAccountTest, EverythingBeforeTheFirstTaskIsStartUp) {
  const auto started = TimeAccount::Clock::now() - 2s;
  TimeAccount account(started);
  account.Add(TimeAccount::Kind::kTrained, 1.0);  // start-up holds it
  proto::WorkerSeconds before = account.Totals();
  EXPECT_GE(before.held(), 2.0);
  EXPECT_DOUBLE_EQ(before.startup(), before.held());
  EXPECT_DOUBLE_EQ(before.trained(), 0);

  account.FirstTask();
  account.Add(TimeAccount::Kind::kTrained, 0.5);
  account.Add(TimeAccount::Kind::kStepWait, 0.25);
  account.Add(TimeAccount::Kind::kDiscarded, 0.125);
  account.Add(TimeAccount::Kind::kRecovery, 0.0625);
  account.Add(TimeAccount::Kind::kEvaluation, 0.03125);
  account.FirstTask();  // once
  std::this_thread::sleep_for(10ms);
  proto::WorkerSeconds after = account.Totals();
  EXPECT_GE(after.startup(), 2.0);
  EXPECT_LT(after.startup(), after.held());
  EXPECT_DOUBLE_EQ(after.trained(), 0.5);
  EXPECT_DOUBLE_EQ(after.step_wait(), 0.25);
  EXPECT_DOUBLE_EQ(after.discarded(), 0.125);
  EXPECT_DOUBLE_EQ(after.recovery(), 0.0625);
  EXPECT_DOUBLE_EQ(after.evaluation(), 0.03125);
  EXPECT_DOUBLE_EQ(after.lost(), 0);
}

TEST(TimeAccountTest, TheProcessStartedBeforeThisTest) {
  const auto now = TimeAccount::Clock::now();
  const auto started = TimeAccount::ProcessStart();
  EXPECT_LE(started, now);
  // The test binary has not run for a day.
  EXPECT_GT(started, now - std::chrono::hours(24));
}

}  // namespace
}  // namespace elasticdl::worker
