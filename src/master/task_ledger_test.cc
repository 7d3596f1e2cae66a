// TaskManager::ToLedger / FromLedger: a restored TaskManager goes on exactly
// as the original would have.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "master/task_manager.h"
#include "testing/ids.h"

namespace elasticdl::master {
namespace {

TaskManagerOptions TrainingOptions() {
  TaskManagerOptions options;
  options.num_epochs = 3;
  options.minibatch_size = 10;
  options.evaluation_steps = 4;
  options.shuffle_seed = 17;
  return options;
}

std::vector<Range> Training() {
  std::vector<Range> out;
  out.reserve(6);
  for (int i = 0; i < 6; ++i) out.push_back({"t", i * 40, (i + 1) * 40});
  return out;
}

std::vector<Range> Validation() { return {{"v", 0, 10}, {"v", 10, 30}, {"v", 30, 70}}; }

StatusOr<TaskManager> Restore(const TaskManager& tm, const TaskManagerOptions& options,
                              const std::vector<Range>& training,
                              const std::vector<Range>& validation,
                              const std::vector<Range>& prediction = {}) {
  proto::TaskLedger ledger;
  EXPECT_TRUE(ledger.ParseFromString(tm.ToLedger().SerializeAsString()));
  return TaskManager::FromLedger(options, training, validation, prediction, ledger);
}

// A deterministic workload of two workers: worker 1 asks for task after task
// (stopping some halfway), worker 2 now and then holds one for a while.
class Driver {
 public:
  // One step; false once the job is over.
  bool Step(TaskManager* tm) {
    ++step_;
    if (held_ && (step_ % 5 == 0 || waited_)) {
      EXPECT_TRUE(tm->ReconcileWorker(WorkerId(2), TaskId(held_->task_id()), held_->attempt()));
      Finish(tm, WorkerId(2), *held_, step_ % 2 == 0);
      held_.reset();
      waited_ = false;
      return true;
    }
    proto::Task t = tm->Next(WorkerId(1));
    Log(t);
    if (t.type() == proto::TASK_NONE) return false;
    if (t.type() == proto::TASK_WAIT) {
      waited_ = true;
      return held_.has_value();
    }
    if (!held_ && step_ % 7 == 3) {
      held_ = tm->Next(WorkerId(2));
      Log(*held_);
      if (held_->type() != proto::TASK_TRAINING && held_->type() != proto::TASK_EVALUATION) {
        held_.reset();
      } else {
        tm->Progress(WorkerId(2), TaskId(held_->task_id()), held_->attempt(), 1);
      }
    }
    Finish(tm, WorkerId(1), t, step_ % 4 == 1);
    return true;
  }

  const std::vector<std::string>& log() const { return log_; }
  void clear_log() { log_.clear(); }

 private:
  void Log(const proto::Task& t) {
    log_.push_back(StrCat(t.task_id(), " type ", static_cast<int>(t.type()), " ", t.file(), " [",
                          t.start(), ", ", t.end(), ") epoch ", t.epoch(), " attempt ", t.attempt(),
                          " done ", t.minibatches_done(), " version ", t.model_version()));
  }

  void Finish(TaskManager* tm, WorkerId worker, const proto::Task& t, bool stop) {
    proto::ReportTaskRequest r;
    r.set_task_id(t.task_id());
    r.set_attempt(t.attempt());
    r.set_minibatches(1);
    r.set_loss_sum(static_cast<double>(step_));
    if (t.type() == proto::TASK_TRAINING) {
      r.set_model_version(++version_);
      r.set_stopped(stop);
      r.set_minibatches_done(stop ? 2 : 4);
    } else {
      proto::MetricState* m = r.add_metrics();
      m->set_name("mean_start");
      m->add_values(static_cast<double>(t.start()));
      m->add_values(1);
    }
    EXPECT_TRUE(tm->Report(worker, r));
  }

  int64_t step_ = 0;
  int64_t version_ = 0;
  std::optional<proto::Task> held_;
  bool waited_ = false;
  std::vector<std::string> log_;
};

std::string Outcome(const TaskManager& tm) {
  std::string out =
      StrCat("records ", tm.records_done(), " of ", tm.records_total(), " loss ", tm.recent_loss(),
             " version ", tm.model_version(), " finished ", tm.finished());
  for (const Evaluation& ev : tm.evaluations()) {
    out += StrCat("; evaluation of ", ev.model_version);
    for (const auto& [name, value] : ev.metrics) out += StrCat(" ", name, "=", value);
  }
  return out;
}

TEST(TaskLedgerTest, RestoredManagerGoesOnExactlyLikeTheOriginal) {
  // The whole run, once.
  int steps = 0;
  {
    TaskManager tm(TrainingOptions(), Training(), Validation(), {});
    Driver driver;
    while (driver.Step(&tm)) ++steps;
    ASSERT_TRUE(tm.finished());
    ASSERT_FALSE(tm.failure().has_value()) << *tm.failure();
    EXPECT_EQ(tm.records_done(), 3 * 240);
    EXPECT_GE(tm.evaluations().size(), 3u);
  }
  int mid_evaluation = 0;
  int held = 0;
  int between_epochs = 0;
  // Stop after every step, restore, and run both to the end.
  for (int stop = 0; stop <= steps; ++stop) {
    SCOPED_TRACE(StrCat("restored after step ", stop));
    TaskManager tm(TrainingOptions(), Training(), Validation(), {});
    Driver driver;
    for (int i = 0; i < stop; ++i) driver.Step(&tm);
    proto::TaskLedger ledger = tm.ToLedger();
    mid_evaluation += ledger.evaluating() ? 1 : 0;
    held += std::any_of(ledger.tasks().begin(), ledger.tasks().end(),
                        [](const proto::JournalTask& t) { return t.holder() >= 0; });
    between_epochs += std::none_of(ledger.tasks().begin(), ledger.tasks().end(),
                                   [](const proto::JournalTask& t) { return t.training(); })
                          ? 1
                          : 0;

    auto restored = Restore(tm, TrainingOptions(), Training(), Validation());
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(restored->ToLedger().SerializeAsString(), ledger.SerializeAsString());
    Driver copy = driver;
    driver.clear_log();
    copy.clear_log();
    while (driver.Step(&tm)) {
    }
    while (copy.Step(&*restored)) {
    }
    EXPECT_EQ(copy.log(), driver.log());
    EXPECT_EQ(Outcome(*restored), Outcome(tm));
    if (HasFailure()) return;
  }
  EXPECT_GT(mid_evaluation, 0);
  EXPECT_GT(held, 0);
  EXPECT_GT(between_epochs, 0);
}

TEST(TaskLedgerTest, EvaluationJobResumesWithMergedStates) {
  TaskManagerOptions options;
  options.job_type = proto::JOB_EVALUATION;
  options.model_version = 9;
  TaskManager tm(options, {}, Validation(), {});
  Driver driver;
  driver.Step(&tm);
  driver.Step(&tm);
  auto restored = Restore(tm, options, {}, Validation());
  ASSERT_TRUE(restored.ok()) << restored.status();
  Driver copy = driver;
  while (driver.Step(&tm)) {
  }
  while (copy.Step(&*restored)) {
  }
  EXPECT_EQ(copy.log(), driver.log());
  EXPECT_EQ(Outcome(*restored), Outcome(tm));
  ASSERT_EQ(restored->evaluations().size(), 1u);
  EXPECT_DOUBLE_EQ(restored->evaluations()[0].metrics.at("mean_start"), 40.0 / 3);
  EXPECT_EQ(restored->records_done(), 70);
}

TEST(TaskLedgerTest, PredictionJobKeepsItsTasks) {
  TaskManagerOptions options;
  options.job_type = proto::JOB_PREDICTION;
  std::vector<Range> prediction = {{"p", 0, 5}, {"p", 5, 9}, {"q", 0, 3}};
  TaskManager tm(options, {}, {}, prediction);
  proto::Task first = tm.Next(WorkerId(1));
  auto restored = Restore(tm, options, {}, {}, prediction);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->prediction_tasks().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(restored->prediction_tasks()[i].second, tm.prediction_tasks()[i].second);
  }
  // The held task is still held; its holder never comes back.
  EXPECT_EQ(restored->Holders(), testing::WorkerIds({1}));
  EXPECT_EQ(restored->RecoverWorker(WorkerId(1)), 1);
  int64_t redone = -1;
  for (proto::Task t = restored->Next(WorkerId(2)); t.type() == proto::TASK_PREDICTION;
       t = restored->Next(WorkerId(2))) {
    if (redone < 0) redone = t.task_id();
    proto::ReportTaskRequest r;
    r.set_task_id(t.task_id());
    r.set_attempt(t.attempt());
    EXPECT_TRUE(restored->Report(WorkerId(2), r));
  }
  EXPECT_EQ(redone, first.task_id());
  EXPECT_TRUE(restored->finished());
  EXPECT_EQ(restored->records_done(), 12);
}

// A restarted master of a job whose last training task was given up does
// not take its training as finished (and write a model without the task).
TEST(TaskLedgerTest, TrainingGivenUpStaysUnfinishedAfterARestart) {
  TaskManagerOptions options = TrainingOptions();
  options.num_epochs = 1;
  options.max_task_retries = 0;
  const std::vector<Range> one_task = {{"t", 0, 40}};
  TaskManager tm(options, one_task, {}, {});
  proto::Task task = tm.Next(WorkerId(1));
  ASSERT_EQ(task.type(), proto::TASK_TRAINING);
  proto::ReportTaskRequest failed;
  failed.set_worker_id(1);
  failed.set_task_id(task.task_id());
  failed.set_attempt(task.attempt());
  failed.set_error("bad record");
  ASSERT_TRUE(tm.Report(WorkerId(1), failed));
  ASSERT_TRUE(tm.failure().has_value());
  ASSERT_FALSE(tm.training_finished());
  auto restored = Restore(tm, options, one_task, {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->failure().has_value());
  EXPECT_FALSE(restored->training_finished());
}

TEST(TaskLedgerTest, HeartbeatsKeepTheNextTaskTheyName) {
  TaskManager tm(TrainingOptions(), Training(), {}, {});
  proto::Task current = tm.Next(WorkerId(1));
  proto::Task next = tm.Next(WorkerId(1));
  auto restored = Restore(tm, TrainingOptions(), Training(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->ReconcileWorker(WorkerId(1), TaskId(current.task_id()), current.attempt(),
                                        TaskAttempt{TaskId(next.task_id()), next.attempt()}));
  EXPECT_EQ(restored->HeldBy(WorkerId(1)),
            (std::vector<TaskId>{TaskId(current.task_id()), TaskId(next.task_id())}));
}

TEST(TaskLedgerTest, HeartbeatsReturnTasksTheirWorkersDoNotHave) {
  TaskManager tm(TrainingOptions(), Training(), {}, {});
  proto::Task lost_reply = tm.Next(WorkerId(1));
  proto::Task current = tm.Next(WorkerId(2));
  proto::Task lost_reply_too = tm.Next(WorkerId(3));
  auto restored = Restore(tm, TrainingOptions(), Training(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  // Worker 1 never got its task: it is idle.
  EXPECT_FALSE(restored->ReconcileWorker(WorkerId(1), TaskId(-1), 0));
  EXPECT_TRUE(restored->HeldBy(WorkerId(1)).empty());
  EXPECT_TRUE(restored->ReconcileWorker(WorkerId(2), TaskId(current.task_id()), current.attempt()));
  proto::Task again = restored->Next(WorkerId(4));
  EXPECT_EQ(again.task_id(), lost_reply.task_id());
  EXPECT_EQ(again.attempt(), 2);
  // A task handed out since the restart survives a heartbeat that crossed
  // it...
  proto::Task fresh = restored->Next(WorkerId(2));
  EXPECT_FALSE(restored->ReconcileWorker(WorkerId(2), TaskId(-1), 0));
  EXPECT_FALSE(restored->ReconcileWorker(WorkerId(3), TaskId(-1), 0));
  EXPECT_EQ(restored->HeldBy(WorkerId(2)),
            (std::vector<TaskId>{TaskId(current.task_id()), TaskId(fresh.task_id())}));
  // ... but not one that says the worker is on another.
  EXPECT_TRUE(restored->ReconcileWorker(WorkerId(2), TaskId(fresh.task_id()), fresh.attempt()));
  EXPECT_EQ(restored->HeldBy(WorkerId(2)), std::vector<TaskId>{TaskId(fresh.task_id())});
  EXPECT_EQ(restored->Next(WorkerId(5)).task_id(), current.task_id());
  EXPECT_EQ(restored->Next(WorkerId(6)).task_id(), lost_reply_too.task_id());
}

TEST(TaskLedgerTest, TrainingTimeGoesOnFromTheLedger) {
  TaskManager tm(TrainingOptions(), Training(), {}, {});
  proto::TaskLedger ledger = tm.ToLedger();
  ledger.set_training_seconds(12.5);
  auto restored = TaskManager::FromLedger(TrainingOptions(), Training(), {}, {}, ledger);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_DOUBLE_EQ(restored->training_seconds(), 12.5);
  proto::Task t = restored->Next(WorkerId(1));
  proto::ReportTaskRequest r;
  r.set_task_id(t.task_id());
  r.set_attempt(t.attempt());
  ASSERT_TRUE(restored->Report(WorkerId(1), r));
  EXPECT_GE(restored->training_seconds(), 12.5);
}

// A ledger taken in the middle of the second epoch, during an evaluation,
// with a held task.
proto::TaskLedger MidJobLedger() {
  TaskManager tm(TrainingOptions(), Training(), Validation(), {});
  Driver driver;
  for (int i = 0; i < 12; ++i) driver.Step(&tm);
  proto::TaskLedger ledger = tm.ToLedger();
  EXPECT_EQ(ledger.epoch(), 1);
  EXPECT_TRUE(ledger.evaluating());
  return ledger;
}

Status FromMidJob(const proto::TaskLedger& ledger,
                  const TaskManagerOptions& options = TrainingOptions(),
                  const std::vector<Range>& training = Training(),
                  const std::vector<Range>& validation = Validation()) {
  return TaskManager::FromLedger(options, training, validation, {}, ledger).status();
}

TEST(TaskLedgerTest, LedgerOfOtherDataIsAnError) {
  proto::TaskLedger ledger = MidJobLedger();
  ASSERT_TRUE(FromMidJob(ledger).ok()) << FromMidJob(ledger);

  std::vector<Range> fewer = Training();
  fewer.pop_back();
  Status s = FromMidJob(ledger, TrainingOptions(), fewer);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("did the data change?"), absl::string_view::npos) << s;

  std::vector<Range> moved = Training();
  moved[2].end -= 1;
  moved[3].start -= 1;
  s = FromMidJob(ledger, TrainingOptions(), moved);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("t records ["), absl::string_view::npos) << s;

  std::vector<Range> validation = Validation();
  validation[1].file = "w";
  s = FromMidJob(ledger, TrainingOptions(), Training(), validation);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("validation range"), absl::string_view::npos) << s;

  TaskManagerOptions one_epoch = TrainingOptions();
  one_epoch.num_epochs = 1;
  EXPECT_EQ(FromMidJob(ledger, one_epoch).code(), StatusCode::kFailedPrecondition);

  TaskManagerOptions prediction = TrainingOptions();
  prediction.job_type = proto::JOB_PREDICTION;
  EXPECT_FALSE(FromMidJob(ledger, prediction).ok());

  TaskManagerOptions minibatches = TrainingOptions();
  minibatches.minibatch_size = 40;  // progress beyond a task's minibatches
  EXPECT_FALSE(FromMidJob(ledger, minibatches).ok());
}

TEST(TaskLedgerTest, DamagedLedgerIsAnErrorNotACrash) {
  const proto::TaskLedger good = MidJobLedger();
  ASSERT_GE(good.tasks_size(), 2);
  std::vector<std::pair<const char*, void (*)(proto::TaskLedger*)>> damages = {
      {"rng", [](proto::TaskLedger* l) { l->set_rng_state("not a state"); }},
      {"epoch", [](proto::TaskLedger* l) { l->set_epoch(7); }},
      {"negative epoch", [](proto::TaskLedger* l) { l->set_epoch(-3); }},
      {"records", [](proto::TaskLedger* l) { l->set_records_done(l->records_done() + 1); }},
      {"next id", [](proto::TaskLedger* l) { l->set_next_task_id(1); }},
      {"duplicate", [](proto::TaskLedger* l) { *l->add_tasks() = l->tasks(0); }},
      {"lost task", [](proto::TaskLedger* l) { l->mutable_tasks()->RemoveLast(); }},
      {"progress",
       [](proto::TaskLedger* l) { l->mutable_tasks(0)->mutable_task()->set_minibatches_done(5); }},
      {"holder", [](proto::TaskLedger* l) { l->mutable_tasks(0)->set_holder(-2); }},
      {"type",
       [](proto::TaskLedger* l) {
         l->mutable_tasks(0)->mutable_task()->set_type(proto::TASK_WAIT);
       }},
      {"queue",
       [](proto::TaskLedger* l) {
         for (auto& t : *l->mutable_tasks()) t.set_training(!t.training());
       }},
      {"evaluation",
       [](proto::TaskLedger* l) { l->set_evaluation_tasks_left(l->evaluation_tasks_left() + 1); }},
      {"evaluation version", [](proto::TaskLedger* l) { l->set_evaluation_version(1234); }},
      {"finished", [](proto::TaskLedger* l) { l->add_finished_training()->set_task_id(0); }},
  };
  for (const auto& [name, damage] : damages) {
    proto::TaskLedger ledger = good;
    damage(&ledger);
    Status s = FromMidJob(ledger);
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find("master journal: "), absl::string_view::npos) << name << ": " << s;
  }
}

}  // namespace
}  // namespace elasticdl::master
