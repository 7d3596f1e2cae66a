// Training that stops before its epochs end: --max_steps and early
// stopping, their accounting, and their survival through the ledger.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "master/task_manager.h"

namespace elasticdl::master {
namespace {

// Six tasks of 40 records, four minibatches of 10 each.
std::vector<Range> Training() {
  std::vector<Range> out;
  for (int i = 0; i < 6; ++i) out.push_back({"t", i * 40, (i + 1) * 40});
  return out;
}

TaskManagerOptions TwoEpochs() {
  TaskManagerOptions options;
  options.num_epochs = 2;
  options.minibatch_size = 10;
  return options;
}

proto::ReportTaskRequest Done(const proto::Task& t, int64_t version) {
  proto::ReportTaskRequest r;
  r.set_task_id(t.task_id());
  r.set_attempt(t.attempt());
  r.set_model_version(version);
  r.set_minibatches_done(4);
  r.set_minibatches(4);
  return r;
}

proto::ReportTaskRequest Stopped(const proto::Task& t, int64_t version, int64_t minibatches) {
  proto::ReportTaskRequest r = Done(t, version);
  r.set_stopped(true);
  r.set_minibatches_done(minibatches);
  return r;
}

proto::ReportTaskRequest Evaluated(const proto::Task& t, double accuracy) {
  proto::ReportTaskRequest r;
  r.set_task_id(t.task_id());
  r.set_attempt(t.attempt());
  proto::MetricState* m = r.add_metrics();
  m->set_name("accuracy");
  m->add_values(accuracy * 10);
  m->add_values(10);
  return r;
}

StatusOr<TaskManager> Restore(const TaskManager& tm, const TaskManagerOptions& options,
                              const std::vector<Range>& validation = {}) {
  proto::TaskLedger ledger;
  EXPECT_TRUE(ledger.ParseFromString(tm.ToLedger().SerializeAsString()));
  return TaskManager::FromLedger(options, Training(), validation, {}, ledger);
}

TEST(TrainingStopTest, MaxStepsStopsHandingOutTrainingAndCountsOnlyWhatWasTrained) {
  TaskManagerOptions options = TwoEpochs();
  options.max_steps = 10;
  TaskManager tm(options, Training(), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(a, 4)));
  proto::Task c = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(c, 8)));
  EXPECT_TRUE(tm.stop_reason().empty());
  // The servers refused b's third minibatch: the model is at max_steps.
  ASSERT_TRUE(tm.Report(WorkerId(2), Stopped(b, 10, 2)));
  EXPECT_EQ(tm.stop_reason(), "max_steps: the model reached version 10");
  EXPECT_EQ(tm.Next(WorkerId(1)).type(), proto::TASK_NONE);
  EXPECT_TRUE(tm.training_finished());
  EXPECT_TRUE(tm.finished());
  // Two whole tasks and two minibatches of the third, not the 480 records
  // of two epochs.
  EXPECT_EQ(tm.records_done(), 100);
  EXPECT_EQ(tm.records_total(), 480);
}

TEST(TrainingStopTest, HeldTasksStillReportAfterTheStop) {
  TaskManagerOptions options = TwoEpochs();
  options.max_steps = 5;
  TaskManager tm(options, Training(), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  ASSERT_TRUE(tm.Report(WorkerId(1), Stopped(a, 5, 1)));
  EXPECT_FALSE(tm.stop_reason().empty());
  // b is still held: training has not finished, and nothing else is dealt.
  EXPECT_FALSE(tm.training_finished());
  EXPECT_EQ(tm.Next(WorkerId(1)).type(), proto::TASK_WAIT);
  ASSERT_TRUE(tm.Report(WorkerId(2), Stopped(b, 5, 3)));
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.records_done(), 40);
}

TEST(TrainingStopTest, StopSurvivesTheLedger) {
  TaskManagerOptions options = TwoEpochs();
  options.max_steps = 6;
  TaskManager tm(options, Training(), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(a, 4)));
  proto::Task b = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Stopped(b, 6, 2)));
  ASSERT_FALSE(tm.stop_reason().empty());
  StatusOr<TaskManager> restored = Restore(tm, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->stop_reason(), tm.stop_reason());
  EXPECT_EQ(restored->records_done(), 60);
  EXPECT_EQ(restored->Next(WorkerId(1)).type(), proto::TASK_NONE);
}

TEST(TrainingStopTest, RestoredBeforeTheStopStillStopsAtMaxSteps) {
  TaskManagerOptions options = TwoEpochs();
  options.max_steps = 6;
  TaskManager tm(options, Training(), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(a, 4)));
  StatusOr<TaskManager> restored = Restore(tm, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  proto::Task b = restored->Next(WorkerId(1));
  ASSERT_EQ(b.type(), proto::TASK_TRAINING);
  ASSERT_TRUE(restored->Report(WorkerId(1), Stopped(b, 6, 2)));
  EXPECT_EQ(restored->Next(WorkerId(1)).type(), proto::TASK_NONE);
  EXPECT_EQ(restored->records_done(), 60);
}

// Evaluates every version; accuracy 0.5, 0.6, then flat: patience 2 stops
// after the fourth evaluation, then the final evaluation runs.
TEST(TrainingStopTest, EarlyStoppingStopsTrainingAndSurvivesTheLedger) {
  TaskManagerOptions options = TwoEpochs();
  options.evaluation_steps = 1;
  options.early_stopping.set_metric("accuracy");
  options.early_stopping.set_maximize(true);
  options.early_stopping.set_patience(2);
  const std::vector<Range> validation = {{"v", 0, 10}};
  std::optional<TaskManager> tm;
  tm.emplace(options, Training(), validation, std::vector<Range>{});
  const double accuracy[] = {0.5, 0.6, 0.6, 0.55, 0.9};
  int evaluations = 0;
  int64_t version = 0;
  for (int step = 0; step < 40 && !tm->finished(); ++step) {
    if (step == 5) {
      // A master restart between evaluations keeps the count.
      StatusOr<TaskManager> restored = Restore(*tm, options, validation);
      ASSERT_TRUE(restored.ok()) << restored.status();
      tm.emplace(std::move(*restored));
    }
    proto::Task t = tm->Next(WorkerId(1));
    ASSERT_NE(t.type(), proto::TASK_WAIT);
    if (t.type() == proto::TASK_EVALUATION) {
      ASSERT_TRUE(tm->Report(WorkerId(1), Evaluated(t, accuracy[std::min(evaluations++, 4)])));
    } else {
      ASSERT_TRUE(tm->Report(WorkerId(1), Done(t, ++version)));
    }
  }
  ASSERT_TRUE(tm->finished());
  EXPECT_EQ(tm->stop_reason(),
            "early stopping: accuracy has not risen by more than 0 for 2 evaluations; best 0.6 at "
            "model version 2");
  // Four evaluations during training, then the final one.
  ASSERT_EQ(tm->evaluations().size(), 5u);
  EXPECT_EQ(version, 4);
  EXPECT_EQ(tm->records_done(), 160);
}

TEST(TrainingStopTest, TheFirstReasonWins) {
  TaskManagerOptions options = TwoEpochs();
  options.max_steps = 3;
  TaskManager tm(options, Training(), {}, {});
  tm.StopTraining("asked to");
  proto::Task t = tm.Next(WorkerId(1));
  EXPECT_EQ(t.type(), proto::TASK_NONE);
  EXPECT_EQ(tm.stop_reason(), "asked to");
}

}  // namespace
}  // namespace elasticdl::master
