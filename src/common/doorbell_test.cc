#include "common/doorbell.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace elasticdl {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(DoorbellTest, WaitEndsAtTheTimeoutWhenNobodyRings) {
  Doorbell bell;
  const auto start = steady_clock::now();
  EXPECT_FALSE(bell.WaitFor(milliseconds(50)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(50));
}

TEST(DoorbellTest, ARingBeforeTheWaitEndsItAtOnceAndCountsOnce) {
  Doorbell bell;
  bell.Ring();
  bell.Ring();
  const auto start = steady_clock::now();
  EXPECT_TRUE(bell.WaitFor(milliseconds(10000)));
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  // Both rings were answered by that wait: the next one waits out its time.
  EXPECT_FALSE(bell.WaitFor(milliseconds(20)));
}

TEST(DoorbellTest, ARingFromAnotherThreadEndsTheWaitLongBeforeItsTimeout) {
  Doorbell bell;
  std::thread ringer([&bell] {
    std::this_thread::sleep_for(milliseconds(20));
    bell.Ring();
  });
  const auto start = steady_clock::now();
  EXPECT_TRUE(bell.WaitFor(milliseconds(60000)));
  EXPECT_LT(steady_clock::now() - start, milliseconds(30000));
  ringer.join();
}

}  // namespace
}  // namespace elasticdl
