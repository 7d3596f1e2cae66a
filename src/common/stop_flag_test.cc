#include "common/stop_flag.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace elasticdl {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(StopFlagTest, AWaitEndsAtItsTimeoutWhileTheFlagIsNotSet) {
  StopFlag flag;
  const auto start = steady_clock::now();
  EXPECT_FALSE(flag.WaitFor(milliseconds(50)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(50));
  EXPECT_FALSE(flag.is_set());
}

TEST(StopFlagTest, OnceSetItStaysSetAndEveryWaitEndsAtOnce) {
  StopFlag flag;
  flag.Set();
  flag.Set();  // a second stop (another signal, a watchdog) changes nothing
  const auto start = steady_clock::now();
  EXPECT_TRUE(flag.WaitFor(milliseconds(60000)));
  EXPECT_TRUE(flag.WaitFor(milliseconds(60000)));
  EXPECT_LT(steady_clock::now() - start, milliseconds(30000));
  EXPECT_TRUE(flag.is_set());
}

TEST(StopFlagTest, SettingItFromAnotherThreadWakesEveryWaiter) {
  StopFlag flag;
  auto wait = [&flag](bool* woken) { *woken = flag.WaitFor(milliseconds(60000)); };
  bool first = false;
  bool second = false;
  const auto start = steady_clock::now();
  std::thread a(wait, &first);
  std::thread b(wait, &second);
  std::this_thread::sleep_for(milliseconds(20));
  flag.Set();
  a.join();
  b.join();
  EXPECT_TRUE(first);
  EXPECT_TRUE(second);
  EXPECT_LT(steady_clock::now() - start, milliseconds(30000));
}

}  // namespace
}  // namespace elasticdl
