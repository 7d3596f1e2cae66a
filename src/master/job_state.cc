#include "master/job_state.h"

#include <algorithm>

#include "common/strings.h"

namespace elasticdl::master {

JobState::JobState(proto::JobType type, int num_ps, TaskManager tasks)
    : type_(type), tasks_(std::move(tasks)), ps_addresses_(num_ps) {
  samples_.emplace_back(std::chrono::steady_clock::now(), 0);
}

Status JobState::RegisterPs(const proto::RegisterPsRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request.ps_id() < 0 || request.ps_id() >= static_cast<int>(ps_addresses_.size())) {
    return absl::InvalidArgumentError(StrCat("unknown parameter server id ", request.ps_id(),
                                             "; the job has ", ps_addresses_.size()));
  }
  if (request.address().empty()) return absl::InvalidArgumentError("empty address");
  ps_addresses_[request.ps_id()] = request.address();
  return absl::OkStatus();
}

Status JobState::RegisterWorker(const proto::RegisterWorkerRequest& request,
                                proto::RegisterWorkerResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t registered = std::count_if(ps_addresses_.begin(), ps_addresses_.end(),
                                    [](const std::string& a) { return !a.empty(); });
  if (registered < ps_addresses_.size()) {
    return absl::UnavailableError(StrCat("waiting for parameter servers (", registered, " of ",
                                         ps_addresses_.size(), " registered)"));
  }
  workers_.insert(request.worker_id());
  for (const std::string& a : ps_addresses_) response->add_ps_addresses(a);
  return absl::OkStatus();
}

Status JobState::CheckWorker(WorkerId worker) const {
  if (workers_.count(worker) == 0) {
    return absl::FailedPreconditionError(StrCat("worker ", worker, " is not registered"));
  }
  return absl::OkStatus();
}

Status JobState::GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(CheckWorker(request.worker_id()));
  if (failure_) {
    response->mutable_task()->set_type(proto::TASK_NONE);
    return absl::OkStatus();
  }
  *response->mutable_task() = tasks_.Next(request.worker_id());
  return absl::OkStatus();
}

Status JobState::ReportTask(const proto::ReportTaskRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(CheckWorker(request.worker_id()));
  if (!tasks_.Report(request.worker_id(), request)) {
    return absl::FailedPreconditionError(
        StrCat("worker ", request.worker_id(), " does not hold task ", request.task_id()));
  }
  samples_.emplace_back(std::chrono::steady_clock::now(), tasks_.records_done());
  while (samples_.size() > 2 &&
         samples_.back().first - samples_[1].first > std::chrono::seconds(10)) {
    samples_.pop_front();
  }
  return absl::OkStatus();
}

double JobState::ThroughputLocked() {
  if (samples_.size() < 2) return 0;
  double seconds =
      std::chrono::duration<double>(samples_.back().first - samples_.front().first).count();
  return seconds > 0 ? (samples_.back().second - samples_.front().second) / seconds : 0;
}

void JobState::GetStatus(proto::GetJobStatusResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  response->set_type(type_);
  response->set_epoch(std::max<int64_t>(tasks_.epoch(), 0));
  response->set_num_epochs(tasks_.num_epochs());
  response->set_records_done(tasks_.records_done());
  response->set_records_total(tasks_.records_total());
  response->set_model_version(tasks_.model_version());
  response->set_recent_loss(tasks_.recent_loss());
  response->set_training_seconds(tasks_.training_seconds());
  response->set_records_per_second(ThroughputLocked());
  response->set_workers_alive(static_cast<int>(workers_.size()));
  bool failed = failure_.has_value() || tasks_.failure().has_value();
  response->set_finished(failed || tasks_.finished());
  response->set_failed(failed);
  if (failure_) {
    response->set_message(*failure_);
  } else if (tasks_.failure()) {
    response->set_message(*tasks_.failure());
  }
  if (!tasks_.evaluations().empty()) {
    const Evaluation& ev = tasks_.evaluations().back();
    response->set_eval_model_version(ev.model_version);
    for (const auto& [name, value] : ev.metrics) (*response->mutable_eval_metrics())[name] = value;
  }
}

int JobState::WorkerLost(WorkerId worker) {
  std::lock_guard<std::mutex> lock(mu_);
  workers_.erase(worker);
  return tasks_.RecoverWorker(worker);
}

void JobState::Fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_ && !tasks_.finished()) failure_ = message;
}

bool JobState::all_ps_registered() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::none_of(ps_addresses_.begin(), ps_addresses_.end(),
                      [](const std::string& a) { return a.empty(); });
}

std::vector<std::string> JobState::ps_addresses() {
  std::lock_guard<std::mutex> lock(mu_);
  return ps_addresses_;
}

bool JobState::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.has_value() || tasks_.finished();
}

std::optional<std::string> JobState::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_ ? failure_ : tasks_.failure();
}

std::vector<Evaluation> JobState::evaluations() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.evaluations();
}

std::vector<std::pair<Range, TaskId>> JobState::prediction_tasks() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.prediction_tasks();
}

int64_t JobState::model_version() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.model_version();
}

std::pair<int64_t, int64_t> JobState::progress() {
  std::lock_guard<std::mutex> lock(mu_);
  return {tasks_.records_done(), tasks_.records_total()};
}

}  // namespace elasticdl::master
