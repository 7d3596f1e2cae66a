#include "master/membership.h"

#include <algorithm>

#include "common/strings.h"

namespace elasticdl::master {
namespace {

proto::JournalProcess ProcessToJournal(int id, const cluster::ProcessHandle& handle) {
  proto::JournalProcess p;
  p.set_id(id);
  p.set_pid(handle.pid);
  p.set_start_time(handle.start_time);
  p.set_backend_id(handle.backend_id);
  p.set_joined(handle.joined);
  return p;
}

cluster::ProcessHandle ProcessFromJournal(const proto::JournalProcess& p) {
  cluster::ProcessHandle handle;
  handle.pid = p.pid();
  handle.start_time = p.start_time();
  handle.backend_id = p.backend_id();
  handle.joined = p.joined();
  return handle;
}

bool SameProcess(const proto::JournalProcess& a, const proto::JournalProcess& b) {
  return a.id() == b.id() && a.pid() == b.pid() && a.start_time() == b.start_time() &&
         a.address() == b.address() && a.leaving() == b.leaving() && a.joined() == b.joined() &&
         a.backend_id() == b.backend_id();
}

int64_t MillisecondsSince(Membership::Clock::time_point then, Membership::Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - then).count();
}

}  // namespace

Membership::Membership(int num_ps, int workers_target, std::chrono::milliseconds lease)
    : lease_(lease),
      ps_(static_cast<size_t>(std::max(num_ps, 0))),
      workers_target_(workers_target) {}

void Membership::Restore(const proto::MasterJournal& journal, Clock::time_point now) {
  for (const proto::JournalProcess& p : journal.ps()) {
    if (p.id() < 0 || p.id() >= num_ps()) continue;  // the journal of a job with more servers
    ps_[p.id()].handle = ProcessFromJournal(p);
    ps_[p.id()].address = p.address();
  }
  for (const proto::JournalProcess& p : journal.workers()) {
    Worker& w = workers_[WorkerId(p.id())];
    w.handle = ProcessFromJournal(p);
    w.leaving = p.leaving();
    w.registered = true;
    w.last_seen = now;
  }
  next_worker_id_ = journal.next_worker_id();
  workers_target_ = journal.workers_target();
  worker_relaunches_ = journal.worker_relaunches();
  worker_losses_ = journal.worker_losses();
  ps_relaunches_ = journal.ps_relaunches();
}

Status Membership::PsRegistered(PsId ps, const std::string& address) {
  if (ps.value() < 0 || ps.value() >= num_ps()) {
    return absl::InvalidArgumentError(
        StrCat("unknown parameter server id ", ps.value(), "; the job has ", num_ps()));
  }
  if (address.empty()) return absl::InvalidArgumentError("empty address");
  ps_[ps.value()].address = address;
  return absl::OkStatus();
}

void Membership::PsStarted(PsId ps, const cluster::ProcessHandle& handle, bool relaunch) {
  ps_.at(ps.value()).handle = handle;
  if (relaunch) ++ps_relaunches_;
}

void Membership::PsLost(PsId ps) { ps_.at(ps.value()) = Ps(); }

int Membership::registered_ps() const {
  return static_cast<int>(
      std::count_if(ps_.begin(), ps_.end(), [](const Ps& p) { return !p.address.empty(); }));
}

std::vector<std::string> Membership::ps_addresses() const {
  std::vector<std::string> out;
  out.reserve(ps_.size());
  for (const Ps& p : ps_) out.push_back(p.address);
  return out;
}

std::vector<std::pair<PsId, cluster::ProcessHandle>> Membership::ps_processes() const {
  std::vector<std::pair<PsId, cluster::ProcessHandle>> out;
  out.reserve(ps_.size());
  for (size_t i = 0; i < ps_.size(); ++i)
    out.emplace_back(PsId(static_cast<int>(i)), ps_[i].handle);
  return out;
}

void Membership::WorkerStarted(WorkerId worker, const cluster::ProcessHandle& handle, bool relaunch,
                               Clock::time_point now) {
  Worker& w = workers_[worker];
  w.handle = handle;
  w.last_seen = now;
  if (relaunch) ++worker_relaunches_;
}

WorkerId Membership::WorkerJoined(int pid, Clock::time_point now) {
  const WorkerId id = NewWorkerId();
  Worker& w = workers_[id];
  w.handle.joined = true;
  w.handle.pid = pid;
  w.last_seen = now;
  return id;
}

Status Membership::Touch(WorkerId worker, Clock::time_point now) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) {
    return absl::FailedPreconditionError(StrCat(
        "worker ", worker.value(), " is not a worker of this job (unknown or taken as lost)"));
  }
  it->second.last_seen = now;
  return absl::OkStatus();
}

bool Membership::Register(WorkerId worker) {
  Worker& w = workers_.at(worker);
  return !std::exchange(w.registered, true);
}

bool Membership::Remove(WorkerId worker, bool clean) {
  if (workers_.erase(worker) == 0) return false;
  if (!clean) ++worker_losses_;
  return true;
}

bool Membership::leaving(WorkerId worker) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.leaving;
}

bool Membership::AskToLeave(WorkerId worker) {
  auto it = workers_.find(worker);
  if (it == workers_.end() || it->second.leaving) return false;
  it->second.leaving = true;
  return true;
}

std::vector<WorkerId> Membership::ExpiredLeases(Clock::time_point now) const {
  std::vector<WorkerId> expired;
  for (const auto& [id, w] : workers_) {
    if (w.registered && now - w.last_seen > lease_) expired.push_back(id);
  }
  return expired;
}

std::vector<WorkerId> Membership::workers() const {
  std::vector<WorkerId> ids;
  ids.reserve(workers_.size());
  for (const auto& entry : workers_) ids.push_back(entry.first);
  return ids;
}

std::vector<WorkerId> Membership::joined_workers() const {
  std::vector<WorkerId> ids;
  for (const auto& [id, w] : workers_) {
    if (w.handle.joined && !w.leaving) ids.push_back(id);
  }
  return ids;
}

std::vector<std::pair<WorkerId, cluster::ProcessHandle>> Membership::worker_processes() const {
  std::vector<std::pair<WorkerId, cluster::ProcessHandle>> out;
  out.reserve(workers_.size());
  for (const auto& [id, w] : workers_) out.emplace_back(id, w.handle);
  return out;
}

int Membership::registered_workers() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const auto& w) { return w.second.registered; }));
}

bool Membership::registered(WorkerId worker) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.registered;
}

std::map<WorkerId, int64_t> Membership::silence_ms(Clock::time_point now) const {
  std::map<WorkerId, int64_t> out;
  for (const auto& [id, w] : workers_) {
    out[id] = MillisecondsSince(w.last_seen, now);
  }
  return out;
}

std::optional<int64_t> Membership::silence_ms(WorkerId worker, Clock::time_point now) const {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return MillisecondsSince(it->second.last_seen, now);
}

proto::JournalProcess Membership::ToJournal(WorkerId id, const Worker& worker) {
  proto::JournalProcess p = ProcessToJournal(id.value(), worker.handle);
  p.set_leaving(worker.leaving);
  return p;
}

void Membership::ScalarsTo(proto::MasterJournal* journal) const {
  for (size_t i = 0; i < ps_.size(); ++i) {
    proto::JournalProcess* p = journal->add_ps();
    *p = ProcessToJournal(static_cast<int>(i), ps_[i].handle);
    p->set_address(ps_[i].address);
  }
  journal->set_next_worker_id(next_worker_id_);
  journal->set_workers_target(workers_target_);
  journal->set_worker_relaunches(worker_relaunches_);
  journal->set_worker_losses(worker_losses_);
  journal->set_ps_relaunches(ps_relaunches_);
}

void Membership::WorkersTo(proto::MasterJournal* journal) {
  workers_written_.clear();
  for (const auto& [id, w] : workers_) {
    *journal->add_workers() = workers_written_[id] = ToJournal(id, w);
  }
}

void Membership::WorkerChangesTo(proto::JournalChanges* changes) {
  for (auto it = workers_written_.begin(); it != workers_written_.end();) {
    if (workers_.count(it->first) != 0) {
      ++it;
      continue;
    }
    changes->add_workers_gone(it->first.value());
    it = workers_written_.erase(it);
  }
  for (const auto& [id, w] : workers_) {
    proto::JournalProcess p = ToJournal(id, w);
    auto [it, added] = workers_written_.try_emplace(id, p);
    if (!added) {
      if (SameProcess(it->second, p)) continue;
      it->second = p;
    }
    *changes->add_workers() = std::move(p);
  }
}

}  // namespace elasticdl::master
