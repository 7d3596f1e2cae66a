#include "master/task_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "testing/ids.h"

namespace elasticdl::master {
namespace {

std::vector<Range> Ranges(int n, int64_t size = 10) {
  std::vector<Range> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.push_back({"f", i * size, (i + 1) * size});
  return out;
}

proto::ReportTaskRequest Done(const proto::Task& task, int64_t version = 0) {
  proto::ReportTaskRequest r;
  r.set_task_id(task.task_id());
  r.set_attempt(task.attempt());
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
    proto::Task t = tm.Next(WorkerId(1));
    if (t.type() == proto::TASK_NONE) break;
    ASSERT_EQ(t.type(), proto::TASK_TRAINING);
    starts.insert(t.start());
    EXPECT_TRUE(tm.Report(WorkerId(1), Done(t)));
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
      proto::Task t = tm.Next(WorkerId(1));
      order[t.epoch()].push_back(t.start());
      tm.Report(WorkerId(1), Done(t));
    }
  }
  EXPECT_NE(order[0], order[1]);
}

// Two workers take turns over two epochs of `n` ranges; `hold_last` keeps
// the last task of the first epoch while the second is dealt. Returns
// the ranges' starts in the order each epoch dealt them.
std::vector<std::vector<int64_t>> TwoWorkersTwoEpochs(uint64_t seed, int n, bool hold_last) {
  TaskManagerOptions options;
  options.num_epochs = 2;
  options.shuffle_seed = seed;
  TaskManager tm(options, Ranges(n), {}, {});
  tm.set_parallelism(2);
  std::vector<std::vector<int64_t>> order(2);
  std::optional<proto::Task> held;
  WorkerId holder;
  for (int i = 0; i < 2 * n; ++i) {
    const WorkerId worker(1 + i % 2);
    proto::Task t = tm.Next(worker);
    EXPECT_EQ(t.type(), proto::TASK_TRAINING);
    order[t.epoch()].push_back(t.start());
    if (hold_last && i == n - 1) {
      held = t;
      holder = worker;
    } else {
      EXPECT_TRUE(tm.Report(worker, Done(t)));
    }
    if (held && i == n + 1) {
      EXPECT_TRUE(tm.Report(holder, Done(*held)));
    }
  }
  return order;
}

TEST(TaskManagerTest, AnEpochsLastRangesAreNotDealtFirstInTheNext) {
  const int n = 12;
  std::set<size_t> positions;  // where the first epoch's last ranges went
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto order = TwoWorkersTwoEpochs(seed, n, /*hold_last=*/false);
    ASSERT_EQ(order[1].size(), static_cast<size_t>(n));
    // Two workers: the last 4 of the first epoch are not among the first 4
    // of the second.
    std::set<int64_t> last(order[0].end() - 4, order[0].end());
    for (size_t i = 0; i < order[1].size(); ++i) {
      if (last.count(order[1][i]) == 0) continue;
      EXPECT_GE(i, 4u) << "seed " << seed;
      positions.insert(i);
    }
    // Timing does not change the order: the same seed deals the same
    // epochs whether or not a task was still held when the next was dealt.
    EXPECT_EQ(order, TwoWorkersTwoEpochs(seed, n, /*hold_last=*/true)) << "seed " << seed;
  }
  // Kept apart, not pushed to the end: the order is still a shuffle.
  EXPECT_TRUE(positions.count(4) || positions.count(5));
}

TEST(TaskManagerTest, OneWorkerKeepsThePlainShuffle) {
  // One worker trains one task at a time; its epochs are the seed's
  // shuffles as they are, which a plain loop can reproduce.
  TaskManagerOptions options;
  options.num_epochs = 3;
  options.shuffle_seed = 5;
  TaskManager tm(options, Ranges(6), {}, {});
  std::mt19937_64 rng(5);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<Range> expected = Ranges(6);
    std::shuffle(expected.begin(), expected.end(), rng);
    for (const Range& r : expected) {
      proto::Task t = tm.Next(WorkerId(1));
      EXPECT_EQ(t.start(), r.start) << "epoch " << epoch;
      ASSERT_TRUE(tm.Report(WorkerId(1), Done(t)));
    }
  }
}

TEST(TaskManagerTest, ReportsFromOtherWorkersAreIgnored) {
  TaskManager tm({}, Ranges(1), {}, {});
  proto::Task t = tm.Next(WorkerId(1));
  EXPECT_FALSE(tm.Report(WorkerId(2), Done(t)));
  proto::Task invented = t;
  invented.set_task_id(t.task_id() + 100);
  EXPECT_FALSE(tm.Report(WorkerId(1), Done(invented)));
  EXPECT_FALSE(tm.finished());
  EXPECT_TRUE(tm.Report(WorkerId(1), Done(t)));
  EXPECT_TRUE(tm.finished());
}

TEST(TaskManagerTest, LostWorkersTasksGoBackFirst) {
  TaskManager tm({}, Ranges(3), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  EXPECT_EQ(tm.RecoverWorker(WorkerId(1)), 1);
  proto::Task again = tm.Next(WorkerId(2));
  EXPECT_EQ(again.task_id(), a.task_id());
  // The lost worker's late report no longer counts.
  EXPECT_FALSE(tm.Report(WorkerId(1), Done(a)));
  EXPECT_TRUE(tm.Report(WorkerId(2), Done(b)));
}

TEST(TaskManagerTest, AWorkerMayHoldItsNextTaskBeforeItsCurrentOneEnds) {
  TaskManager tm({}, Ranges(4), {}, {});
  const WorkerId worker(1);
  proto::Task current = tm.Next(worker);
  // Asked for the next task keeping the current one: both are held.
  EXPECT_EQ(tm.RecoverWorker(worker, TaskAttempt{TaskId(current.task_id()), current.attempt()}), 0);
  proto::Task next = tm.Next(worker, /*ahead=*/true);
  EXPECT_EQ(tm.HeldBy(worker),
            (std::vector<TaskId>{TaskId(current.task_id()), TaskId(next.task_id())}));
  // A heartbeat sent before the worker saw it keeps it too.
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(current.task_id()), current.attempt()));
  EXPECT_EQ(tm.HeldBy(worker).size(), 2u);
  // Heartbeats that name both keep both; the current one is reported.
  const TaskAttempt ahead{TaskId(next.task_id()), next.attempt()};
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(current.task_id()), current.attempt(), ahead));
  EXPECT_EQ(tm.HeldBy(worker).size(), 2u);
  EXPECT_TRUE(tm.Report(worker, Done(current)));
  EXPECT_FALSE(tm.ReconcileWorker(worker, TaskId(-1), 0, ahead));
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt()));
  EXPECT_EQ(tm.HeldBy(worker), std::vector<TaskId>{TaskId(next.task_id())});
  // A heartbeat sent while the worker asks ahead keeps what was handed out
  // since (the answer may be on its way)...
  proto::Task crossing = tm.Next(worker);
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt(),
                                 TaskAttempt{TaskId(-1), 0}));
  EXPECT_EQ(tm.HeldBy(worker),
            (std::vector<TaskId>{TaskId(next.task_id()), TaskId(crossing.task_id())}));
  // ... one that does not name the next task drops it (a reply the worker
  // never got), as does keeping a task the worker does not hold.
  proto::Task unseen = tm.Next(worker);
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt()));
  EXPECT_EQ(tm.HeldBy(worker), std::vector<TaskId>{TaskId(next.task_id())});
  EXPECT_EQ(tm.RecoverWorker(worker, TaskAttempt{TaskId(unseen.task_id()), unseen.attempt()}), 1);
  EXPECT_TRUE(tm.HeldBy(worker).empty());
  // A task handed out ahead that the worker never saw goes back when it asks
  // again.
  proto::Task on = tm.Next(worker);
  proto::Task lost_reply = tm.Next(worker, /*ahead=*/true);
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(on.task_id()), on.attempt()));
  EXPECT_EQ(tm.HeldBy(worker).size(), 2u);
  EXPECT_TRUE(tm.Report(worker, Done(on)));
  EXPECT_EQ(tm.RecoverWorker(worker), 1);
  EXPECT_EQ(tm.Next(worker).task_id(), lost_reply.task_id());
  tm.RecoverWorker(worker);
  // A lost worker's tasks all go back.
  proto::Task a = tm.Next(worker);
  proto::Task b = tm.Next(worker);
  EXPECT_EQ(tm.RecoverWorker(worker), 2);
  std::set<int64_t> again = {tm.Next(WorkerId(2)).task_id(), tm.Next(WorkerId(2)).task_id()};
  EXPECT_EQ(again, (std::set<int64_t>{a.task_id(), b.task_id()}));
}

TEST(TaskManagerTest, ATaskBeingReportedStaysHeldWhileTheNextOneTrains) {
  TaskManager tm({}, Ranges(4), {}, {});
  const WorkerId worker(1);
  proto::Task done = tm.Next(worker);
  EXPECT_EQ(tm.RecoverWorker(worker, TaskAttempt{TaskId(done.task_id()), done.attempt()}), 0);
  proto::Task next = tm.Next(worker, /*ahead=*/true);
  // The worker has begun the next task; the report of the one it finished
  // is on its way, and its heartbeats say so: both stay held.
  const TaskAttempt reporting{TaskId(done.task_id()), done.attempt()};
  EXPECT_TRUE(
      tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt(), std::nullopt, reporting));
  EXPECT_EQ(tm.HeldBy(worker),
            (std::vector<TaskId>{TaskId(done.task_id()), TaskId(next.task_id())}));
  EXPECT_TRUE(tm.Report(worker, Done(done)));
  // A heartbeat crossing the report names a task no longer held: nothing
  // changes.
  EXPECT_TRUE(
      tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt(), std::nullopt, reporting));
  EXPECT_EQ(tm.HeldBy(worker), std::vector<TaskId>{TaskId(next.task_id())});
  // Not named at all, a finished task is one the worker no longer works on:
  // it goes back.
  proto::Task unreported = tm.Next(worker);
  EXPECT_TRUE(tm.ReconcileWorker(worker, TaskId(next.task_id()), next.attempt()));
  EXPECT_EQ(tm.HeldBy(worker), std::vector<TaskId>{TaskId(next.task_id())});
  EXPECT_EQ(tm.Next(WorkerId(2)).task_id(), unreported.task_id());
}

TEST(TaskManagerTest, FailsLoudlyAfterRetries) {
  TaskManagerOptions options;
  options.max_task_retries = 2;
  TaskManager tm(options, Ranges(2), {}, {});
  for (int attempt = 0; attempt < 3; ++attempt) {
    proto::Task t = tm.Next(WorkerId(1));
    proto::ReportTaskRequest r = Done(t);
    r.set_error("bad record 7");
    tm.Report(WorkerId(1), r);
    if (attempt < 2) {
      EXPECT_FALSE(tm.failure().has_value());
    }
  }
  ASSERT_TRUE(tm.failure().has_value());
  EXPECT_NE(tm.failure()->find("failed 3 times; last error: bad record 7"), std::string::npos)
      << *tm.failure();
  EXPECT_NE(tm.failure()->find("f records ["), std::string::npos) << *tm.failure();
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.Next(WorkerId(1)).type(), proto::TASK_NONE);
}

TEST(TaskManagerTest, TrainingGivenUpOnTheLastTaskIsNotFinished) {
  TaskManagerOptions options;
  options.max_task_retries = 0;
  TaskManager tm(options, Ranges(2), {}, {});
  proto::Task first = tm.Next(WorkerId(1));
  proto::Task last = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(first)));
  proto::ReportTaskRequest failed = Done(last);
  failed.set_error("bad record 7");
  ASSERT_TRUE(tm.Report(WorkerId(1), failed));
  ASSERT_TRUE(tm.failure().has_value());
  EXPECT_TRUE(tm.finished());
  // Nothing is left to hand out, but the failed task's records are not in
  // the model.
  EXPECT_FALSE(tm.training_finished());
}

TEST(TaskManagerTest, EvaluatesEveryStepsAndAtTheEndWithMergedStates) {
  TaskManagerOptions options;
  options.evaluation_steps = 2;
  TaskManager tm(options, Ranges(4), Ranges(2), {});
  int64_t version = 0;
  int evaluation_tasks = 0;
  while (true) {
    proto::Task t = tm.Next(WorkerId(1));
    if (t.type() == proto::TASK_NONE) break;
    ASSERT_NE(t.type(), proto::TASK_WAIT);
    proto::ReportTaskRequest r = Done(t, t.type() == proto::TASK_TRAINING ? ++version : 0);
    if (t.type() == proto::TASK_EVALUATION) {
      ++evaluation_tasks;
      proto::MetricState* m = r.add_metrics();
      m->set_name("accuracy");
      m->add_values(t.start() == 0 ? 9 : 6);  // correct
      m->add_values(10);                      // examples
    }
    tm.Report(WorkerId(1), r);
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
  proto::Task t = tm.Next(WorkerId(1));
  EXPECT_EQ(tm.Next(WorkerId(2)).type(), proto::TASK_WAIT);
  tm.Report(WorkerId(1), Done(t));
  EXPECT_EQ(tm.Next(WorkerId(2)).type(), proto::TASK_NONE);
}

TEST(TaskManagerTest, PredictionKeepsInputOrder) {
  TaskManagerOptions options;
  options.job_type = proto::JOB_PREDICTION;
  TaskManager tm(options, {}, {}, Ranges(3));
  ASSERT_EQ(tm.prediction_tasks().size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tm.prediction_tasks()[i].first.start, i * 10);
  for (int i = 0; i < 3; ++i) {
    proto::Task t = tm.Next(WorkerId(1));
    EXPECT_EQ(t.type(), proto::TASK_PREDICTION);
    tm.Report(WorkerId(1), Done(t));
  }
  EXPECT_TRUE(tm.finished());
}

proto::ReportTaskRequest Stopped(const proto::Task& task, int64_t minibatches_done) {
  proto::ReportTaskRequest r = Done(task);
  r.set_stopped(true);
  r.set_minibatches_done(minibatches_done);
  return r;
}

// Ranges of 40 records in minibatches of 10: 4 minibatches a task.
TaskManagerOptions FourMinibatches() {
  TaskManagerOptions options;
  options.minibatch_size = 10;
  return options;
}

TEST(TaskManagerTest, CountsMinibatches) {
  TaskManagerOptions options;
  options.minibatch_size = 4;
  TaskManager tm(options, Ranges(1), {}, {});
  proto::Task t = tm.Next(WorkerId(1));
  EXPECT_EQ(tm.NumMinibatches(t), 3);  // 4 + 4 + 2
  t.set_end(t.start() + 12);
  EXPECT_EQ(tm.NumMinibatches(t), 3);
  t.set_type(proto::TASK_EVALUATION);
  EXPECT_EQ(tm.NumMinibatches(t), 1);
  EXPECT_EQ(TaskManager({}, Ranges(1), {}, {}).NumMinibatches(t), 1);
}

TEST(TaskManagerTest, EveryHandOutIsANewAttemptAndStaleOnesAreRefused) {
  TaskManager tm(FourMinibatches(), Ranges(2, 40), {}, {});
  proto::Task first = tm.Next(WorkerId(1));
  EXPECT_EQ(first.attempt(), 1);
  EXPECT_EQ(first.minibatches_done(), 0);
  EXPECT_EQ(tm.HeldBy(WorkerId(1)), std::vector<TaskId>{TaskId(first.task_id())});
  EXPECT_EQ(tm.RecoverWorker(WorkerId(1)), 1);
  EXPECT_TRUE(tm.HeldBy(WorkerId(1)).empty());

  proto::Task second = tm.Next(WorkerId(1));  // the same worker, back again
  EXPECT_EQ(second.task_id(), first.task_id());
  EXPECT_EQ(second.attempt(), 2);
  EXPECT_EQ(tm.Holders(), testing::WorkerIds({1}));
  // The first hand-out's report and heartbeat no longer count.
  EXPECT_FALSE(tm.Report(WorkerId(1), Done(first)));
  EXPECT_FALSE(tm.Progress(WorkerId(1), TaskId(first.task_id()), first.attempt(), 3));
  EXPECT_FALSE(tm.Progress(WorkerId(2), TaskId(second.task_id()), second.attempt(), 3));
  EXPECT_TRUE(tm.Progress(WorkerId(1), TaskId(second.task_id()), second.attempt(), 3));
  EXPECT_TRUE(tm.Report(WorkerId(1), Done(second)));
  EXPECT_EQ(tm.records_done(), 40);
  // A report on a finished task is refused too.
  EXPECT_FALSE(tm.Report(WorkerId(1), Done(second)));
  EXPECT_EQ(tm.records_done(), 40);
}

TEST(TaskManagerTest, LostWorkersTaskResumesAtItsLastHeartbeat) {
  TaskManager tm(FourMinibatches(), Ranges(2, 40), {}, {});
  proto::Task t = tm.Next(WorkerId(1));
  EXPECT_TRUE(tm.Progress(WorkerId(1), TaskId(t.task_id()), 1, 2));
  EXPECT_TRUE(tm.Progress(WorkerId(1), TaskId(t.task_id()), 1, 1));   // late: never lowers
  EXPECT_TRUE(tm.Progress(WorkerId(1), TaskId(t.task_id()), 1, 99));  // capped at the task's 4
  tm.RecoverWorker(WorkerId(1));
  proto::Task again = tm.Next(WorkerId(2));
  EXPECT_EQ(again.task_id(), t.task_id());
  EXPECT_EQ(again.minibatches_done(), 4);
  EXPECT_EQ(again.attempt(), 2);

  TaskManager tm2(FourMinibatches(), Ranges(2, 40), {}, {});
  t = tm2.Next(WorkerId(1));
  tm2.Progress(WorkerId(1), TaskId(t.task_id()), 1, 3);
  EXPECT_EQ(tm2.RecoverWorker(WorkerId(1)), 1);
  again = tm2.Next(WorkerId(2));
  EXPECT_EQ(again.task_id(), t.task_id());
  EXPECT_EQ(again.minibatches_done(), 3);
}

TEST(TaskManagerTest, StoppedWorkersRestGoesFirstAndIsNoFailure) {
  TaskManagerOptions options = FourMinibatches();
  options.max_task_retries = 0;
  TaskManager tm(options, Ranges(3, 40), {}, {});
  proto::Task t = tm.Next(WorkerId(1));
  tm.Progress(WorkerId(1), TaskId(t.task_id()), 1, 2);
  EXPECT_TRUE(tm.Report(WorkerId(1), Stopped(t, 1)));  // the heartbeat knew more
  EXPECT_FALSE(tm.failure().has_value());
  proto::Task rest = tm.Next(WorkerId(2));
  EXPECT_EQ(rest.task_id(), t.task_id());
  EXPECT_EQ(rest.minibatches_done(), 2);
  EXPECT_TRUE(tm.Report(WorkerId(2), Stopped(rest, 3)));
  rest = tm.Next(WorkerId(3));
  EXPECT_EQ(rest.task_id(), t.task_id());
  EXPECT_EQ(rest.minibatches_done(), 3);
  EXPECT_EQ(tm.records_done(), 0);
  // Stopped after the last minibatch: finished.
  EXPECT_TRUE(tm.Report(WorkerId(3), Stopped(rest, 4)));
  EXPECT_EQ(tm.records_done(), 40);
  EXPECT_NE(tm.Next(WorkerId(3)).task_id(), t.task_id());
  EXPECT_FALSE(tm.failure().has_value());
}

TEST(TaskManagerTest, FailedTaskKeepsItsProgress) {
  TaskManager tm(FourMinibatches(), Ranges(2, 40), {}, {});
  proto::Task t = tm.Next(WorkerId(1));
  proto::ReportTaskRequest r = Stopped(t, 2);
  r.set_stopped(false);
  r.set_error("out of memory");
  EXPECT_TRUE(tm.Report(WorkerId(1), r));
  proto::Task again = tm.Next(WorkerId(1));
  EXPECT_EQ(again.task_id(), t.task_id());
  EXPECT_EQ(again.minibatches_done(), 2);
  EXPECT_FALSE(tm.failure().has_value());
}

TEST(TaskManagerTest, RestoredPsReopensFinishedTasksAndRevokesHeldOnes) {
  TaskManager tm(FourMinibatches(), Ranges(4, 40), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(a)));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(b)));
  proto::Task c = tm.Next(WorkerId(2));
  proto::Task d = tm.Next(WorkerId(3));
  tm.Progress(WorkerId(2), TaskId(c.task_id()), 1, 3);
  EXPECT_EQ(tm.records_done(), 80);

  // The server has all of b, a's first minibatch, c's first two; nothing of d.
  std::vector<proto::TaskProgress> applied(3);
  applied[0].set_task_id(a.task_id());
  applied[0].set_minibatches(1);
  applied[1].set_task_id(b.task_id());
  applied[1].set_minibatches(4);
  applied[2].set_task_id(c.task_id());
  applied[2].set_minibatches(2);
  EXPECT_EQ(tm.PsRestored(applied), 3);  // a reopened, c and d revoked
  EXPECT_EQ(tm.records_done(), 40);
  EXPECT_FALSE(tm.Report(WorkerId(2), Done(c)));
  EXPECT_FALSE(tm.Progress(WorkerId(3), TaskId(d.task_id()), 1, 1));
  EXPECT_TRUE(tm.HeldBy(WorkerId(2)).empty());

  // Oldest first, each from what the server has.
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int i = 0; i < 3; ++i) {
    proto::Task t = tm.Next(WorkerId(4));
    order.emplace_back(t.task_id(), t.minibatches_done());
    EXPECT_TRUE(tm.Report(WorkerId(4), Done(t)));
  }
  EXPECT_EQ(order, (std::vector<std::pair<int64_t, int64_t>>{
                       {a.task_id(), 1}, {c.task_id(), 2}, {d.task_id(), 0}}));
  EXPECT_EQ(tm.records_done(), 160);
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.Next(WorkerId(4)).type(), proto::TASK_NONE);

  // A server that has everything changes nothing.
  for (const int64_t id : {a.task_id(), b.task_id(), c.task_id(), d.task_id()}) {
    applied.emplace_back().set_task_id(id);
    applied.back().set_minibatches(4);
  }
  EXPECT_EQ(tm.PsRestored(applied), 0);
  EXPECT_TRUE(tm.finished());
}

TEST(TaskManagerTest, RestoredPsAfterTrainingReopensItBeforeTheFinalEvaluation) {
  TaskManager tm(FourMinibatches(), Ranges(1, 40), Ranges(1, 40), {});
  proto::Task t = tm.Next(WorkerId(1));
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(t, 1)));
  proto::Task eval = tm.Next(WorkerId(1));
  ASSERT_EQ(eval.type(), proto::TASK_EVALUATION);
  EXPECT_TRUE(tm.training_finished());
  EXPECT_EQ(tm.PsRestored({}), 1);
  EXPECT_FALSE(tm.training_finished());
  // The evaluation in progress is not touched.
  EXPECT_TRUE(tm.Report(WorkerId(1), Done(eval)));
  ASSERT_EQ(tm.evaluations().size(), 1u);
  proto::Task redo = tm.Next(WorkerId(1));
  EXPECT_EQ(redo.task_id(), t.task_id());
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(redo, 2)));
  // Training ended again: a final evaluation of the new model.
  proto::Task final_eval = tm.Next(WorkerId(1));
  EXPECT_EQ(final_eval.type(), proto::TASK_EVALUATION);
  EXPECT_EQ(final_eval.model_version(), 2);
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(final_eval)));
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.records_done(), 40);
}

// Steps that take a minibatch of every worker.
TaskManagerOptions TwoEpochsInLockstep() {
  TaskManagerOptions options = FourMinibatches();
  options.num_epochs = 2;
  options.lockstep = true;
  return options;
}

TEST(TaskManagerTest, AReopenedRangeDoesNotTrainBesideTheSameRecordsOfAnotherEpoch) {
  // Two epochs of two ranges; the first epoch finished and the second under
  // way when a server comes back with nothing applied: the restore puts both
  // of the first epoch's tasks at the front, ahead of the second's.
  TaskManager tm(TwoEpochsInLockstep(), Ranges(2, 40), {}, {});
  tm.set_parallelism(3);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(tm.Report(WorkerId(1), Done(tm.Next(WorkerId(1)))));
  proto::Task second = tm.Next(WorkerId(2));
  ASSERT_EQ(second.epoch(), 1);
  EXPECT_EQ(tm.PsRestored({}), 3);
  // Its worker hears of the revocation and stops.
  EXPECT_FALSE(tm.Report(WorkerId(2), Done(second)));

  proto::Task a = tm.Next(WorkerId(3));
  proto::Task b = tm.Next(WorkerId(4));
  EXPECT_EQ(a.epoch(), 0);
  EXPECT_EQ(b.epoch(), 0);
  // Both of the second epoch's ranges are held in the first: wait.
  EXPECT_EQ(tm.Next(WorkerId(5)).type(), proto::TASK_WAIT);
  // Once the one that finishes is done, the same range of the second epoch
  // goes out, whichever is first in the queue.
  ASSERT_TRUE(tm.Report(WorkerId(4), Done(b)));
  proto::Task next = tm.Next(WorkerId(5));
  EXPECT_EQ(next.epoch(), 1);
  EXPECT_EQ(next.start(), b.start());
  EXPECT_EQ(tm.Next(WorkerId(4)).type(), proto::TASK_WAIT);
  ASSERT_TRUE(tm.Report(WorkerId(3), Done(a)));
  proto::Task last = tm.Next(WorkerId(4));
  EXPECT_EQ(last.epoch(), 1);
  EXPECT_EQ(last.start(), a.start());
  ASSERT_TRUE(tm.Report(WorkerId(5), Done(next)));
  ASSERT_TRUE(tm.Report(WorkerId(4), Done(last)));
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.records_done(), 160);
}

TEST(TaskManagerTest, ARevokedHoldersRecordsWaitUntilItStops) {
  // One range, two epochs: the second epoch's task is held when a server
  // comes back with nothing applied. Its holder may train on until it hears
  // of the revocation, and the servers take its minibatches while they
  // follow what they have.
  TaskManagerOptions options = TwoEpochsInLockstep();
  TaskManager tm(options, Ranges(1, 40), {}, {});
  tm.set_parallelism(2);
  ASSERT_TRUE(tm.Report(WorkerId(1), Done(tm.Next(WorkerId(1)))));
  proto::Task revoked = tm.Next(WorkerId(2));
  ASSERT_EQ(revoked.epoch(), 1);
  EXPECT_EQ(tm.PsRestored({}), 2);
  EXPECT_EQ(tm.Next(WorkerId(3)).type(), proto::TASK_WAIT);
  // Asking ahead while it keeps the revoked task, it still trains it.
  tm.RecoverWorker(WorkerId(2), TaskAttempt{TaskId(revoked.task_id()), revoked.attempt()});
  EXPECT_EQ(tm.Next(WorkerId(3)).type(), proto::TASK_WAIT);
  // Asking keeping none, it has stopped: the first epoch's task goes out,
  // and the second's only once that one is done.
  tm.RecoverWorker(WorkerId(2));
  proto::Task first = tm.Next(WorkerId(3));
  EXPECT_EQ(first.epoch(), 0);
  EXPECT_EQ(tm.Next(WorkerId(2)).type(), proto::TASK_WAIT);
  ASSERT_TRUE(tm.Report(WorkerId(3), Done(first)));
  proto::Task again = tm.Next(WorkerId(2));
  EXPECT_EQ(again.task_id(), revoked.task_id());
  ASSERT_TRUE(tm.Report(WorkerId(2), Done(again)));
  EXPECT_TRUE(tm.finished());

  // So does a worker lost with it.
  TaskManager lost(options, Ranges(1, 40), {}, {});
  ASSERT_TRUE(lost.Report(WorkerId(1), Done(lost.Next(WorkerId(1)))));
  lost.Next(WorkerId(2));
  lost.PsRestored({});
  EXPECT_EQ(lost.Next(WorkerId(3)).type(), proto::TASK_WAIT);
  EXPECT_EQ(lost.RecoverWorker(WorkerId(2)), 0);
  EXPECT_EQ(lost.Next(WorkerId(3)).epoch(), 0);

  // Asynchronous steps take one minibatch each: nothing waits.
  options.lockstep = false;
  TaskManager async(options, Ranges(1, 40), {}, {});
  ASSERT_TRUE(async.Report(WorkerId(1), Done(async.Next(WorkerId(1)))));
  async.Next(WorkerId(2));
  async.PsRestored({});
  EXPECT_EQ(async.Next(WorkerId(3)).epoch(), 0);
  EXPECT_EQ(async.Next(WorkerId(4)).epoch(), 1);
}

proto::ReportTaskRequest EvaluationDone(const proto::Task& t) {
  proto::ReportTaskRequest r = Done(t);
  proto::MetricState* m = r.add_metrics();
  m->set_name("tasks_per_record");
  m->add_values(1);
  m->add_values(static_cast<double>(t.end() - t.start()));
  return r;
}

TEST(TaskManagerTest, EvaluationCountsEachTaskOnceDespiteLostAndStoppedWorkers) {
  TaskManagerOptions options;
  options.job_type = proto::JOB_EVALUATION;
  options.model_version = 7;
  std::vector<Range> validation = {{"v", 0, 10}, {"v", 10, 30}, {"v", 30, 70}};
  TaskManager tm(options, {}, validation, {});
  proto::Task lost = tm.Next(WorkerId(1));
  proto::Task stopped = tm.Next(WorkerId(2));
  EXPECT_EQ(tm.RecoverWorker(WorkerId(1)), 1);
  EXPECT_TRUE(tm.Report(WorkerId(2), Stopped(stopped, 3)));
  // The lost worker's late report does not count.
  EXPECT_FALSE(tm.Report(WorkerId(1), EvaluationDone(lost)));
  int reports = 0;
  for (proto::Task t = tm.Next(WorkerId(3)); t.type() == proto::TASK_EVALUATION;
       t = tm.Next(WorkerId(3))) {
    EXPECT_EQ(t.minibatches_done(), 0);  // redone whole
    EXPECT_TRUE(tm.Report(WorkerId(3), EvaluationDone(t)));
    ++reports;
  }
  EXPECT_EQ(reports, 3);
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.records_done(), 70);
  ASSERT_EQ(tm.evaluations().size(), 1u);
  EXPECT_EQ(tm.evaluations()[0].model_version, 7);
  EXPECT_DOUBLE_EQ(tm.evaluations()[0].metrics.at("tasks_per_record"), 3.0 / 70);
}

TEST(TaskManagerBackupTest, InLockstepTheLastTaskWaitingForItsRecordsLeavesThemToBackups) {
  // One range, two epochs: the second epoch's task waits for the first's,
  // which an idle worker may back up.
  TaskManager tm(TwoEpochsInLockstep(), Ranges(1, 40), {}, {});
  const WorkerId slow(1), idle(2);
  proto::Task first = tm.Next(slow);
  EXPECT_EQ(tm.Next(idle).type(), proto::TASK_WAIT);
  std::vector<TaskManager::BackupCandidate> candidates = tm.BackupCandidates(idle);
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].task, TaskId(first.task_id()));
  proto::Task backup = tm.Backup(idle, TaskId(first.task_id()));
  ASSERT_EQ(backup.type(), proto::TASK_TRAINING);
  ASSERT_TRUE(tm.Report(idle, Done(backup)));
  proto::Task second = tm.Next(idle);
  EXPECT_EQ(second.epoch(), 1);
  ASSERT_TRUE(tm.Report(idle, Done(second)));
  EXPECT_TRUE(tm.finished());
  EXPECT_EQ(tm.records_done(), 80);
}

// Backup attempts: two tasks of four minibatches.
TaskManager TwoTasksOfFourMinibatches(int max_task_retries = 3) {
  TaskManagerOptions options = FourMinibatches();
  options.max_task_retries = max_task_retries;
  return TaskManager(options, Ranges(2, 40), {}, {});
}

TEST(TaskManagerBackupTest, AnIdleWorkerBacksUpATaskAndTheFirstToFinishWins) {
  TaskManager tm = TwoTasksOfFourMinibatches();
  const WorkerId slow(1), fast(2);
  proto::Task a = tm.Next(slow);
  proto::Task b = tm.Next(fast);
  ASSERT_EQ(b.type(), proto::TASK_TRAINING);
  // Nothing left to deal: `fast` could back up `slow`'s task, not its own.
  std::vector<TaskManager::BackupCandidate> candidates = tm.BackupCandidates(fast);
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].task, TaskId(a.task_id()));
  EXPECT_EQ(candidates[0].holder, slow);
  EXPECT_EQ(candidates[0].minibatches_left, 4);
  ASSERT_TRUE(tm.Report(fast, Done(b)));
  ASSERT_TRUE(tm.Progress(slow, TaskId(a.task_id()), a.attempt(), 1));
  EXPECT_EQ(tm.Next(fast).type(), proto::TASK_WAIT);

  proto::Task backup = tm.Backup(fast, TaskId(a.task_id()));
  ASSERT_EQ(backup.type(), proto::TASK_TRAINING);
  EXPECT_EQ(backup.task_id(), a.task_id());
  EXPECT_EQ(backup.attempt(), a.attempt() + 1);
  EXPECT_EQ(backup.minibatches_done(), 1);  // from the known progress
  // One backup per task.
  EXPECT_TRUE(tm.BackupCandidates(WorkerId(3)).empty());
  EXPECT_EQ(tm.Backup(WorkerId(3), TaskId(a.task_id())).type(), proto::TASK_WAIT);
  EXPECT_EQ(tm.held(), 1u);
  EXPECT_EQ(tm.HeldBy(fast), std::vector<TaskId>{TaskId(a.task_id())});
  EXPECT_EQ(tm.Holders(), (std::vector<WorkerId>{slow, fast}));
  // Both attempts' heartbeats count.
  EXPECT_TRUE(tm.ReconcileWorker(slow, TaskId(a.task_id()), a.attempt()));
  EXPECT_TRUE(tm.ReconcileWorker(fast, TaskId(a.task_id()), backup.attempt()));
  EXPECT_TRUE(tm.Progress(fast, TaskId(a.task_id()), backup.attempt(), 3));

  // The backup finishes first: the other attempt is dropped.
  std::vector<WorkerId> overtaken;
  proto::ReportTaskRequest done = Done(backup);
  done.set_minibatches_done(4);
  ASSERT_TRUE(tm.Report(fast, done, &overtaken));
  EXPECT_EQ(overtaken, std::vector<WorkerId>{slow});
  EXPECT_TRUE(tm.training_finished());
  EXPECT_EQ(tm.records_done(), 80);
  EXPECT_FALSE(tm.ReconcileWorker(slow, TaskId(a.task_id()), a.attempt()));
  EXPECT_FALSE(tm.Report(slow, Done(a)));
  EXPECT_EQ(tm.records_done(), 80);
  EXPECT_EQ(tm.Next(slow).type(), proto::TASK_NONE);
}

TEST(TaskManagerBackupTest, NoBackupsBeforeTheLastStretchOrOfTasksKnownApplied) {
  TaskManagerOptions options = FourMinibatches();
  options.num_epochs = 2;
  TaskManager tm(options, Ranges(3, 40), {}, {});
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  // A range left to deal, then an epoch to come.
  EXPECT_TRUE(tm.BackupCandidates(WorkerId(3)).empty());
  tm.Report(WorkerId(2), Done(b));
  proto::Task c = tm.Next(WorkerId(2));
  EXPECT_TRUE(tm.BackupCandidates(WorkerId(3)).empty());
  tm.Report(WorkerId(1), Done(a));
  tm.Report(WorkerId(2), Done(c));
  // The last epoch: its three ranges dealt, one of them known applied whole
  // (its report not in yet), one down to its last minibatch.
  proto::Task d = tm.Next(WorkerId(1));
  proto::Task e = tm.Next(WorkerId(2));
  proto::Task f = tm.Next(WorkerId(4));
  ASSERT_EQ(f.epoch(), 1);
  ASSERT_TRUE(tm.Progress(WorkerId(2), TaskId(e.task_id()), e.attempt(), 4));
  ASSERT_TRUE(tm.Progress(WorkerId(4), TaskId(f.task_id()), f.attempt(), 3));
  std::vector<TaskManager::BackupCandidate> candidates = tm.BackupCandidates(WorkerId(3));
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].task, TaskId(d.task_id()));
  EXPECT_EQ(candidates[0].minibatches_left, 4);
  EXPECT_EQ(candidates[1].task, TaskId(f.task_id()));
  EXPECT_EQ(candidates[1].minibatches_left, 1);
  EXPECT_EQ(tm.Backup(WorkerId(3), TaskId(e.task_id())).type(), proto::TASK_WAIT);
  // Training stopped early: no more.
  tm.StopTraining("test");
  EXPECT_TRUE(tm.BackupCandidates(WorkerId(3)).empty());
}

TEST(TaskManagerBackupTest, AnAttemptThatStopsOrIsLostLeavesTheTaskToTheOther) {
  TaskManager tm = TwoTasksOfFourMinibatches();
  const WorkerId first(1), second(2);
  proto::Task a = tm.Next(first);
  proto::Task b = tm.Next(second);
  tm.Report(second, Done(b));
  proto::Task backup = tm.Backup(second, TaskId(a.task_id()));
  ASSERT_EQ(backup.type(), proto::TASK_TRAINING);
  // The backup stops after two minibatches: the first attempt goes on,
  // knowing them; nothing goes back to the queue.
  ASSERT_TRUE(tm.Report(second, Stopped(backup, 2)));
  EXPECT_EQ(tm.queued(), 0u);
  EXPECT_EQ(tm.HeldBy(second), std::vector<TaskId>{});
  EXPECT_EQ(tm.HeldBy(first), std::vector<TaskId>{TaskId(a.task_id())});
  // Backed up again, the first attempt is lost: the backup goes on alone.
  backup = tm.Backup(second, TaskId(a.task_id()));
  ASSERT_EQ(backup.type(), proto::TASK_TRAINING);
  EXPECT_EQ(backup.minibatches_done(), 2);
  EXPECT_EQ(tm.RecoverWorker(first), 0);
  EXPECT_EQ(tm.queued(), 0u);
  EXPECT_FALSE(tm.Report(first, Done(a)));
  // Then the backup is lost too: the task goes back, progress kept.
  EXPECT_EQ(tm.RecoverWorker(second), 1);
  proto::Task again = tm.Next(WorkerId(3));
  EXPECT_EQ(again.task_id(), a.task_id());
  EXPECT_EQ(again.minibatches_done(), 2);
  EXPECT_GT(again.attempt(), backup.attempt());
  ASSERT_TRUE(tm.Report(WorkerId(3), Done(again)));
  EXPECT_TRUE(tm.training_finished());
  EXPECT_EQ(tm.records_done(), 80);
}

TEST(TaskManagerBackupTest, EitherAttemptsFailuresCount) {
  TaskManager tm = TwoTasksOfFourMinibatches(/*max_task_retries=*/1);
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  tm.Report(WorkerId(2), Done(b));
  proto::Task backup = tm.Backup(WorkerId(2), TaskId(a.task_id()));
  proto::ReportTaskRequest failed = Done(backup);
  failed.set_error("disk on fire");
  ASSERT_TRUE(tm.Report(WorkerId(2), failed));
  EXPECT_FALSE(tm.failure().has_value());
  EXPECT_EQ(tm.HeldBy(WorkerId(1)), std::vector<TaskId>{TaskId(a.task_id())});
  failed = Done(a);
  failed.set_error("disk on fire again");
  ASSERT_TRUE(tm.Report(WorkerId(1), failed));
  ASSERT_TRUE(tm.failure().has_value());
  EXPECT_NE(tm.failure()->find("failed 2 times; last error: disk on fire again"), std::string::npos)
      << *tm.failure();
}

TEST(TaskManagerBackupTest, BackupsSurviveTheLedger) {
  TaskManager tm = TwoTasksOfFourMinibatches();
  tm.TrackChanges();
  proto::Task a = tm.Next(WorkerId(1));
  proto::Task b = tm.Next(WorkerId(2));
  tm.Report(WorkerId(2), Done(b));
  proto::Task backup = tm.Backup(WorkerId(2), TaskId(a.task_id()));
  proto::LedgerChanges changes;
  tm.TakeChanges(&changes);
  bool journaled = false;
  for (const proto::JournalTask& jt : changes.tasks()) {
    if (jt.task().task_id() != a.task_id()) continue;
    journaled = jt.holder() == 1 && jt.holder_attempt() == a.attempt() && jt.backups_size() == 1 &&
                jt.backups(0).worker() == 2 && jt.backups(0).attempt() == backup.attempt();
  }
  EXPECT_TRUE(journaled) << changes.DebugString();

  const TaskManagerOptions options = FourMinibatches();
  StatusOr<TaskManager> restored =
      TaskManager::FromLedger(options, Ranges(2, 40), {}, {}, tm.ToLedger());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->Holders(), (std::vector<WorkerId>{WorkerId(1), WorkerId(2)}));
  // Each attempt is confirmed by its own heartbeat; the backup finishes.
  EXPECT_TRUE(restored->ReconcileWorker(WorkerId(1), TaskId(a.task_id()), a.attempt()));
  EXPECT_TRUE(restored->ReconcileWorker(WorkerId(2), TaskId(a.task_id()), backup.attempt()));
  std::vector<WorkerId> overtaken;
  ASSERT_TRUE(restored->Report(WorkerId(2), Done(backup), &overtaken));
  EXPECT_EQ(overtaken, std::vector<WorkerId>{WorkerId(1)});
  EXPECT_TRUE(restored->training_finished());

  // A backup held by the task's own holder, or at an attempt not handed
  // out, is a damaged ledger.
  proto::TaskLedger damaged = tm.ToLedger();
  for (proto::JournalTask& jt : *damaged.mutable_tasks()) {
    if (jt.backups_size() > 0) jt.mutable_backups(0)->set_worker(1);
  }
  StatusOr<TaskManager> refused = TaskManager::FromLedger(options, Ranges(2, 40), {}, {}, damaged);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  damaged = tm.ToLedger();
  for (proto::JournalTask& jt : *damaged.mutable_tasks()) {
    if (jt.backups_size() > 0) jt.mutable_backups(0)->set_attempt(backup.attempt() + 1);
  }
  StatusOr<TaskManager> unknown = TaskManager::FromLedger(options, Ranges(2, 40), {}, {}, damaged);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
}

}  // namespace
}  // namespace elasticdl::master
