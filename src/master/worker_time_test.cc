#include "master/worker_time.h"

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <vector>

#include "testing/manual_clock.h"

namespace elasticdl::master {
namespace {

using namespace std::chrono_literals;

// `worker` has applied `minibatches` minibatches at `pace` seconds each.
void Heard(WorkerTime* time, int worker, int64_t minibatches, double pace, Clock::time_point at) {
  proto::WorkerSeconds s;
  s.set_held(static_cast<double>(minibatches) * pace + 1);
  s.set_trained(static_cast<double>(minibatches) * pace);
  s.set_minibatches(minibatches);
  time->Update(WorkerId(worker), s, at);
}

// Workers 0, 1 and 2 heard every 250 ms, 21 times: worker w at paces[w]
// seconds a minibatch, having applied 4 / every[w] minibatches more each time.
WorkerTime HeardThree(const std::array<double, 3>& paces, const std::array<int64_t, 3>& every) {
  testing::ManualClock clock;
  WorkerTime time;
  for (int64_t m = 0; m <= 80; m += 4) {
    for (int w = 0; w < 3; ++w) Heard(&time, w, m / every[w], paces[w], clock.Now());
    clock.Advance(250ms);
  }
  return time;
}

TEST(WorkerTimeTest, TheSlowestIsAStragglerOnlyFarBehindTheOthersMedian) {
  // Worker 2 runs at a third of the others' pace, then slower still.
  const WorkerTime time = HeardThree({0.05, 0.06, 0.15}, {1, 1, 4});
  const std::vector<WorkerId> all = {WorkerId(0), WorkerId(1), WorkerId(2)};
  // 0.15 s against a median of 0.055 s: below 3 times, above 2.
  EXPECT_FALSE(time.FindStraggler(all, 3).has_value());
  std::optional<WorkerTime::Straggler> found = time.FindStraggler(all, 2);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->worker, WorkerId(2));
  EXPECT_NEAR(found->pace, 0.15, 1e-9);
  EXPECT_NEAR(found->others, 0.055, 1e-9);
  // Only candidates count, and two others are needed to judge.
  EXPECT_FALSE(time.FindStraggler({WorkerId(0), WorkerId(2)}, 2).has_value());
}

TEST(WorkerTimeTest, MillisecondsAMinibatchBehindMakeNoStraggler) {
  // 2.6 ms against 1.3 ms: twice as slow, and 1.3 ms behind.
  const WorkerTime time = HeardThree({0.0013, 0.0013, 0.0026}, {1, 1, 1});
  EXPECT_FALSE(time.FindStraggler({WorkerId(0), WorkerId(1), WorkerId(2)}, 1.5).has_value());
}

TEST(WorkerTimeTest, APaceNeedsEnoughMinibatchesAndFollowsTheRecentOnes) {
  testing::ManualClock clock;
  WorkerTime time;
  const std::vector<WorkerId> all = {WorkerId(0), WorkerId(1), WorkerId(2)};
  Heard(&time, 0, 0, 0.05, clock.Now());
  Heard(&time, 1, 0, 0.05, clock.Now());
  Heard(&time, 2, 0, 0.05, clock.Now());
  Heard(&time, 0, 4, 0.05, clock.Now());
  Heard(&time, 1, 4, 0.05, clock.Now());
  Heard(&time, 2, 4, 0.5, clock.Now());
  // Its first four minibatches are left out (they set LibTorch up), and the
  // pace is not measured over fewer than eight.
  EXPECT_FALSE(time.FindStraggler(all, 3).has_value());
  // Worker 2's slow start is forgotten once it keeps up for a window.
  proto::WorkerSeconds s;
  for (int64_t m = 8; m <= 8 + 2 * WorkerTime::kPaceWindow; m += 4) {
    Heard(&time, 0, m, 0.05, clock.Now());
    Heard(&time, 1, m, 0.05, clock.Now());
    s.set_trained(2.0 + static_cast<double>(m - 4) * 0.05);
    s.set_minibatches(m);
    s.set_held(100);
    time.Update(WorkerId(2), s, clock.Now());
  }
  EXPECT_FALSE(time.FindStraggler(all, 3).has_value());
}

}  // namespace
}  // namespace elasticdl::master
