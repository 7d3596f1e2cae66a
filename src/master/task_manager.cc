#include "master/task_manager.h"

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace elasticdl::master {
namespace {

const char* TaskTypeName(proto::TaskType type) {
  switch (type) {
    case proto::TASK_TRAINING:
      return "training";
    case proto::TASK_EVALUATION:
      return "evaluation";
    case proto::TASK_PREDICTION:
      return "prediction";
    default:
      return "control";
  }
}

MetricState FromProto(const proto::MetricState& m) {
  MetricState s;
  s.kind = m.kind() == proto::METRIC_AUC ? MetricKind::kAuc : MetricKind::kMean;
  s.values.assign(m.values().begin(), m.values().end());
  return s;
}

}  // namespace

TaskManager::TaskManager(TaskManagerOptions options, std::vector<Range> training,
                         std::vector<Range> validation, const std::vector<Range>& prediction)
    : options_(options),
      training_(std::move(training)),
      validation_(std::move(validation)),
      rng_(options.shuffle_seed) {
  next_evaluation_version_ = options_.evaluation_steps;
  switch (options_.job_type) {
    case proto::JOB_TRAINING:
      for (const Range& r : training_) records_total_ += r.end - r.start;
      records_total_ *= options_.num_epochs;
      if (options_.num_epochs > 0) DealNextEpoch();
      break;
    case proto::JOB_EVALUATION:
      for (const Range& r : validation_) records_total_ += r.end - r.start;
      model_version_ = options_.model_version;
      StartEvaluation(options_.model_version);
      final_evaluation_started_ = true;
      break;
    case proto::JOB_PREDICTION:
      for (const Range& r : prediction) {
        records_total_ += r.end - r.start;
        prediction_tasks_.emplace_back(r, Add(proto::TASK_PREDICTION, r, 0, &other_queue_));
      }
      break;
    default:
      failure_ = "unknown job type";
  }
}

TaskId TaskManager::Add(proto::TaskType type, const Range& range, int64_t model_version,
                        std::deque<Entry>* queue) {
  Entry e;
  e.task.set_task_id(next_id_++);
  e.task.set_type(type);
  e.task.set_file(range.file);
  e.task.set_start(range.start);
  e.task.set_end(range.end);
  e.task.set_epoch(std::max<int64_t>(epoch_, 0));
  e.task.set_model_version(model_version);
  queue->push_back(std::move(e));
  return queue->back().task.task_id();
}

void TaskManager::DealNextEpoch() {
  ++epoch_;
  std::vector<Range> ranges = training_;
  std::shuffle(ranges.begin(), ranges.end(), rng_);
  for (const Range& r : ranges) Add(proto::TASK_TRAINING, r, 0, &training_queue_);
}

void TaskManager::StartEvaluation(int64_t model_version) {
  evaluating_ = true;
  evaluation_version_ = model_version;
  evaluation_tasks_left_ = static_cast<int>(validation_.size());
  evaluation_states_.clear();
  for (const Range& r : validation_) Add(proto::TASK_EVALUATION, r, model_version, &other_queue_);
  if (validation_.empty()) evaluating_ = false;
}

void TaskManager::MaybeStartEvaluation() {
  if (evaluating_ || validation_.empty() || options_.job_type != proto::JOB_TRAINING) return;
  if (options_.evaluation_steps > 0 && model_version_ >= next_evaluation_version_ &&
      !TrainingFinished()) {
    StartEvaluation(model_version_);
    next_evaluation_version_ =
        (model_version_ / options_.evaluation_steps + 1) * options_.evaluation_steps;
    return;
  }
  if (TrainingFinished() && !final_evaluation_started_) {
    final_evaluation_started_ = true;
    StartEvaluation(model_version_);
  }
}

bool TaskManager::TrainingFinished() const {
  if (options_.job_type != proto::JOB_TRAINING) return true;
  if (!training_queue_.empty() || epoch_ + 1 < options_.num_epochs) return false;
  for (const auto& [id, h] : held_) {
    if (h.entry.task.type() == proto::TASK_TRAINING) return false;
  }
  return true;
}

bool TaskManager::finished() const {
  if (failure_) return true;
  if (!other_queue_.empty() || !held_.empty() || evaluating_) return false;
  if (!TrainingFinished()) return false;
  // A training job ends with an evaluation when there is validation data.
  return options_.job_type != proto::JOB_TRAINING || validation_.empty() ||
         final_evaluation_started_;
}

proto::Task TaskManager::Next(WorkerId worker) {
  proto::Task none;
  if (finished()) {
    none.set_type(proto::TASK_NONE);
    return none;
  }
  std::deque<Entry>* queue = nullptr;
  if (!other_queue_.empty()) {
    queue = &other_queue_;
  } else {
    if (training_queue_.empty() && epoch_ + 1 < options_.num_epochs &&
        options_.job_type == proto::JOB_TRAINING) {
      DealNextEpoch();
    }
    if (!training_queue_.empty()) queue = &training_queue_;
  }
  if (queue == nullptr) {
    none.set_type(proto::TASK_WAIT);
    return none;
  }
  Entry e = std::move(queue->front());
  queue->pop_front();
  proto::Task task = e.task;
  if (task.type() == proto::TASK_TRAINING && !training_started_) {
    training_started_ = std::chrono::steady_clock::now();
  }
  held_[task.task_id()] = Held{std::move(e), worker};
  return task;
}

void TaskManager::FinishTask(const Held& held, const proto::ReportTaskRequest& report) {
  const proto::Task& task = held.entry.task;
  switch (task.type()) {
    case proto::TASK_TRAINING:
      records_done_ += task.end() - task.start();
      training_last_done_ = std::chrono::steady_clock::now();
      if (report.minibatches() > 0) recent_loss_ = report.loss_sum() / report.minibatches();
      break;
    case proto::TASK_EVALUATION: {
      if (options_.job_type == proto::JOB_EVALUATION) records_done_ += task.end() - task.start();
      MetricStates states;
      for (const proto::MetricState& m : report.metrics()) states[m.name()] = FromProto(m);
      Status merged = MergeMetricStates(states, &evaluation_states_);
      if (!merged.ok()) {
        failure_ = StrCat("evaluation task ", task.task_id(), ": ", merged.message());
        return;
      }
      if (--evaluation_tasks_left_ == 0) {
        Evaluation ev;
        ev.model_version = evaluation_version_;
        for (const auto& [name, s] : evaluation_states_) ev.metrics[name] = MetricResult(s);
        evaluations_.push_back(std::move(ev));
        evaluating_ = false;
      }
      break;
    }
    case proto::TASK_PREDICTION:
      records_done_ += task.end() - task.start();
      break;
    default:
      break;
  }
}

bool TaskManager::Report(WorkerId worker, const proto::ReportTaskRequest& report) {
  auto it = held_.find(report.task_id());
  if (it == held_.end() || it->second.worker != worker) return false;
  Held held = std::move(it->second);
  held_.erase(it);
  model_version_ = std::max(model_version_, report.model_version());

  if (report.error().empty()) {
    FinishTask(held, report);
  } else {
    const proto::Task& t = held.entry.task;
    if (++held.entry.failures > options_.max_task_retries) {
      failure_ = StrCat(TaskTypeName(t.type()), " task ", t.task_id(), " (", t.file(), " records [",
                        t.start(), ", ", t.end(), ")) failed ", held.entry.failures,
                        " times; last error: ", report.error());
    } else {
      auto& queue = t.type() == proto::TASK_TRAINING ? training_queue_ : other_queue_;
      queue.push_front(std::move(held.entry));
    }
  }
  MaybeStartEvaluation();
  return true;
}

double TaskManager::training_seconds() const {
  if (!training_started_ || training_last_done_ < *training_started_) return 0;
  return std::chrono::duration<double>(training_last_done_ - *training_started_).count();
}

int TaskManager::RecoverWorker(WorkerId worker) {
  int n = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.worker != worker) {
      ++it;
      continue;
    }
    Entry e = std::move(it->second.entry);
    auto& queue = e.task.type() == proto::TASK_TRAINING ? training_queue_ : other_queue_;
    queue.push_front(std::move(e));
    it = held_.erase(it);
    ++n;
  }
  return n;
}

}  // namespace elasticdl::master
