// The master's ledger of work: which ranges of records are waiting, which
// worker holds which, how far each training task has got, and what has been
// learned from finished ones.
//
// Training ranges are shuffled per epoch; epoch e+1 is dealt once epoch e has
// no waiting task. Evaluation tasks go before training tasks, so evaluations
// finish promptly. Where a step takes a minibatch of every worker
// (`lockstep`), a range is held by one task at a time, and not while a
// worker may still train a task of it that a restored server revoked: the
// same records of two epochs do not train side by side.
//
// Hand-outs and progress. Every hand-out of a task increments its attempt;
// reports and heartbeats are accepted only from the worker holding the task
// at that attempt, so a worker that was taken as lost (or whose task was
// revoked) cannot count work twice. A training task of records [start, end)
// is cut into minibatches of `minibatch_size` records; workers tag their
// pushes (task, minibatch) and every parameter server applies a tag at most
// once and only in order. The ledger therefore keeps a lower bound of each
// task's progress (minibatches applied by every server): redoing a minibatch
// is harmless, and a task put back in the queue resumes after its known
// progress. Evaluation and prediction tasks have no partial progress: a task
// that does not finish is redone whole, and its metric states count only
// when it finishes, so every validation record counts once per evaluation.
//
// Backup attempts. Near the end of training (nothing left to hand out, no epoch
// to come), a worker with nothing to do may be handed a second attempt of a
// training task another worker holds (Backup; JobState decides which, from
// the workers' paces). Both work on it from its known progress; the servers'
// tags make whichever pushes a minibatch second a duplicate, so nothing is
// applied twice. The first report that finishes the task wins and the other
// attempt is dropped (its reports and heartbeats are refused from then on);
// a holder that stops, fails or is lost leaves the task to the other.
//
// Failures. A task whose worker reports an error goes back to the front of
// the queue until it has failed `max_task_retries` + 1 times, and then the
// whole job fails with a message naming the task and its last error —
// nothing is dropped silently. Lost workers, stopped workers and revoked
// tasks are not failures.
//
// Recovery. ToLedger() captures everything needed to go on after a master
// restart; FromLedger() rebuilds an equivalent TaskManager over the same
// data, which hands out the same remaining tasks in the same order.
//
// Not thread-safe: the master serializes calls.
#ifndef ELASTICDL_MASTER_TASK_MANAGER_H_
#define ELASTICDL_MASTER_TASK_MANAGER_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/metric_state.h"
#include "master/data_source.h"
#include "master/early_stopping.h"

namespace elasticdl::master {

// "training", "evaluation", "prediction" ("control" for the others).
const char* TaskTypeName(proto::TaskType type);
// "training task 3 (data.recordio records [250, 500))".
std::string DescribeTask(const proto::Task& task);

struct TaskManagerOptions {
  proto::JobType job_type = proto::JOB_TRAINING;
  // Training epochs over the training ranges.
  int64_t num_epochs = 1;
  // Seed of the per-epoch shuffle.
  uint64_t shuffle_seed = 0;
  // Failures a task may have before the job fails; worker losses, stops and
  // revocations do not count.
  int max_task_retries = 3;
  // Evaluate every this many model versions (0: only at the end of training).
  int64_t evaluation_steps = 0;
  // Evaluation and prediction jobs: the version of the model they use.
  int64_t model_version = 0;
  // Records per minibatch, as the workers cut training tasks: minibatch i of
  // a task covers records [start + i * minibatch_size,
  // min(start + (i + 1) * minibatch_size, end)). Progress of training tasks
  // is counted in these minibatches, so it must be the workers' value.
  // 0 (the default): a task is one minibatch (no partial progress).
  int64_t minibatch_size = 0;
  // Training stops once a report says the model reached this version (0:
  // no limit). The parameter servers stop there; see StopTraining.
  int64_t max_steps = 0;
  // Training stops when a metric of the evaluations during training stops
  // improving (patience 0: never).
  proto::EarlyStopping early_stopping;
  // A step of the model takes a minibatch of every training worker
  // (synchronous parameter servers, AllReduce): no training task goes out
  // while another task of the same records may still train (FirstReady).
  bool lockstep = false;
};

// A task at the attempt a worker holds it.
struct TaskAttempt {
  TaskId task;
  int32_t attempt = 0;
};

// One finished evaluation.
struct Evaluation {
  int64_t model_version = 0;
  std::map<std::string, double> metrics;
};

class TaskManager {
 public:
  TaskManager(TaskManagerOptions options, std::vector<Range> training,
              std::vector<Range> validation, const std::vector<Range>& prediction);

  // Rebuilds the TaskManager whose ToLedger() gave `ledger`, over the same
  // options and ranges. FAILED_PRECONDITION when the ledger does not match
  // them (the data changed since, or other options), INVALID_ARGUMENT when it
  // contradicts itself; the message names the offending task.
  //
  // Held tasks stay held by their workers at their attempts, marked as
  // restored: see ReconcileWorker(). A worker that never comes back must be
  // given to RecoverWorker() (Holders() lists the workers holding tasks).
  // Training time goes on from the ledger's training_seconds.
  static StatusOr<TaskManager> FromLedger(TaskManagerOptions options, std::vector<Range> training,
                                          std::vector<Range> validation,
                                          const std::vector<Range>& prediction,
                                          const proto::TaskLedger& ledger);
  // The whole state, for the master's journal.
  proto::TaskLedger ToLedger() const;
  // The journal's records (master/journal.h) after the first: once
  // TrackChanges() is called, every change is noted, and TakeChanges()
  // gives (and forgets) what changed since the last TakeLedger() or
  // TakeChanges(), in proportion to the changes, not to the state.
  // JournalFold folds them into the ledger taken before.
  void TrackChanges();
  // ToLedger(), and what changed until now is taken as written.
  proto::TaskLedger TakeLedger();
  void TakeChanges(proto::LedgerChanges* changes);

  // How many workers the job runs (its target; 1 by default). An epoch's
  // last ranges, as many as twice this, are not dealt among the first of
  // the next epoch (DealNextEpoch), so that in lockstep workers starting the
  // next epoch do not wait for the records workers finishing this one still
  // train.
  void set_parallelism(int workers) { parallelism_ = static_cast<size_t>(std::max(workers, 1)); }

  // The next task for `worker`: a real task, TASK_WAIT (nothing now, ask
  // again), or TASK_NONE (the job is over). A real task carries its attempt
  // (1 on its first hand-out; > 1: handed out before) and, for training, the
  // minibatches known to be done, which the worker skips. `ahead`: handed
  // out ahead of the end of the worker's current task; heartbeats leave it
  // held until one names it (one sent before the worker saw it may arrive
  // after), and the worker's next call for a task takes it back if the
  // worker never did.
  proto::Task Next(WorkerId worker, bool ahead = false);

  // Backups: the held training tasks an idle `worker` could back up, when
  // training is in its last stretch (no training task to hand out and no
  // epoch to deal, training not stopped): each held by one other worker,
  // with a minibatch or more not known applied. Even the last one is worth
  // a second attempt: the backing worker has nothing else to do, and a
  // holder stuck on it (its pushes refused as too stale while the others
  // train) may hold up the end of training for as long as they ran. Empty
  // otherwise.
  struct BackupCandidate {
    TaskId task;
    WorkerId holder;
    int64_t minibatches_done = 0;  // known progress
    int64_t minibatches_left = 0;
  };
  std::vector<BackupCandidate> BackupCandidates(WorkerId worker) const;
  // Hands `worker` a backup attempt of `task`, one of BackupCandidates(worker):
  // a new attempt from the task's known progress. TASK_WAIT if it is not one.
  proto::Task Backup(WorkerId worker, TaskId task);

  // A worker's report on a task it holds at `report.attempt()`. Reports on
  // tasks it does not hold at that attempt (stale or invented) change
  // nothing and return FALSE. A report that finishes a task held by others
  // too (backups) drops their attempts; `overtaken`, when given, receives
  // their workers.
  //  - error set: a failure; the task goes back to the front of its queue
  //    with its progress (unless another attempt goes on), or the job fails
  //    after max_task_retries.
  //  - stopped: not a failure. A training task whose known progress (the
  //    larger of the ledger's and the report's minibatches_done) covers all
  //    its minibatches is finished; otherwise the rest goes back to the
  //    front of the queue (unless another attempt goes on). An evaluation or
  //    prediction task is redone whole.
  //  - otherwise the task is finished: its records count as done, an
  //    evaluation task's metric states are merged.
  bool Report(WorkerId worker, const proto::ReportTaskRequest& report,
              std::vector<WorkerId>* overtaken = nullptr);

  // A heartbeat's progress: `worker` is at `minibatches_done` of `task`,
  // which it holds at `attempt`. Raises the task's known progress (never
  // lowers it). FALSE, changing nothing, when the worker does not hold the
  // task at that attempt.
  bool Progress(WorkerId worker, TaskId task, int32_t attempt, int64_t minibatches_done);

  // A heartbeat says `worker` works on `current_task` at `attempt` (-1:
  // none), and holds `next` (handed to it ahead, not begun), if any; a
  // worker works on one task at a time. Tasks held by `worker` that it no
  // longer works on go back to the front of their queue with their known
  // progress: all the others when it works on one it holds (say a hand-out
  // whose reply was lost), else only those restored from the ledger (see
  // FromLedger) — a task handed out since may cross the heartbeat, as may
  // one asked for ahead (`next` with task -1: its answer not seen yet).
  // `reporting`, a task the worker has finished and whose report is on its
  // way, stays held until that report comes.
  // Returns whether `current_task` is held by `worker` at `attempt`.
  // Cheap; meant for every heartbeat.
  bool ReconcileWorker(WorkerId worker, TaskId current_task, int32_t attempt,
                       std::optional<TaskAttempt> next = std::nullopt,
                       std::optional<TaskAttempt> reporting = std::nullopt);

  // Puts every task `worker` holds back at the front of the queue with its
  // known progress, but `keep` (when the worker holds it at that attempt)
  // and those another attempt goes on with. Returns how many went back.
  int RecoverWorker(WorkerId worker, std::optional<TaskAttempt> keep = std::nullopt);

  // A parameter server restored from a checkpoint holds, of each training
  // task, only the first `applied[task]` minibatches (absent: none). Every
  // training task counted further than that is set back to it: a finished
  // one is reopened (its records no longer count as done) and goes to the
  // front of the training queue; a queued one just resumes earlier. Every
  // held training task is revoked (back to the front, at most at
  // `applied[task]`; its holder's later reports and heartbeats are refused):
  // its holder may be ahead of the ledger and would otherwise quote progress
  // the restored server lost. A revoked holder may train on until it hears
  // so, and the servers take its minibatches where they follow what they
  // have: in lockstep, no other task of the same records goes out until it
  // reports the task, asks for a task keeping none, or is lost
  // (RecoverWorker). Evaluation and prediction tasks are not touched.
  // Returns how many tasks were reopened or revoked.
  //
  // The server should register (and this be called) before it serves
  // pushes, so that no report counts work it lost.
  int PsRestored(const std::vector<proto::TaskProgress>& applied);

  // The tasks `worker` holds, by id (backups included).
  std::vector<TaskId> HeldBy(WorkerId worker) const;
  // The same, each as DescribeTask says it, joined by ", "; empty if none.
  std::string DescribeHeldBy(WorkerId worker) const;
  // The workers holding tasks.
  std::vector<WorkerId> Holders() const;
  // How many minibatches `task` has (1 for evaluation and prediction).
  int64_t NumMinibatches(const proto::Task& task) const;

  // Tasks waiting in the queues (of the epoch being dealt) and tasks held
  // by workers.
  size_t queued() const { return training_queue_.size() + other_queue_.size(); }
  size_t held() const { return held_.size(); }

  // Ends training before its epochs: no training task is handed out any
  // more; held ones may still report (their work counts), and the ones
  // waiting, with what they trained before, stay in the ledger untrained.
  // The final evaluation follows as after the last epoch. The first reason
  // wins. Done by Report itself when the model reaches max_steps or early
  // stopping runs out of patience.
  void StopTraining(const std::string& reason);
  // Why training stopped early; empty while it goes on or when it ran its
  // epochs.
  const std::string& stop_reason() const { return stop_reason_; }

  bool finished() const;
  // Every training task of every epoch has finished (always true for
  // evaluation and prediction jobs); never once a training task has failed
  // more often than max_task_retries. A parameter server's restore may make
  // it false again.
  bool training_finished() const { return TrainingFinished(); }
  // Set once the job has failed; the job is then finished.
  const std::optional<std::string>& failure() const { return failure_; }

  int64_t epoch() const { return epoch_; }
  int64_t num_epochs() const { return options_.num_epochs; }
  // Records of finished tasks; once training has stopped early, plus the
  // minibatches that stopped tasks trained.
  int64_t records_done() const;
  int64_t records_total() const { return records_total_; }
  int64_t model_version() const { return model_version_; }
  // The model has reached `version`, which no report said.
  void NoteModelVersion(int64_t version) { model_version_ = std::max(model_version_, version); }
  // Mean loss of the most recent training task.
  double recent_loss() const { return recent_loss_; }
  // Seconds from the first training task handed out to the last one
  // finished (so far), including the time before a master restart.
  double training_seconds() const;
  const std::vector<Evaluation>& evaluations() const { return evaluations_; }
  // Prediction jobs: every range in input order with the task that covered it.
  const std::vector<std::pair<Range, TaskId>>& prediction_tasks() const {
    return prediction_tasks_;
  }

  // The records `task` covers.
  static Range RangeOf(const proto::Task& task);

 private:
  struct Entry {
    proto::Task task;
    int failures = 0;
    // Queued: its place in the queue (lower is nearer the front), which the
    // journal's changes record.
    int64_t order = 0;
  };
  // A worker working on a held task, at its own attempt.
  struct Holder {
    WorkerId worker;
    int32_t attempt = 0;
    // Restored from a ledger and not yet confirmed by a heartbeat.
    bool restored = false;
    // Handed out ahead (Next) and not yet named by a heartbeat.
    bool ahead = false;
  };
  // A held task: the entry's attempt is the latest handed out; holders in
  // the order they were handed it (more than one: backups).
  struct Held {
    Entry entry;
    std::vector<Holder> holders;
    bool HeldBy(WorkerId worker) const;
  };
  struct Empty {};

  // Sets up options, ranges and totals, with no task.
  TaskManager(TaskManagerOptions options, std::vector<Range> training,
              std::vector<Range> validation, const std::vector<Range>& prediction, Empty);

  static TaskId IdOf(const proto::Task& task) { return TaskId(task.task_id()); }
  TaskId Add(proto::TaskType type, const Range& range, int64_t model_version,
             std::deque<Entry>* queue);
  void DealNextEpoch();
  // Where in `queue` the first task is that may go out now (its size if
  // none). In lockstep, a training task waits while a task of the same
  // records is held or may still train after a restore revoked it
  // (revoked_), so that the same records never train side by side, e.g. a
  // range of one epoch reopened by a restored server beside the same range
  // of the next: both in one step would be one step over duplicates, not a
  // step of each epoch. Work behind it goes first; the rest keeps its order.
  size_t FirstReady(const std::deque<Entry>& queue) const;
  // Every task is held through Hold and stops being held through Release,
  // which returns it; `*it` then points to the next held task.
  Held& Hold(Entry entry, std::vector<Holder> holders);
  Entry Release(std::map<TaskId, Held>::iterator* it);
  void MaybeStartEvaluation();
  void StartEvaluation(int64_t model_version);
  bool TrainingFinished() const;
  // Stops training when a limit is reached (max_steps, early stopping).
  void MaybeStopTraining();
  // Backups: nothing is left to hand out before training ends.
  bool LastStretch() const;
  // The minibatches `worker` would back up of `held` (held by one other
  // worker, one or more left); nullopt if it may not.
  std::optional<int64_t> BackupLeft(const Held& held, WorkerId worker) const;
  // The held task `id` if `worker` holds it at `attempt`, and that holder.
  Held* FindHeld(WorkerId worker, TaskId id, int32_t attempt, Holder** holder = nullptr);
  // `worker` no longer works on the held task `it` (it must hold it); a task
  // nobody holds any more goes back to the front of its queue. Returns
  // whether it went back; `it` points to the next held task either way.
  bool DropHolder(std::map<TaskId, Held>::iterator* it, WorkerId worker);
  // Puts a task back at the front of its queue; evaluation and prediction
  // tasks start over.
  void Requeue(Entry entry);
  // Every change to the queues, the held and the finished tasks goes
  // through these, which note it for TakeChanges().
  void PushBack(std::deque<Entry>* queue, Entry entry);
  void PushFront(std::deque<Entry>* queue, Entry entry);
  void NoteQueued(const Entry& entry, bool training);
  void NoteHeld(const Held& held);
  // `id` is no longer queued or held (until noted again).
  void NoteGone(TaskId id);
  void NoteFinished(const proto::Task& task);
  void NoteUnfinished(TaskId id);
  // ToLedger()'s fields but the tasks, the shuffle's state, the evaluations
  // and the prediction task ids.
  void ScalarsTo(proto::TaskLedger* ledger) const;
  // The journal's view of a queued task (holder -1, with its place) or a held one.
  static proto::JournalTask ToJournal(const Entry& entry, std::optional<WorkerId> holder,
                                      bool training);
  static proto::JournalTask ToJournal(const Held& held);
  // Evaluations from the `from`th on.
  void AddEvaluations(size_t from,
                      google::protobuf::RepeatedPtrField<proto::JournalEvaluation>* to) const;
  // What changed until now counts as taken.
  void ForgetChanges();
  std::string RngState() const;
  void FinishTask(Entry entry, const proto::ReportTaskRequest& report);
  void FinishEvaluationTask(const proto::Task& task, const proto::ReportTaskRequest& report);
  // Counts a failure of the task; once it has failed too often the job
  // fails (returns true).
  bool CountFailure(Entry* entry, const std::string& error);
  void TaskFailed(Entry entry, const std::string& error);

  // Ledger loading (task_ledger.cc).
  Status LoadLedger(const proto::TaskLedger& ledger);
  Status LoadTask(const proto::JournalTask& journal_task);
  // The queues' places, and the next ones, after loading.
  void LoadOrders();
  Status CheckTask(const proto::Task& task) const;
  Status CheckEpochs() const;
  Status LoadEvaluation(const proto::TaskLedger& ledger);
  Status LoadPrediction(const proto::TaskLedger& ledger);
  Status LoadCounters(const proto::TaskLedger& ledger);

  const TaskManagerOptions options_;
  const std::vector<Range> training_;
  const std::vector<Range> validation_;
  std::mt19937_64 rng_;

  TaskId next_id_;
  std::deque<Entry> training_queue_;
  std::deque<Entry> other_queue_;  // evaluation and prediction
  std::map<TaskId, Held> held_;
  // The ranges of the held training tasks, which FirstReady passes over.
  // Hold and Release keep it with held_.
  std::multiset<Range> held_ranges_;
  // In lockstep, the training tasks PsRestored revoked, and their records,
  // by the worker that held them, until it is known to have stopped:
  // FirstReady passes over these records too. Not in the ledger: a
  // restarted master forgets them (as it does the workers' progress since
  // its last journal write).
  std::multimap<WorkerId, std::pair<TaskId, Range>> revoked_;
  size_t parallelism_ = 1;
  // Finished training tasks, kept so that a parameter server's restore can
  // reopen them.
  std::map<TaskId, proto::Task> finished_training_;
  int64_t epoch_ = -1;

  int64_t records_done_ = 0;
  int64_t records_total_ = 0;
  int64_t model_version_ = 0;
  double recent_loss_ = 0;
  // Training time before a master restart.
  double training_seconds_before_ = 0;
  std::optional<std::chrono::steady_clock::time_point> training_started_;
  std::chrono::steady_clock::time_point training_last_done_{};

  // The evaluation in progress: its version, tasks left and merged states.
  bool evaluating_ = false;
  int64_t evaluation_version_ = 0;
  int evaluation_tasks_left_ = 0;
  MetricStates evaluation_states_;
  int64_t next_evaluation_version_ = 0;
  bool final_evaluation_started_ = false;
  std::vector<Evaluation> evaluations_;

  std::vector<std::pair<Range, TaskId>> prediction_tasks_;
  std::optional<std::string> failure_;
  // A training task failed past max_task_retries (failure_ says which).
  bool training_given_up_ = false;
  EarlyStopping early_stopping_;
  std::string stop_reason_;

  // Places for the next task pushed to a queue's front and back.
  int64_t next_front_ = -1;
  int64_t next_back_ = 0;
  // Changes not taken yet (TakeChanges), by task: as it is now, or nullopt
  // for a task no longer queued or held (a finished one no longer finished).
  bool track_changes_ = false;
  std::map<TaskId, std::optional<proto::JournalTask>> changed_tasks_;
  std::map<TaskId, std::optional<proto::Task>> changed_finished_;
  bool rng_changed_ = false;
  size_t evaluations_taken_ = 0;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_TASK_MANAGER_H_
