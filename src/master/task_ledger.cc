// TaskManager to and from proto::TaskLedger, the task part of the master's
// journal.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/strings.h"
#include "master/task_manager.h"
#include "rpc/metric_state_codec.h"

namespace elasticdl::master {
namespace {

using RangeKey = std::tuple<std::string, int64_t, int64_t>;

RangeKey KeyOf(const proto::Task& t) { return {t.file(), t.start(), t.end()}; }
RangeKey KeyOf(const Range& r) { return {r.file, r.start, r.end}; }

std::string Describe(const proto::Task& t) {
  return StrCat("task ", t.task_id(), " (", t.file(), " records [", t.start(), ", ", t.end(), "))");
}

Status DataChanged(const proto::Task& t, const char* kind) {
  return absl::FailedPreconditionError(
      StrCat(Describe(t), " is not a ", kind, " range of this job; did the data change?"));
}

}  // namespace

proto::JournalTask TaskManager::ToJournal(const Entry& e, std::optional<WorkerId> holder,
                                          bool training) {
  proto::JournalTask jt;
  *jt.mutable_task() = e.task;
  jt.set_failures(e.failures);
  jt.set_holder(holder ? holder->value() : -1);
  jt.set_training(training);
  if (!holder) jt.set_order(e.order);
  return jt;
}

proto::JournalTask TaskManager::ToJournal(const Held& h) {
  const Holder& first = h.holders.front();
  proto::JournalTask jt =
      ToJournal(h.entry, first.worker, h.entry.task.type() == proto::TASK_TRAINING);
  jt.set_holder_attempt(first.attempt);
  for (size_t i = 1; i < h.holders.size(); ++i) {
    proto::JournalBackup* backup = jt.add_backups();
    backup->set_worker(h.holders[i].worker.value());
    backup->set_attempt(h.holders[i].attempt);
  }
  return jt;
}

void TaskManager::AddEvaluations(
    size_t from, google::protobuf::RepeatedPtrField<proto::JournalEvaluation>* to) const {
  for (size_t i = from; i < evaluations_.size(); ++i) {
    proto::JournalEvaluation* je = to->Add();
    je->set_model_version(evaluations_[i].model_version);
    je->mutable_metrics()->insert(evaluations_[i].metrics.begin(), evaluations_[i].metrics.end());
  }
}

proto::TaskLedger TaskManager::ToLedger() const {
  proto::TaskLedger ledger;
  ScalarsTo(&ledger);
  for (const Entry& e : training_queue_) *ledger.add_tasks() = ToJournal(e, std::nullopt, true);
  for (const Entry& e : other_queue_) *ledger.add_tasks() = ToJournal(e, std::nullopt, false);
  for (const auto& [id, h] : held_) *ledger.add_tasks() = ToJournal(h);
  for (const auto& [id, task] : finished_training_) *ledger.add_finished_training() = task;
  AddEvaluations(0, ledger.mutable_evaluations());
  for (const auto& [range, id] : prediction_tasks_) ledger.add_prediction_task_ids(id.value());
  ledger.set_rng_state(RngState());
  return ledger;
}

void TaskManager::ScalarsTo(proto::TaskLedger* ledger) const {
  ledger->set_next_task_id(next_id_.value());
  ledger->set_epoch(epoch_);
  ledger->set_records_done(records_done_);
  ledger->set_model_version(model_version_);
  ledger->set_recent_loss(recent_loss_);
  ledger->set_evaluating(evaluating_);
  ledger->set_evaluation_version(evaluation_version_);
  ledger->set_evaluation_tasks_left(evaluation_tasks_left_);
  for (const auto& [name, s] : evaluation_states_) {
    *ledger->add_evaluation_states() = rpc::MetricStateToProto(name, s);
  }
  ledger->set_next_evaluation_version(next_evaluation_version_);
  ledger->set_final_evaluation_started(final_evaluation_started_);
  ledger->set_training_seconds(training_seconds());
  if (failure_) ledger->set_failure(*failure_);
  ledger->set_training_given_up(training_given_up_);
  ledger->set_stop_reason(stop_reason_);
  early_stopping_.Save(ledger);
}

std::string TaskManager::RngState() const {
  std::ostringstream rng;
  rng << rng_;
  return rng.str();
}

void TaskManager::TrackChanges() {
  track_changes_ = true;
  ForgetChanges();
}

proto::TaskLedger TaskManager::TakeLedger() {
  ForgetChanges();
  return ToLedger();
}

void TaskManager::ForgetChanges() {
  changed_tasks_.clear();
  changed_finished_.clear();
  rng_changed_ = false;
  evaluations_taken_ = evaluations_.size();
}

void TaskManager::TakeChanges(proto::LedgerChanges* changes) {
  ScalarsTo(changes->mutable_scalars());
  for (auto& [id, task] : changed_tasks_) {
    if (task) {
      *changes->add_tasks() = std::move(*task);
    } else {
      changes->add_tasks_gone(id.value());
    }
  }
  for (auto& [id, task] : changed_finished_) {
    if (task) {
      *changes->add_finished_training() = std::move(*task);
    } else {
      changes->add_finished_gone(id.value());
    }
  }
  if (rng_changed_) changes->set_rng_state(RngState());
  AddEvaluations(evaluations_taken_, changes->mutable_evaluations());
  ForgetChanges();
}

void TaskManager::NoteQueued(const Entry& entry, bool training) {
  if (track_changes_) changed_tasks_[IdOf(entry.task)] = ToJournal(entry, std::nullopt, training);
}

void TaskManager::NoteHeld(const Held& held) {
  if (track_changes_) changed_tasks_[IdOf(held.entry.task)] = ToJournal(held);
}

void TaskManager::NoteGone(TaskId id) {
  if (track_changes_) changed_tasks_[id] = std::nullopt;
}

void TaskManager::NoteFinished(const proto::Task& task) {
  if (track_changes_) changed_finished_[IdOf(task)] = task;
}

void TaskManager::NoteUnfinished(TaskId id) {
  if (track_changes_) changed_finished_[id] = std::nullopt;
}

StatusOr<TaskManager> TaskManager::FromLedger(TaskManagerOptions options,
                                              std::vector<Range> training,
                                              std::vector<Range> validation,
                                              const std::vector<Range>& prediction,
                                              const proto::TaskLedger& ledger) {
  TaskManager tm(std::move(options), std::move(training), std::move(validation), prediction,
                 Empty{});
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(tm.LoadLedger(ledger), "master journal");
  return tm;
}

Status TaskManager::LoadLedger(const proto::TaskLedger& ledger) {
  if (!ledger.failure().empty()) failure_ = ledger.failure();
  training_given_up_ = ledger.training_given_up();
  next_id_ = TaskId(ledger.next_task_id());
  epoch_ = ledger.epoch();
  const bool training_job = options_.job_type == proto::JOB_TRAINING;
  if (next_id_.value() < 0 || epoch_ < -1 || epoch_ >= std::max<int64_t>(options_.num_epochs, 0) ||
      (!training_job && epoch_ != -1)) {
    return absl::FailedPreconditionError(StrCat("epoch ", epoch_, " of next task ",
                                                next_id_.value(), " does not fit a job of ",
                                                options_.num_epochs, " epochs"));
  }
  std::set<TaskId> listed;
  for (const proto::JournalTask& jt : ledger.tasks()) {
    if (!listed.insert(IdOf(jt.task())).second) {
      return absl::InvalidArgumentError(StrCat(Describe(jt.task()), " is listed twice"));
    }
    EDL_RETURN_IF_ERROR(LoadTask(jt));
  }
  LoadOrders();
  for (const proto::Task& t : ledger.finished_training()) {
    if (t.type() != proto::TASK_TRAINING) {
      return absl::InvalidArgumentError(StrCat(Describe(t), " is finished but not training"));
    }
    EDL_RETURN_IF_ERROR(CheckTask(t));
    if (!finished_training_.emplace(t.task_id(), t).second) {
      return absl::InvalidArgumentError(StrCat(Describe(t), " is listed twice"));
    }
  }
  EDL_RETURN_IF_ERROR(CheckEpochs());
  EDL_RETURN_IF_ERROR(LoadEvaluation(ledger));
  EDL_RETURN_IF_ERROR(LoadPrediction(ledger));
  return LoadCounters(ledger);
}

Status TaskManager::CheckTask(const proto::Task& t) const {
  if (t.task_id() < 0 || t.task_id() >= next_id_.value()) {
    return absl::InvalidArgumentError(
        StrCat(Describe(t), " has an id beyond the next task id ", next_id_));
  }
  if (t.attempt() < 0 || t.minibatches_done() < 0 || t.minibatches_done() > NumMinibatches(t)) {
    return absl::InvalidArgumentError(StrCat(Describe(t), " has attempt ", t.attempt(), " and ",
                                             t.minibatches_done(), " minibatches done of ",
                                             NumMinibatches(t)));
  }
  const bool training_job = options_.job_type == proto::JOB_TRAINING;
  switch (t.type()) {
    case proto::TASK_TRAINING:
      if (!training_job) return DataChanged(t, "training");
      if (t.epoch() < 0 || t.epoch() > epoch_) {
        return absl::InvalidArgumentError(
            StrCat(Describe(t), " is of epoch ", t.epoch(), " beyond the ledger's ", epoch_));
      }
      return absl::OkStatus();  // ranges are checked epoch by epoch
    case proto::TASK_EVALUATION: {
      if (options_.job_type == proto::JOB_PREDICTION) return DataChanged(t, "evaluation");
      bool known = std::any_of(validation_.begin(), validation_.end(),
                               [&](const Range& r) { return KeyOf(r) == KeyOf(t); });
      return known ? absl::OkStatus() : DataChanged(t, "validation");
    }
    case proto::TASK_PREDICTION:
      // Checked against prediction_task_ids in LoadPrediction.
      if (options_.job_type != proto::JOB_PREDICTION) return DataChanged(t, "prediction");
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(StrCat(Describe(t), " has type ", t.type()));
  }
}

Status TaskManager::LoadTask(const proto::JournalTask& jt) {
  const proto::Task& t = jt.task();
  EDL_RETURN_IF_ERROR(CheckTask(t));
  if (jt.failures() < 0 || jt.holder() < -1 ||
      (jt.holder() == -1 && jt.training() != (t.type() == proto::TASK_TRAINING))) {
    return absl::InvalidArgumentError(StrCat(Describe(t), " has failures ", jt.failures(),
                                             ", holder ", jt.holder(), " and training queue ",
                                             jt.training()));
  }
  if (jt.holder() < 0 && jt.backups_size() > 0) {
    return absl::InvalidArgumentError(StrCat(Describe(t), " is queued but has backup attempts"));
  }
  Entry e{t, jt.failures(), jt.order()};
  if (jt.holder() >= 0) {
    Held held{std::move(e), {}};
    held.holders.push_back(Holder{
        WorkerId(jt.holder()), jt.holder_attempt() > 0 ? jt.holder_attempt() : t.attempt(), true});
    for (const proto::JournalBackup& b : jt.backups()) {
      held.holders.push_back(Holder{WorkerId(b.worker()), b.attempt(), true});
    }
    for (const Holder& h : held.holders) {
      if (h.worker.value() < 0 || h.attempt <= 0 || h.attempt > t.attempt() ||
          std::count_if(held.holders.begin(), held.holders.end(),
                        [&](const Holder& o) { return o.worker == h.worker; }) > 1) {
        return absl::InvalidArgumentError(StrCat(Describe(t), " of attempt ", t.attempt(),
                                                 " is held by worker ", h.worker.value(),
                                                 " at attempt ", h.attempt));
      }
    }
    Hold(std::move(held.entry), std::move(held.holders));
  } else {
    // Listed front to back.
    (jt.training() ? training_queue_ : other_queue_).push_back(std::move(e));
  }
  return absl::OkStatus();
}

void TaskManager::LoadOrders() {
  // A ledger's places, where they grow front to back (a ledger written
  // without them has none); else places in the order listed.
  for (std::deque<Entry>* queue : {&training_queue_, &other_queue_}) {
    bool ordered = true;
    for (size_t i = 1; i < queue->size() && ordered; ++i) {
      ordered = (*queue)[i - 1].order < (*queue)[i].order;
    }
    if (!ordered) {
      int64_t order = 0;
      for (Entry& e : *queue) e.order = order++;
    }
  }
  next_front_ = -1;
  next_back_ = 0;
  for (const std::deque<Entry>* queue : {&training_queue_, &other_queue_}) {
    if (queue->empty()) continue;
    next_front_ = std::min(next_front_, queue->front().order - 1);
    next_back_ = std::max(next_back_, queue->back().order + 1);
  }
}

Status TaskManager::CheckEpochs() const {
  if (options_.job_type != proto::JOB_TRAINING) return absl::OkStatus();
  // Every epoch dealt holds each training range once, finished or not.
  std::map<int64_t, std::map<RangeKey, int>> dealt;
  auto count = [&](const proto::Task& t) {
    if (t.type() == proto::TASK_TRAINING) ++dealt[t.epoch()][KeyOf(t)];
  };
  for (const Entry& e : training_queue_) count(e.task);
  for (const auto& [id, h] : held_) count(h.entry.task);
  for (const auto& [id, t] : finished_training_) count(t);
  std::map<RangeKey, int> expected;
  for (const Range& r : training_) ++expected[KeyOf(r)];
  for (const auto& [epoch, ranges] : dealt) {
    for (const auto& [key, n] : ranges) {
      if (expected.count(key) == 0) {
        return absl::FailedPreconditionError(StrCat(
            "epoch ", epoch, ": ", std::get<0>(key), " records [", std::get<1>(key), ", ",
            std::get<2>(key), ") is not a training range of this job; did the data change?"));
      }
    }
  }
  if (failure_) return absl::OkStatus();  // a failed task is dropped
  for (int64_t epoch = 0; epoch <= epoch_; ++epoch) {
    if (dealt[epoch] != expected) {
      return absl::FailedPreconditionError(
          StrCat("epoch ", epoch, " does not cover the ", training_.size(),
                 " training ranges of this job once each; did the data change?"));
    }
  }
  return absl::OkStatus();
}

Status TaskManager::LoadEvaluation(const proto::TaskLedger& ledger) {
  evaluating_ = ledger.evaluating();
  evaluation_version_ = ledger.evaluation_version();
  evaluation_tasks_left_ = ledger.evaluation_tasks_left();
  next_evaluation_version_ = ledger.next_evaluation_version();
  final_evaluation_started_ = ledger.final_evaluation_started();
  for (const proto::MetricState& m : ledger.evaluation_states()) {
    if (!evaluation_states_.emplace(m.name(), rpc::MetricStateFromProto(m)).second) {
      return absl::InvalidArgumentError(StrCat("metric ", m.name(), " is listed twice"));
    }
  }
  for (const proto::JournalEvaluation& je : ledger.evaluations()) {
    Evaluation ev;
    ev.model_version = je.model_version();
    ev.metrics.insert(je.metrics().begin(), je.metrics().end());
    evaluations_.push_back(std::move(ev));
  }
  int evaluation_tasks = 0;
  auto check = [&](const proto::Task& t) -> Status {
    if (t.type() != proto::TASK_EVALUATION) return absl::OkStatus();
    ++evaluation_tasks;
    if (!evaluating_ || t.model_version() != evaluation_version_) {
      return absl::InvalidArgumentError(StrCat("evaluation ", Describe(t), " of model version ",
                                               t.model_version(),
                                               " is not part of the evaluation in progress"));
    }
    return absl::OkStatus();
  };
  for (const Entry& e : other_queue_) EDL_RETURN_IF_ERROR(check(e.task));
  for (const auto& [id, h] : held_) EDL_RETURN_IF_ERROR(check(h.entry.task));
  const bool count_ok = failure_ || evaluation_tasks == evaluation_tasks_left_;
  if ((evaluating_ && validation_.empty()) || !count_ok || evaluation_tasks_left_ < 0 ||
      evaluation_tasks_left_ > static_cast<int>(validation_.size())) {
    return absl::FailedPreconditionError(StrCat(
        "the evaluation in progress has ", evaluation_tasks, " tasks for ", evaluation_tasks_left_,
        " left over ", validation_.size(), " validation ranges; did the data change?"));
  }
  return absl::OkStatus();
}

Status TaskManager::LoadPrediction(const proto::TaskLedger& ledger) {
  if (static_cast<size_t>(ledger.prediction_task_ids_size()) != prediction_tasks_.size()) {
    return absl::FailedPreconditionError(
        StrCat("the ledger has ", ledger.prediction_task_ids_size(), " prediction tasks for ",
               prediction_tasks_.size(), " prediction ranges; did the data change?"));
  }
  std::map<TaskId, size_t> index;
  for (size_t i = 0; i < prediction_tasks_.size(); ++i) {
    prediction_tasks_[i].second = TaskId(ledger.prediction_task_ids(static_cast<int>(i)));
    index[prediction_tasks_[i].second] = i;
  }
  auto check = [&](const proto::Task& t) -> Status {
    if (t.type() != proto::TASK_PREDICTION) return absl::OkStatus();
    auto it = index.find(IdOf(t));
    if (it == index.end() || KeyOf(prediction_tasks_[it->second].first) != KeyOf(t)) {
      return DataChanged(t, "prediction");
    }
    return absl::OkStatus();
  };
  for (const Entry& e : other_queue_) EDL_RETURN_IF_ERROR(check(e.task));
  for (const auto& [id, h] : held_) EDL_RETURN_IF_ERROR(check(h.entry.task));
  return absl::OkStatus();
}

Status TaskManager::LoadCounters(const proto::TaskLedger& ledger) {
  records_done_ = ledger.records_done();
  if (records_done_ < 0 || records_done_ > records_total_) {
    return absl::FailedPreconditionError(
        StrCat(records_done_, " records done of ", records_total_, "; did the data change?"));
  }
  if (options_.job_type == proto::JOB_TRAINING) {
    int64_t finished = 0;
    for (const auto& [id, t] : finished_training_) finished += t.end() - t.start();
    if (finished != records_done_) {
      return absl::InvalidArgumentError(StrCat(records_done_, " records done but the finished",
                                               " training tasks hold ", finished));
    }
  }
  model_version_ = ledger.model_version();
  recent_loss_ = ledger.recent_loss();
  stop_reason_ = ledger.stop_reason();
  early_stopping_.Load(ledger);
  std::istringstream rng(ledger.rng_state());
  rng >> rng_;
  evaluations_taken_ = evaluations_.size();
  if (rng.fail()) return absl::InvalidArgumentError("unreadable shuffle state");
  training_seconds_before_ = ledger.training_seconds();
  // Training time goes on from the restart.
  bool trained = training_seconds_before_ > 0 || !finished_training_.empty() ||
                 std::any_of(held_.begin(), held_.end(), [](const auto& kv) {
                   return kv.second.entry.task.type() == proto::TASK_TRAINING;
                 });
  if (trained) {
    training_started_ = std::chrono::steady_clock::now();
    training_last_done_ = *training_started_;
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::master
