#include "job/worker_seconds.h"

#include <gtest/gtest.h>

#include <string>

namespace elasticdl::job {
namespace {

TEST(WorkerSecondsTest, TheRestOfTheTimeWasSpentBetweenTasks) {
  proto::WorkerSeconds s;
  s.set_held(100);
  s.set_startup(5);
  s.set_trained(80);
  s.set_step_wait(4);
  s.set_lost(1);
  double between = -1;
  for (const auto& [part, seconds] : WorkerSecondsParts(s)) {
    if (std::string(part) == "between_tasks") between = seconds;
  }
  EXPECT_DOUBLE_EQ(between, 10);
  EXPECT_DOUBLE_EQ(Goodput(s), 0.8);
  EXPECT_EQ(DescribeWorkerSeconds(s),
            "goodput 80.0% of 100.0 worker-seconds (start-up 5.0%, waiting for steps 4.0%, lost "
            "1.0%, between tasks 10.0%)");

  proto::WorkerSeconds total;
  AddWorkerSeconds(s, &total);
  AddWorkerSeconds(s, &total);
  EXPECT_DOUBLE_EQ(total.held(), 200);
  EXPECT_DOUBLE_EQ(total.lost(), 2);
  EXPECT_DOUBLE_EQ(Goodput(total), 0.8);
}

TEST(WorkerSecondsTest, NothingHeldSaysNothing) {
  EXPECT_EQ(DescribeWorkerSeconds(proto::WorkerSeconds()), "");
  EXPECT_DOUBLE_EQ(Goodput(proto::WorkerSeconds()), 0);
}

}  // namespace
}  // namespace elasticdl::job
