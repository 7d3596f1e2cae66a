#include "master/task_manager.h"

#include <gtest/gtest.h>

#include <set>

namespace elasticdl::master {
namespace {

std::vector<Range> Ranges(int n, int64_t size = 10) {
  std::vector<Range> out;
  for (int i = 0; i < n; ++i) out.push_back({"f", i * size, (i + 1) * size});
  return out;
}

proto::ReportTaskRequest Done(int64_t task_id, int64_t version = 0) {
  proto::ReportTaskRequest r;
  r.set_task_id(task_id);
  r.set_model_version(version);
  r.set_minibatches(1);
  r.set_loss_sum(0.5);
  return r;
}

TEST(TaskManagerTest, TrainsEveryRangeOncePerEpoch) {
  TaskManagerOptions options;
  options.num_epochs = 3;
  TaskManager tm(options, Ranges(5), {}, {});
  std::multiset<int64_t> starts;
  while (true) {
    proto::Task t = tm.Next(1);
    if (t.type() == proto::TASK_NONE) break;
    ASSERT_EQ(t.type(), proto::TASK_TRAINING);
    starts.insert(t.start());
    EXPECT_TRUE(tm.Report(1, Done(t.task_id())));
  }
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(starts.size(), 15u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(starts.count(i * 10), 3u);
  EXPECT_EQ(tm.records_done(), 150);
  EXPECT_EQ(tm.records_total(), 150);
}

TEST(TaskManagerTest, ShufflesEpochsDifferently) {
  TaskManagerOptions options;
  options.num_epochs = 2;
  TaskManager tm(options, Ranges(20), {}, {});
  std::vector<int64_t> order[2];
  for (int e = 0; e < 2; ++e) {
    for (int i = 0; i < 20; ++i) {
      proto::Task t = tm.Next(1);
      order[t.epoch()].push_back(t.start());
      tm.Report(1, Done(t.task_id()));
    }
  }
  EXPECT_NE(order[0], order[1]);
}

TEST(TaskManagerTest, ReportsFromOtherWorkersAreIgnored) {
  TaskManager tm({}, Ranges(1), {}, {});
  proto::Task t = tm.Next(1);
  EXPECT_FALSE(tm.Report(2, Done(t.task_id())));
  EXPECT_FALSE(tm.Report(1, Done(t.task_id() + 100)));
  EXPECT_FALSE(tm.finished());
  EXPECT_TRUE(tm.Report(1, Done(t.task_id())));
  EXPECT_TRUE(tm.finished());
}

TEST(TaskManagerTest, LostWorkersTasksGoBackFirst) {
  TaskManager tm({}, Ranges(3), {}, {});
  proto::Task a = tm.Next(1);
  proto::Task b = tm.Next(2);
  EXPECT_EQ(tm.RecoverWorker(1), 1);
  proto::Task again = tm.Next(2);
  EXPECT_EQ(again.task_id(), a.task_id());
  // The lost worker's late report no longer counts.
  EXPECT_FALSE(tm.Report(1, Done(a.task_id())));
  EXPECT_TRUE(tm.Report(2, Done(b.task_id())));
}

TEST(TaskManagerTest, FailsLoudlyAfterRetries) {
  TaskManagerOptions options;
  options.max_task_retries = 2;
  TaskManager tm(options, Ranges(2), {}, {});
  for (int attempt = 0; attempt < 3; ++attempt) {
    proto::Task t = tm.Next(1);
    proto::ReportTaskRequest r = Done(t.task_id());
    r.set_error("bad record 7");
    tm.Report(1, r);
    if (attempt < 2) {
      EXPECT_FALSE(tm.failure().has_value());
    }
  }
  ASSERT_TRUE(tm.failure().has_value());
  EXPECT_NE(tm.failure()->find("failed 3 times; last error: bad record 7"), std::string::npos)
      << *tm.failure();
  EXPECT_NE(tm.failure()->find("f records ["), std::string::npos) << *tm.failure();
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.Next(1).type(), proto::TASK_NONE);
}

TEST(TaskManagerTest, EvaluatesEveryStepsAndAtTheEndWithMergedStates) {
  TaskManagerOptions options;
  options.evaluation_steps = 2;
  TaskManager tm(options, Ranges(4), Ranges(2), {});
  int64_t version = 0;
  int evaluation_tasks = 0;
  while (true) {
    proto::Task t = tm.Next(1);
    if (t.type() == proto::TASK_NONE) break;
    ASSERT_NE(t.type(), proto::TASK_WAIT);
    proto::ReportTaskRequest r =
        Done(t.task_id(), t.type() == proto::TASK_TRAINING ? ++version : 0);
    if (t.type() == proto::TASK_EVALUATION) {
      ++evaluation_tasks;
      proto::MetricState* m = r.add_metrics();
      m->set_name("accuracy");
      m->add_values(t.start() == 0 ? 9 : 6);  // correct
      m->add_values(10);                      // examples
    }
    tm.Report(1, r);
  }
  // Versions 2 and 4 (the end of training) each evaluate both ranges.
  ASSERT_EQ(tm.evaluations().size(), 2u);
  EXPECT_EQ(evaluation_tasks, 4);
  EXPECT_EQ(tm.evaluations()[0].model_version, 2);
  EXPECT_EQ(tm.evaluations()[1].model_version, 4);
  EXPECT_DOUBLE_EQ(tm.evaluations()[1].metrics.at("accuracy"), 0.75);
}

TEST(TaskManagerTest, WaitsWhileOthersHoldTheLastTasks) {
  TaskManager tm({}, Ranges(1), {}, {});
  proto::Task t = tm.Next(1);
  EXPECT_EQ(tm.Next(2).type(), proto::TASK_WAIT);
  tm.Report(1, Done(t.task_id()));
  EXPECT_EQ(tm.Next(2).type(), proto::TASK_NONE);
}

TEST(TaskManagerTest, PredictionKeepsInputOrder) {
  TaskManagerOptions options;
  options.job_type = proto::JOB_PREDICTION;
  TaskManager tm(options, {}, {}, Ranges(3));
  ASSERT_EQ(tm.prediction_tasks().size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tm.prediction_tasks()[i].first.start, i * 10);
  for (int i = 0; i < 3; ++i) {
    proto::Task t = tm.Next(1);
    EXPECT_EQ(t.type(), proto::TASK_PREDICTION);
    tm.Report(1, Done(t.task_id()));
  }
  EXPECT_TRUE(tm.finished());
}

}  // namespace
}  // namespace elasticdl::master
