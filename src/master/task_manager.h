// The master's ledger of work: which ranges of records are waiting, which
// worker holds which, and what has been learned from finished ones.
//
// Training ranges are shuffled per epoch; epoch e+1 is dealt once epoch e has
// no waiting task. Evaluation tasks go before training tasks, so evaluations
// finish promptly. A task's report is accepted only from the worker that
// holds it; a failed task goes back to the front of the queue until it has
// failed `max_task_retries` + 1 times, and then the whole job fails with a
// message naming the task and its last error — nothing is dropped silently.
//
// Not thread-safe: the master serializes calls.
#ifndef ELASTICDL_MASTER_TASK_MANAGER_H_
#define ELASTICDL_MASTER_TASK_MANAGER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/zoo/metric_state.h"
#include "master/data_source.h"

namespace elasticdl::master {

using WorkerId = int32_t;
using TaskId = int64_t;

struct TaskManagerOptions {
  proto::JobType job_type = proto::JOB_TRAINING;
  // Training epochs over the training ranges.
  int64_t num_epochs = 1;
  // Seed of the per-epoch shuffle.
  uint64_t shuffle_seed = 0;
  // Failures a task may have before the job fails; worker losses do not
  // count.
  int max_task_retries = 3;
  // Evaluate every this many model versions (0: only at the end of training).
  int64_t evaluation_steps = 0;
  // Evaluation jobs: the version of the model evaluated.
  int64_t model_version = 0;
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

  // The next task for `worker`: a real task, TASK_WAIT (nothing now, ask
  // again), or TASK_NONE (the job is over).
  proto::Task Next(WorkerId worker);

  // A worker's report on a task it holds. Reports on tasks it does not hold
  // (stale or invented) are ignored and FALSE is returned.
  bool Report(WorkerId worker, const proto::ReportTaskRequest& report);

  // Puts every task `worker` holds back at the front of the queue.
  // Returns how many.
  int RecoverWorker(WorkerId worker);

  bool finished() const;
  // Set once the job has failed; the job is then finished.
  const std::optional<std::string>& failure() const { return failure_; }

  int64_t epoch() const { return epoch_; }
  int64_t num_epochs() const { return options_.num_epochs; }
  int64_t records_done() const { return records_done_; }
  int64_t records_total() const { return records_total_; }
  int64_t model_version() const { return model_version_; }
  // Mean loss of the most recent training task.
  double recent_loss() const { return recent_loss_; }
  // Seconds from the first training task handed out to the last one
  // finished (so far).
  double training_seconds() const;
  const std::vector<Evaluation>& evaluations() const { return evaluations_; }
  // Prediction jobs: every range in input order with the task that covered it.
  const std::vector<std::pair<Range, TaskId>>& prediction_tasks() const {
    return prediction_tasks_;
  }

 private:
  struct Entry {
    proto::Task task;
    int failures = 0;
  };
  struct Held {
    Entry entry;
    WorkerId worker = 0;
  };

  TaskId Add(proto::TaskType type, const Range& range, int64_t model_version,
             std::deque<Entry>* queue);
  void DealNextEpoch();
  void MaybeStartEvaluation();
  void StartEvaluation(int64_t model_version);
  bool TrainingFinished() const;
  void FinishTask(const Held& held, const proto::ReportTaskRequest& report);

  const TaskManagerOptions options_;
  const std::vector<Range> training_;
  const std::vector<Range> validation_;
  std::mt19937_64 rng_;

  TaskId next_id_ = 0;
  std::deque<Entry> training_queue_;
  std::deque<Entry> other_queue_;  // evaluation and prediction
  std::map<TaskId, Held> held_;
  int64_t epoch_ = -1;

  int64_t records_done_ = 0;
  int64_t records_total_ = 0;
  int64_t model_version_ = 0;
  double recent_loss_ = 0;
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
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_TASK_MANAGER_H_
