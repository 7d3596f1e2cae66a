// A training job with evaluations under random faults — lost workers (some
// of which go on as zombies), preempted workers, failing tasks, lost
// replies, late heartbeats, parameter servers restored from older checkpoints, master
// restarts — against a model of the parameter servers' tagged pushes: a
// server applies minibatch i of task T only right after minibatch i - 1 and
// at most once. At the end every minibatch of every task of every epoch must
// have been applied by every server, and each evaluation must have counted
// every validation task once.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master/journal.h"
#include "master/task_manager.h"

namespace elasticdl::master {
namespace {

constexpr int kNumPs = 2;
constexpr int kNumEpochs = 3;
constexpr int kLiveWorkers = 3;

struct SimPs {
  std::map<int64_t, int64_t> applied;
  std::map<int64_t, int64_t> checkpoint;

  enum Result { kApplied, kDuplicate, kOutOfOrder };
  Result Push(int64_t task, int64_t minibatch) {
    int64_t& a = applied[task];
    if (minibatch < a) return kDuplicate;
    if (minibatch > a) return kOutOfOrder;
    ++a;
    return kApplied;
  }
};

struct SimWorker {
  int32_t id = 0;  // ids as the wire carries them
  // Taken as lost by the master; a zombie goes on until its task ends.
  bool lost = false;
  std::optional<proto::Task> task;
  int64_t next = 0;  // next minibatch to push
  int64_t done = 0;  // minibatches acknowledged by every server
  // A server was restored since the task was received: out-of-order pushes
  // are expected.
  bool saw_restore = false;
  // The master does not know that the worker may still train its task: a
  // restore revoked it and the master restarted since, or a late heartbeat
  // named another task.
  bool forgotten = false;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed) : rng_(seed) {
    options_.num_epochs = kNumEpochs;
    options_.minibatch_size = 10;
    options_.evaluation_steps = 40;
    options_.max_task_retries = 1000;
    options_.shuffle_seed = seed;
    options_.lockstep = true;
    training_ = {{"a", 0, 25},  {"a", 25, 65}, {"a", 65, 78}, {"b", 0, 40},
                 {"b", 40, 47}, {"b", 47, 87}, {"c", 0, 31}};
    validation_ = {{"v", 0, 10}, {"v", 10, 30}, {"v", 30, 70}};
    tm_ = std::make_unique<TaskManager>(options_, training_, validation_, std::vector<Range>{});
    StartJournal();
    for (int i = 0; i < kLiveWorkers; ++i) AddWorker();
  }

  int restores() const { return restores_; }
  int restarts() const { return restarts_; }

  void Run() {
    for (int step = 0; step < 200000 && !tm_->finished(); ++step) {
      GlobalEvents();
      if (Chance(0.1)) CheckJournal();
      if (HasFailure()) return;
      std::uniform_int_distribution<size_t> pick(0, workers_.size() - 1);
      Act(pick(rng_));
    }
    CheckJournal();
    Check();
  }

 private:
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  static bool HasFailure() { return ::testing::Test::HasFailure(); }

  void AddWorker() {
    SimWorker w;
    w.id = next_worker_++;
    workers_.push_back(w);
  }

  void GlobalEvents() {
    if (Chance(0.02)) {
      SimPs& ps = ps_[Pick(kNumPs)];
      ps.checkpoint = ps.applied;
    }
    if (Chance(0.03)) {
      SimPs& ps = ps_[Pick(kNumPs)];
      ps.applied = ps.checkpoint;
      std::vector<proto::TaskProgress> applied;
      for (const auto& [id, n] : ps.applied) {
        applied.emplace_back().set_task_id(id);
        applied.back().set_minibatches(n);
      }
      tm_->PsRestored(applied);
      for (SimWorker& w : workers_) w.saw_restore = true;
      ++restores_;
    }
    if (Chance(0.005)) RestartMaster();
    if (!late_.empty() && Chance(0.1)) {
      size_t i = Pick(late_.size());
      const std::vector<TaskId> held = tm_->HeldBy(WorkerId(late_[i].worker));
      Deliver(late_[i]);
      Forget(late_[i].worker, held);
      late_.erase(late_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  // The journal's view: the ledger when the manager was made, then the
  // changes it noted, folded as a restarted master reads them.
  void StartJournal() {
    tm_->TrackChanges();
    proto::MasterJournal snapshot;
    *snapshot.mutable_ledger() = tm_->TakeLedger();
    journal_.emplace(std::move(snapshot));
  }

  // The changes since the last call, folded into the journal's view, give
  // the manager's ledger.
  void CheckJournal() {
    proto::JournalChanges changes;
    tm_->TakeChanges(changes.mutable_ledger());
    journal_->Apply(std::move(changes));
    std::string differences;
    google::protobuf::util::MessageDifferencer diff;
    diff.ReportDifferencesToString(&differences);
    EXPECT_TRUE(diff.Compare(journal_->Result().ledger(), tm_->ToLedger())) << differences;
  }

  // A new master from the journal.
  void RestartMaster() {
    CheckJournal();
    proto::TaskLedger ledger = journal_->Result().ledger();
    auto restored = TaskManager::FromLedger(options_, training_, validation_, {}, ledger);
    ASSERT_TRUE(restored.ok()) << restored.status();
    std::string differences;
    google::protobuf::util::MessageDifferencer diff;
    diff.ReportDifferencesToString(&differences);
    EXPECT_TRUE(diff.Compare(restored->ToLedger(), ledger)) << differences;
    tm_ = std::make_unique<TaskManager>(std::move(restored).value());
    for (SimWorker& w : workers_) w.forgotten = w.forgotten || w.saw_restore;
    StartJournal();
    ++restarts_;
  }

  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void Leave(size_t index, bool zombie) {
    if (zombie) {
      workers_[index].lost = true;
    } else {
      workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(index));
    }
    AddWorker();
  }

  void Act(size_t index) {
    SimWorker& w = workers_[index];
    if (!w.task) {
      if (w.lost) {
        workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(index));
        return;
      }
      // Idle: heartbeat, then ask for work.
      EXPECT_FALSE(tm_->ReconcileWorker(WorkerId(w.id), TaskId(-1), 0));
      proto::Task t = tm_->Next(WorkerId(w.id));
      if (t.type() != proto::TASK_TRAINING && t.type() != proto::TASK_EVALUATION) return;
      if (t.type() == proto::TASK_TRAINING) CheckRangesHeldOnce(w.id, t);
      if (Chance(0.02)) {  // the reply is lost, perhaps with the master
        if (Chance(0.5)) RestartMaster();
        return;
      }
      w.task = t;
      w.next = w.done = t.minibatches_done();
      w.saw_restore = w.forgotten = false;
      return;
    }
    int r = static_cast<int>(Pick(100));
    if (r < 3) {  // preempted: report what is done and leave
      Report(w, Request(w, /*stopped=*/true));
      tm_->RecoverWorker(WorkerId(w.id));  // its exit is noticed
      Leave(index, false);
    } else if (r < 6) {  // lost, perhaps still running
      tm_->RecoverWorker(WorkerId(w.id));
      Leave(index, Chance(0.5));
    } else if (r < 8) {
      proto::ReportTaskRequest req = Request(w, false);
      req.set_error("flaky disk");
      Report(w, req);
    } else if (r < 10) {  // stopped (scale-down of a thread, say); stays
      Report(w, Request(w, /*stopped=*/true));
    } else if (r < 20) {
      Heartbeat beat{w.id, w.task->task_id(), w.task->attempt(), w.done};
      if (Chance(0.5)) {  // delivered late, perhaps after a later hand-out
        late_.push_back(beat);
      } else if (Deliver(beat) && w.lost) {
        ADD_FAILURE() << "a lost worker's heartbeat counted";
      }
    } else if (w.task->type() == proto::TASK_EVALUATION) {
      proto::ReportTaskRequest req = Request(w, false);
      proto::MetricState* m = req.add_metrics();
      m->set_name("tasks_per_record");
      m->add_values(1);
      m->add_values(static_cast<double>(w.task->end() - w.task->start()));
      Report(w, req);
    } else {
      Push(w);
    }
  }

  // A stale heartbeat of `worker` named another task than the one it works
  // on, which the master held as the worker's (`held`): it may have taken
  // it back.
  void Forget(int32_t worker, const std::vector<TaskId>& held) {
    std::vector<TaskId> now = tm_->HeldBy(WorkerId(worker));
    for (SimWorker& w : workers_) {
      if (w.id != worker || !w.task) continue;
      const TaskId task(w.task->task_id());
      w.forgotten = w.forgotten || (std::find(held.begin(), held.end(), task) != held.end() &&
                                    std::find(now.begin(), now.end(), task) == now.end());
    }
  }

  // No two held training tasks (of different epochs) train the same records,
  // nor does `handed`, just handed to `worker`, train those of a task a
  // worker may still train after a restore revoked it.
  void CheckRangesHeldOnce(int32_t worker, const proto::Task& handed) {
    for (const SimWorker& other : workers_) {
      if (other.id == worker || other.lost || other.forgotten || !other.task) continue;
      const proto::Task& t = *other.task;
      EXPECT_FALSE(t.type() == proto::TASK_TRAINING && t.task_id() != handed.task_id() &&
                   TaskManager::RangeOf(t) == TaskManager::RangeOf(handed))
          << "task " << handed.task_id() << " of epoch " << handed.epoch()
          << " handed out while worker " << other.id << " trains task " << t.task_id()
          << " of epoch " << t.epoch() << " over the same records";
    }
    std::set<Range> held;
    const proto::TaskLedger ledger = tm_->ToLedger();
    for (const proto::JournalTask& j : ledger.tasks()) {
      const proto::Task& t = j.task();
      if (j.holder() < 0 || t.type() != proto::TASK_TRAINING) continue;
      EXPECT_TRUE(held.insert(TaskManager::RangeOf(t)).second)
          << "records [" << t.start() << ", " << t.end() << ") of " << t.file()
          << " held twice, the second time by task " << t.task_id() << " of epoch " << t.epoch();
    }
  }

  struct Heartbeat {
    int32_t worker;
    int64_t task;
    int32_t attempt;
    int64_t minibatches_done;
  };

  // Whether the worker holds the task at that attempt.
  bool Deliver(const Heartbeat& b) {
    bool held = tm_->Progress(WorkerId(b.worker), TaskId(b.task), b.attempt, b.minibatches_done);
    return tm_->ReconcileWorker(WorkerId(b.worker), TaskId(b.task), b.attempt) && held;
  }

  void Push(SimWorker& w) {
    if (w.next >= tm_->NumMinibatches(*w.task)) {  // handed out with nothing left
      Report(w, Request(w, false));
      return;
    }
    bool out_of_order = false;
    for (SimPs& ps : ps_) {
      if (ps.Push(w.task->task_id(), w.next) == SimPs::kOutOfOrder) out_of_order = true;
    }
    if (out_of_order) {
      // Only a restored server can be behind what a task was handed out at.
      EXPECT_TRUE(w.saw_restore) << "task " << w.task->task_id() << " minibatch " << w.next;
      Report(w, Request(w, /*stopped=*/true));
      return;
    }
    ++model_version_;
    w.done = ++w.next;
    if (w.next == tm_->NumMinibatches(*w.task)) Report(w, Request(w, false));
  }

  proto::ReportTaskRequest Request(const SimWorker& w, bool stopped) const {
    proto::ReportTaskRequest r;
    r.set_worker_id(w.id);
    r.set_task_id(w.task->task_id());
    r.set_attempt(w.task->attempt());
    r.set_stopped(stopped);
    r.set_minibatches_done(w.done);
    r.set_model_version(model_version_);
    r.set_minibatches(1);
    r.set_loss_sum(0.5);
    return r;
  }

  void Report(SimWorker& w, const proto::ReportTaskRequest& r) {
    bool accepted = tm_->Report(WorkerId(w.id), r);
    if (w.lost) {
      EXPECT_FALSE(accepted) << "a lost worker's report counted";
    }
    w.task.reset();
  }

  void Check() {
    ASSERT_TRUE(tm_->finished()) << "not finished; records " << tm_->records_done();
    ASSERT_FALSE(tm_->failure().has_value()) << *tm_->failure();
    EXPECT_EQ(tm_->records_done(), tm_->records_total());
    proto::TaskLedger ledger = tm_->ToLedger();
    EXPECT_EQ(ledger.tasks_size(), 0);

    // Each range once per epoch, every minibatch applied by every server.
    std::map<std::tuple<int64_t, std::string, int64_t>, int> covered;
    std::set<int64_t> finished;
    int64_t minibatches = 0;
    for (const proto::Task& t : ledger.finished_training()) {
      ++covered[{t.epoch(), t.file(), t.start()}];
      finished.insert(t.task_id());
      minibatches += tm_->NumMinibatches(t);
      for (const SimPs& ps : ps_) {
        auto it = ps.applied.find(t.task_id());
        ASSERT_TRUE(it != ps.applied.end()) << "task " << t.task_id();
        EXPECT_EQ(it->second, tm_->NumMinibatches(t)) << "task " << t.task_id();
      }
    }
    EXPECT_EQ(covered.size(), kNumEpochs * training_.size());
    for (const auto& [key, n] : covered) EXPECT_EQ(n, 1);
    for (const SimPs& ps : ps_) {
      int64_t applied = 0;
      for (const auto& [id, n] : ps.applied) {
        if (n > 0) {
          EXPECT_EQ(finished.count(id), 1u) << "task " << id;
        }
        applied += n;
      }
      EXPECT_EQ(applied, minibatches);
    }
    ASSERT_FALSE(tm_->evaluations().empty());
    for (const Evaluation& ev : tm_->evaluations()) {
      EXPECT_DOUBLE_EQ(ev.metrics.at("tasks_per_record"), 3.0 / 70) << ev.model_version;
    }
  }

  std::mt19937_64 rng_;
  TaskManagerOptions options_;
  std::vector<Range> training_;
  std::vector<Range> validation_;
  std::unique_ptr<TaskManager> tm_;
  std::optional<JournalFold> journal_;
  SimPs ps_[kNumPs];
  std::vector<SimWorker> workers_;
  std::vector<Heartbeat> late_;
  int32_t next_worker_ = 0;
  int64_t model_version_ = 0;
  int restores_ = 0;
  int restarts_ = 0;
};

TEST(TaskSimulationTest, EveryMinibatchOncePerEpochUnderFaults) {
  int restores = 0;
  int restarts = 0;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Simulation sim(seed);
    sim.Run();
    restores += sim.restores();
    restarts += sim.restarts();
    if (HasFailure()) return;
  }
  // The faults did happen.
  EXPECT_GT(restores, 10);
  EXPECT_GT(restarts, 10);
}

}  // namespace
}  // namespace elasticdl::master
