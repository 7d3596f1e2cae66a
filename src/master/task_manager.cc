#include "master/task_manager.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "common/strings.h"
#include "rpc/metric_state_codec.h"

namespace elasticdl::master {

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

std::string DescribeTask(const proto::Task& task) {
  return StrCat(TaskTypeName(task.type()), " task ", task.task_id(), " (", task.file(),
                " records [", task.start(), ", ", task.end(), "))");
}

namespace {

int64_t RecordsOf(const proto::Task& task) { return task.end() - task.start(); }

}  // namespace

TaskManager::TaskManager(TaskManagerOptions options, std::vector<Range> training,
                         std::vector<Range> validation, const std::vector<Range>& prediction,
                         Empty /*unused*/)
    : options_(std::move(options)),
      training_(std::move(training)),
      validation_(std::move(validation)),
      rng_(options_.shuffle_seed),
      next_evaluation_version_(options_.evaluation_steps),
      early_stopping_(options_.early_stopping) {
  switch (options_.job_type) {
    case proto::JOB_TRAINING:
      for (const Range& r : training_) records_total_ += r.end - r.start;
      records_total_ *= options_.num_epochs;
      break;
    case proto::JOB_EVALUATION:
      for (const Range& r : validation_) records_total_ += r.end - r.start;
      model_version_ = options_.model_version;
      break;
    case proto::JOB_PREDICTION:
      for (const Range& r : prediction) {
        records_total_ += r.end - r.start;
        prediction_tasks_.emplace_back(r, -1);
      }
      model_version_ = options_.model_version;
      break;
    default:
      failure_ = "unknown job type";
  }
}

TaskManager::TaskManager(TaskManagerOptions options, std::vector<Range> training,
                         std::vector<Range> validation, const std::vector<Range>& prediction)
    : TaskManager(std::move(options), std::move(training), std::move(validation), prediction,
                  Empty{}) {
  switch (options_.job_type) {
    case proto::JOB_TRAINING:
      if (options_.num_epochs > 0) DealNextEpoch();
      break;
    case proto::JOB_EVALUATION:
      StartEvaluation(options_.model_version);
      final_evaluation_started_ = true;
      break;
    case proto::JOB_PREDICTION:
      for (auto& [range, id] : prediction_tasks_) {
        id = Add(proto::TASK_PREDICTION, range, 0, &other_queue_);
      }
      break;
    default:
      break;
  }
}

TaskId TaskManager::Add(proto::TaskType type, const Range& range, int64_t model_version,
                        std::deque<Entry>* queue) {
  Entry e;
  e.task.set_task_id(next_id_.value());
  next_id_ = TaskId(next_id_.value() + 1);
  e.task.set_type(type);
  e.task.set_file(range.file);
  e.task.set_start(range.start);
  e.task.set_end(range.end);
  e.task.set_epoch(std::max<int64_t>(epoch_, 0));
  e.task.set_model_version(model_version);
  PushBack(queue, std::move(e));
  return IdOf(queue->back().task);
}

void TaskManager::PushBack(std::deque<Entry>* queue, Entry entry) {
  entry.order = next_back_++;
  NoteQueued(entry, queue == &training_queue_);
  queue->push_back(std::move(entry));
}

void TaskManager::PushFront(std::deque<Entry>* queue, Entry entry) {
  entry.order = next_front_--;
  NoteQueued(entry, queue == &training_queue_);
  queue->push_front(std::move(entry));
}

int64_t TaskManager::NumMinibatches(const proto::Task& task) const {
  if (task.type() != proto::TASK_TRAINING || options_.minibatch_size <= 0) return 1;
  return (RecordsOf(task) + options_.minibatch_size - 1) / options_.minibatch_size;
}

void TaskManager::DealNextEpoch() {
  // The ranges this epoch dealt last, in the order it dealt them (task ids
  // grow as tasks are dealt).
  std::map<TaskId, Range> dealt;
  auto note = [&](const proto::Task& t) {
    if (t.type() == proto::TASK_TRAINING && t.epoch() == epoch_) {
      dealt[IdOf(t)] = RangeOf(t);
    }
  };
  // The epoch's tasks are the last ones finished (ids grow epoch by epoch):
  // those alone, not every task the job finished.
  for (auto it = finished_training_.rbegin();
       it != finished_training_.rend() && it->second.epoch() == epoch_; ++it) {
    note(it->second);
  }
  for (const auto& [id, h] : held_) note(h.entry.task);
  for (const Entry& e : training_queue_) note(e.task);
  // As many workers as the job runs may still be finishing its last ranges
  // while the next one starts (more while a scale-down is under way).
  std::set<WorkerId> holders;
  for (const auto& [id, h] : held_) {
    if (h.entry.task.type() != proto::TASK_TRAINING) continue;
    for (const Holder& holder : h.holders) holders.insert(holder.worker);
  }
  const size_t workers = std::max<size_t>(parallelism_, holders.size());

  ++epoch_;
  std::vector<Range> ranges = training_;
  std::shuffle(ranges.begin(), ranges.end(), rng_);
  rng_changed_ = true;
  // The last ranges dealt stay out of the first ones of this epoch: in
  // lockstep the same records do not train side by side (FirstReady), and a
  // range the last epoch still trains would have the worker it comes to
  // take the one behind it, or wait. Twice the workers is the margin for a task
  // that runs long; at most half the epoch, so that the order stays a
  // shuffle; none with one worker, which trains one task at a time. Decided
  // from the order dealt, never from timing: the same seed deals the same
  // epochs.
  const size_t apart = workers > 1 ? std::min(ranges.size() / 2, 2 * workers) : 0;
  auto last = [&](const Range& r) {
    size_t seen = 0;
    for (auto it = dealt.rbegin(); it != dealt.rend() && seen < apart; ++it, ++seen) {
      if (it->second == r) return true;
    }
    return false;
  };
  size_t swap_with = apart;
  for (size_t i = 0; i < apart; ++i) {
    if (!last(ranges[i])) continue;
    while (swap_with < ranges.size() && last(ranges[swap_with])) ++swap_with;
    if (swap_with == ranges.size()) break;
    std::swap(ranges[i], ranges[swap_with++]);
  }
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
      stop_reason_.empty() && !TrainingFinished()) {
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
  if (training_given_up_) return false;
  if (stop_reason_.empty() && (!training_queue_.empty() || epoch_ + 1 < options_.num_epochs)) {
    return false;
  }
  return std::none_of(held_.begin(), held_.end(), [](const auto& kv) {
    return kv.second.entry.task.type() == proto::TASK_TRAINING;
  });
}

bool TaskManager::finished() const {
  if (failure_) return true;
  if (!other_queue_.empty() || !held_.empty() || evaluating_) return false;
  if (!TrainingFinished()) return false;
  // A training job ends with an evaluation when there is validation data.
  return options_.job_type != proto::JOB_TRAINING || validation_.empty() ||
         final_evaluation_started_;
}

proto::Task TaskManager::Next(WorkerId worker, bool ahead) {
  proto::Task none;
  if (finished()) {
    none.set_type(proto::TASK_NONE);
    return none;
  }
  std::deque<Entry>* queue = nullptr;
  if (!other_queue_.empty()) {
    queue = &other_queue_;
  } else if (stop_reason_.empty()) {
    if (training_queue_.empty() && epoch_ + 1 < options_.num_epochs &&
        options_.job_type == proto::JOB_TRAINING) {
      DealNextEpoch();
    }
    if (!training_queue_.empty()) queue = &training_queue_;
  }
  const size_t ready = queue == nullptr ? 0 : FirstReady(*queue);
  if (queue == nullptr || ready == queue->size()) {
    none.set_type(proto::TASK_WAIT);
    return none;
  }
  auto it = queue->begin() + static_cast<std::ptrdiff_t>(ready);
  Entry e = std::move(*it);
  queue->erase(it);
  e.task.set_attempt(e.task.attempt() + 1);
  proto::Task task = e.task;
  if (task.type() == proto::TASK_TRAINING && !training_started_) {
    training_started_ = std::chrono::steady_clock::now();
  }
  Held& held = Hold(std::move(e), {Holder{worker, task.attempt(), /*restored=*/false, ahead}});
  NoteHeld(held);
  return task;
}

size_t TaskManager::FirstReady(const std::deque<Entry>& queue) const {
  if (&queue != &training_queue_ || !options_.lockstep ||
      (held_ranges_.empty() && revoked_.empty())) {
    return 0;
  }
  auto ready = std::find_if(queue.begin(), queue.end(), [&](const Entry& e) {
    const Range range = RangeOf(e.task);
    return held_ranges_.count(range) == 0 &&
           std::none_of(revoked_.begin(), revoked_.end(),
                        [&](const auto& kv) { return kv.second.second == range; });
  });
  return static_cast<size_t>(ready - queue.begin());
}

Range TaskManager::RangeOf(const proto::Task& task) {
  return Range{task.file(), task.start(), task.end()};
}

TaskManager::Held& TaskManager::Hold(Entry entry, std::vector<Holder> holders) {
  if (entry.task.type() == proto::TASK_TRAINING) held_ranges_.insert(RangeOf(entry.task));
  const TaskId id = IdOf(entry.task);
  return held_[id] = Held{std::move(entry), std::move(holders)};
}

TaskManager::Entry TaskManager::Release(std::map<TaskId, Held>::iterator* it) {
  Entry entry = std::move((*it)->second.entry);
  if (entry.task.type() == proto::TASK_TRAINING) {
    held_ranges_.erase(held_ranges_.find(RangeOf(entry.task)));
  }
  *it = held_.erase(*it);
  return entry;
}

bool TaskManager::LastStretch() const {
  return options_.job_type == proto::JOB_TRAINING && stop_reason_.empty() &&
         epoch_ + 1 >= options_.num_epochs && other_queue_.empty() &&
         FirstReady(training_queue_) == training_queue_.size();
}

std::optional<int64_t> TaskManager::BackupLeft(const Held& held, WorkerId worker) const {
  const proto::Task& t = held.entry.task;
  if (t.type() != proto::TASK_TRAINING || held.holders.size() != 1 || held.HeldBy(worker)) {
    return std::nullopt;
  }
  const int64_t left = NumMinibatches(t) - t.minibatches_done();
  return left > 0 ? std::optional<int64_t>(left) : std::nullopt;
}

std::vector<TaskManager::BackupCandidate> TaskManager::BackupCandidates(WorkerId worker) const {
  std::vector<BackupCandidate> candidates;
  if (!LastStretch()) return candidates;
  for (const auto& [id, h] : held_) {
    if (std::optional<int64_t> left = BackupLeft(h, worker)) {
      candidates.push_back({id, h.holders.front().worker, h.entry.task.minibatches_done(), *left});
    }
  }
  return candidates;
}

proto::Task TaskManager::Backup(WorkerId worker, TaskId id) {
  proto::Task wait;
  wait.set_type(proto::TASK_WAIT);
  auto it = held_.find(id);
  if (!LastStretch() || it == held_.end() || !BackupLeft(it->second, worker)) return wait;
  Held& held = it->second;
  proto::Task& task = held.entry.task;
  task.set_attempt(task.attempt() + 1);
  held.holders.push_back(Holder{worker, task.attempt(), false});
  NoteHeld(held);
  return task;
}

bool TaskManager::Held::HeldBy(WorkerId worker) const {
  return std::any_of(holders.begin(), holders.end(),
                     [&](const Holder& h) { return h.worker == worker; });
}

TaskManager::Held* TaskManager::FindHeld(WorkerId worker, TaskId id, int32_t attempt,
                                         Holder** holder) {
  auto it = held_.find(id);
  if (it == held_.end()) return nullptr;
  for (Holder& h : it->second.holders) {
    if (h.worker != worker || h.attempt != attempt) continue;
    if (holder != nullptr) *holder = &h;
    return &it->second;
  }
  return nullptr;
}

bool TaskManager::DropHolder(std::map<TaskId, Held>::iterator* it, WorkerId worker) {
  Held& held = (*it)->second;
  std::vector<Holder>& holders = held.holders;
  holders.erase(std::remove_if(holders.begin(), holders.end(),
                               [&](const Holder& h) { return h.worker == worker; }),
                holders.end());
  if (!holders.empty()) {
    NoteHeld(held);
    ++*it;
    return false;
  }
  Requeue(Release(it));
  return true;
}

void TaskManager::Requeue(Entry entry) {
  if (entry.task.type() == proto::TASK_TRAINING) {
    PushFront(&training_queue_, std::move(entry));
  } else {
    entry.task.set_minibatches_done(0);
    PushFront(&other_queue_, std::move(entry));
  }
}

void TaskManager::FinishEvaluationTask(const proto::Task& task,
                                       const proto::ReportTaskRequest& report) {
  if (options_.job_type == proto::JOB_EVALUATION) records_done_ += RecordsOf(task);
  MetricStates states;
  for (const proto::MetricState& m : report.metrics())
    states[m.name()] = rpc::MetricStateFromProto(m);
  Status merged = MergeMetricStates(states, &evaluation_states_);
  if (!merged.ok()) {
    failure_ = StrCat("evaluation task ", task.task_id(), ": ", merged.message());
    return;
  }
  if (--evaluation_tasks_left_ == 0) {
    Evaluation ev;
    ev.model_version = evaluation_version_;
    for (const auto& [name, s] : evaluation_states_) ev.metrics[name] = MetricResult(s);
    // Evaluations during training only: the final one comes after it.
    if (options_.job_type == proto::JOB_TRAINING && !final_evaluation_started_ &&
        stop_reason_.empty()) {
      if (std::optional<std::string> stop = early_stopping_.Observe(ev.model_version, ev.metrics)) {
        StopTraining(*stop);
      }
    }
    evaluations_.push_back(std::move(ev));
    evaluating_ = false;
  }
}

void TaskManager::FinishTask(Entry entry, const proto::ReportTaskRequest& report) {
  proto::Task& task = entry.task;
  switch (task.type()) {
    case proto::TASK_TRAINING:
      records_done_ += RecordsOf(task);
      training_last_done_ = std::chrono::steady_clock::now();
      if (report.minibatches() > 0) recent_loss_ = report.loss_sum() / report.minibatches();
      task.set_minibatches_done(NumMinibatches(task));
      NoteFinished(task);
      finished_training_[IdOf(task)] = std::move(task);
      break;
    case proto::TASK_EVALUATION:
      FinishEvaluationTask(task, report);
      break;
    case proto::TASK_PREDICTION:
      records_done_ += RecordsOf(task);
      break;
    default:
      break;
  }
}

bool TaskManager::CountFailure(Entry* entry, const std::string& error) {
  const proto::Task& t = entry->task;
  if (++entry->failures <= options_.max_task_retries) return false;
  // Its records are not in the model: training did not finish, whatever is
  // left to hand out.
  if (t.type() == proto::TASK_TRAINING) training_given_up_ = true;
  failure_ = StrCat(DescribeTask(t), " failed ", entry->failures, " times; last error: ", error);
  return true;
}

void TaskManager::TaskFailed(Entry entry, const std::string& error) {
  if (!CountFailure(&entry, error)) Requeue(std::move(entry));
}

bool TaskManager::Report(WorkerId worker, const proto::ReportTaskRequest& report,
                         std::vector<WorkerId>* overtaken) {
  const TaskId id(report.task_id());
  // A report of a revoked task says its worker has stopped it.
  for (auto [it, end] = revoked_.equal_range(worker); it != end;) {
    it = it->second.first == id ? revoked_.erase(it) : std::next(it);
  }
  Held* found = FindHeld(worker, id, report.attempt());
  if (found == nullptr) return false;
  model_version_ = std::max(model_version_, report.model_version());
  proto::Task& held_task = found->entry.task;
  if (held_task.type() == proto::TASK_TRAINING) {
    int64_t reported = std::clamp<int64_t>(report.minibatches_done(), 0, NumMinibatches(held_task));
    held_task.set_minibatches_done(std::max(held_task.minibatches_done(), reported));
  }
  const bool finishes =
      report.error().empty() &&
      (!report.stopped() || (held_task.type() == proto::TASK_TRAINING &&
                             held_task.minibatches_done() >= NumMinibatches(held_task)));
  if (!finishes && found->holders.size() > 1) {
    // Another attempt goes on with the task; a failure still counts.
    if (!report.error().empty()) CountFailure(&found->entry, report.error());
    auto it = held_.find(id);
    DropHolder(&it, worker);
    return true;
  }
  if (overtaken != nullptr) {
    for (const Holder& h : found->holders) {
      if (h.worker != worker) overtaken->push_back(h.worker);
    }
  }
  auto it = held_.find(id);
  Entry entry = Release(&it);
  // Noted again where it is requeued.
  NoteGone(id);
  if (!report.error().empty()) {
    TaskFailed(std::move(entry), report.error());
  } else if (!finishes) {
    Requeue(std::move(entry));
  } else {
    FinishTask(std::move(entry), report);
  }
  MaybeStopTraining();
  MaybeStartEvaluation();
  return true;
}

void TaskManager::MaybeStopTraining() {
  if (options_.job_type != proto::JOB_TRAINING || !stop_reason_.empty()) return;
  if (options_.max_steps > 0 && model_version_ >= options_.max_steps) {
    StopTraining(StrCat("max_steps: the model reached version ", options_.max_steps));
  }
}

void TaskManager::StopTraining(const std::string& reason) {
  if (options_.job_type != proto::JOB_TRAINING || !stop_reason_.empty()) return;
  stop_reason_ = reason;
}

int64_t TaskManager::records_done() const {
  if (stop_reason_.empty()) return records_done_;
  // Tasks that will not be finished: what they trained before training stopped.
  int64_t partial = 0;
  for (const Entry& e : training_queue_) {
    const int64_t records = RecordsOf(e.task);
    if (e.task.minibatches_done() >= NumMinibatches(e.task)) {
      partial += records;
    } else if (options_.minibatch_size > 0) {
      partial += std::min(records, e.task.minibatches_done() * options_.minibatch_size);
    }
  }
  return records_done_ + partial;
}

bool TaskManager::Progress(WorkerId worker, TaskId task, int32_t attempt,
                           int64_t minibatches_done) {
  Held* held = FindHeld(worker, task, attempt);
  if (held == nullptr) return false;
  proto::Task& t = held->entry.task;
  if (t.type() == proto::TASK_TRAINING) {
    int64_t done = std::clamp<int64_t>(minibatches_done, 0, NumMinibatches(t));
    if (done > t.minibatches_done()) {
      t.set_minibatches_done(done);
      NoteHeld(*held);
    }
  }
  return true;
}

bool TaskManager::ReconcileWorker(WorkerId worker, TaskId current_task, int32_t attempt,
                                  std::optional<TaskAttempt> next,
                                  std::optional<TaskAttempt> reporting) {
  Holder* holder = nullptr;
  Held* current = FindHeld(worker, current_task, attempt, &holder);
  if (holder != nullptr) holder->restored = holder->ahead = false;
  Holder* next_holder = nullptr;
  Held* ahead = next ? FindHeld(worker, next->task, next->attempt, &next_holder) : nullptr;
  if (next_holder != nullptr) next_holder->restored = next_holder->ahead = false;
  const bool asking_ahead = next && next->task.value() < 0;
  const Held* reported =
      reporting ? FindHeld(worker, reporting->task, reporting->attempt) : nullptr;
  for (auto it = held_.begin(); it != held_.end();) {
    Held& h = it->second;
    auto mine = std::find_if(h.holders.begin(), h.holders.end(),
                             [&](const Holder& x) { return x.worker == worker; });
    // A worker works on one task at a time (and may hold the next): while
    // it is on one it holds, the others are abandoned (e.g. a hand-out
    // whose reply was lost).
    if (&h != current && &h != ahead && &h != reported && mine != h.holders.end() && !mine->ahead &&
        ((current != nullptr && !asking_ahead) || mine->restored)) {
      DropHolder(&it, worker);
      continue;
    }
    ++it;
  }
  return current != nullptr;
}

int TaskManager::RecoverWorker(WorkerId worker, std::optional<TaskAttempt> keep) {
  // Asking for a task, the worker trains none but the one it keeps.
  for (auto [it, end] = revoked_.equal_range(worker); it != end;) {
    it = keep && it->second.first == keep->task ? std::next(it) : revoked_.erase(it);
  }
  const Held* kept = keep ? FindHeld(worker, keep->task, keep->attempt) : nullptr;
  int n = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (!it->second.HeldBy(worker) || &it->second == kept) {
      ++it;
      continue;
    }
    if (DropHolder(&it, worker)) ++n;
  }
  return n;
}

int TaskManager::PsRestored(const std::vector<proto::TaskProgress>& applied) {
  std::map<TaskId, int64_t> applied_of;
  for (const proto::TaskProgress& p : applied) applied_of[TaskId(p.task_id())] = p.minibatches();
  auto applied_to = [&](const proto::Task& t) {
    auto it = applied_of.find(IdOf(t));
    return it == applied_of.end() ? 0 : std::max<int64_t>(it->second, 0);
  };
  const bool training_was_finished = TrainingFinished();

  std::vector<Entry> reopened;
  for (auto it = held_.begin(); it != held_.end();) {
    // Every held training task is revoked: its holder may be ahead of the
    // ledger's lower bound and quote, in a heartbeat or report sent before it
    // saw the restore, minibatches the restored server no longer has.
    proto::Task& t = it->second.entry.task;
    if (t.type() != proto::TASK_TRAINING) {
      ++it;
      continue;
    }
    t.set_minibatches_done(std::min(t.minibatches_done(), applied_to(t)));
    for (const Holder& h : it->second.holders) {
      if (options_.lockstep) revoked_.emplace(h.worker, std::make_pair(IdOf(t), RangeOf(t)));
    }
    reopened.push_back(Release(&it));
  }
  for (auto it = finished_training_.begin(); it != finished_training_.end();) {
    proto::Task& t = it->second;
    if (t.minibatches_done() <= applied_to(t)) {
      ++it;
      continue;
    }
    records_done_ -= RecordsOf(t);
    t.set_minibatches_done(applied_to(t));
    NoteUnfinished(IdOf(t));
    reopened.push_back(Entry{std::move(t), 0});
    it = finished_training_.erase(it);
  }
  for (Entry& e : training_queue_) {
    const int64_t applied = applied_to(e.task);
    if (e.task.minibatches_done() <= applied) continue;
    e.task.set_minibatches_done(applied);
    NoteQueued(e, true);
  }

  // To the front, oldest task first.
  std::sort(reopened.begin(), reopened.end(),
            [](const Entry& a, const Entry& b) { return a.task.task_id() > b.task.task_id(); });
  for (Entry& e : reopened) PushFront(&training_queue_, std::move(e));
  // Training that had ended must end again before the final evaluation.
  if (training_was_finished && !TrainingFinished()) final_evaluation_started_ = false;
  return static_cast<int>(reopened.size());
}

std::vector<TaskId> TaskManager::HeldBy(WorkerId worker) const {
  std::vector<TaskId> ids;
  for (const auto& [id, h] : held_) {
    if (h.HeldBy(worker)) ids.push_back(id);
  }
  return ids;
}

std::string TaskManager::DescribeHeldBy(WorkerId worker) const {
  std::string described;
  for (const auto& [id, h] : held_) {
    if (!h.HeldBy(worker)) continue;
    if (!described.empty()) described += ", ";
    described += DescribeTask(h.entry.task);
  }
  return described;
}

std::vector<WorkerId> TaskManager::Holders() const {
  std::vector<WorkerId> workers;
  for (const auto& [id, h] : held_) {
    for (const Holder& holder : h.holders) workers.push_back(holder.worker);
  }
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  return workers;
}

double TaskManager::training_seconds() const {
  if (!training_started_ || training_last_done_ < *training_started_) {
    return training_seconds_before_;
  }
  return training_seconds_before_ +
         std::chrono::duration<double>(training_last_done_ - *training_started_).count();
}

}  // namespace elasticdl::master
