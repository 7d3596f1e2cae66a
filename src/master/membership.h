// The job's processes as the master knows them: parameter servers (each
// started, and registered at an address, or missing) and workers (started or
// joined, registered, leaving, and when last heard from: their leases), with
// the counters a job reports (relaunches, losses) and their journal form.
//
// Plain data: not thread-safe. JobState holds it under its lock and keeps the
// rules that span tasks, the training group and membership; this class keeps
// only who is there.
#ifndef ELASTICDL_MASTER_MEMBERSHIP_H_
#define ELASTICDL_MASTER_MEMBERSHIP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_backend.h"
#include "common/ids.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  // A registered worker not heard from for `lease` is taken as lost.
  Membership(int num_ps, int workers_target, std::chrono::milliseconds lease);

  // As an earlier master's journal left it; the workers it lists carry on
  // with this master, their leases starting at `now`.
  void Restore(const proto::MasterJournal& journal, Clock::time_point now);

  // Parameter servers.
  int num_ps() const { return static_cast<int>(ps_.size()); }
  // INVALID_ARGUMENT for an id the job does not have or an empty address.
  Status PsRegistered(PsId ps, const std::string& address);
  void PsStarted(PsId ps, const cluster::ProcessHandle& handle, bool relaunch);
  // Missing until it registers again.
  void PsLost(PsId ps);
  int registered_ps() const;
  bool all_ps_registered() const { return registered_ps() == num_ps(); }
  // By id; empty for a missing server.
  std::vector<std::string> ps_addresses() const;
  std::vector<std::pair<PsId, cluster::ProcessHandle>> ps_processes() const;
  int ps_relaunches() const { return ps_relaunches_; }

  // Workers.
  WorkerId NewWorkerId() { return WorkerId(next_worker_id_++); }
  void WorkerStarted(WorkerId worker, const cluster::ProcessHandle& handle, bool relaunch,
                     Clock::time_point now);
  // A worker someone else started: its new id.
  WorkerId WorkerJoined(int pid, Clock::time_point now);
  // Renews the worker's lease; FAILED_PRECONDITION for one the job does not
  // have (never started, or taken as lost).
  Status Touch(WorkerId worker, Clock::time_point now);
  // True the first time.
  bool Register(WorkerId worker);
  // False for a worker the job does not have. A worker that did not end
  // `clean` counts as a loss.
  bool Remove(WorkerId worker, bool clean);
  bool leaving(WorkerId worker) const;
  // False when it was leaving already or is unknown.
  bool AskToLeave(WorkerId worker);
  std::vector<WorkerId> ExpiredLeases(Clock::time_point now) const;
  std::vector<WorkerId> workers() const;
  // Workers that joined by themselves and are not asked to leave.
  std::vector<WorkerId> joined_workers() const;
  std::vector<std::pair<WorkerId, cluster::ProcessHandle>> worker_processes() const;
  int registered_workers() const;
  bool registered(WorkerId worker) const;
  // Milliseconds since each worker was last heard from.
  std::map<WorkerId, int64_t> silence_ms(Clock::time_point now) const;
  // ...and since this one was; nullopt for a worker the job does not have.
  std::optional<int64_t> silence_ms(WorkerId worker, Clock::time_point now) const;
  int workers_target() const { return workers_target_; }
  void set_workers_target(int target) { workers_target_ = target; }
  bool worker_relaunch_allowed(int max_relaunches) const {
    return worker_relaunches_ < max_relaunches;
  }
  int worker_losses() const { return worker_losses_; }

  // The journal: every field of MasterJournal this class owns but the
  // workers (small, written whole with every record)...
  void ScalarsTo(proto::MasterJournal* journal) const;
  // ...the workers, all of them (a snapshot)...
  void WorkersTo(proto::MasterJournal* journal);
  // ...or those that changed or went since the last write.
  void WorkerChangesTo(proto::JournalChanges* changes);

 private:
  struct Worker {
    cluster::ProcessHandle handle;
    bool registered = false;
    bool leaving = false;
    Clock::time_point last_seen;
  };
  struct Ps {
    cluster::ProcessHandle handle;
    std::string address;  // empty until registered
  };
  static proto::JournalProcess ToJournal(WorkerId id, const Worker& worker);

  const std::chrono::milliseconds lease_;
  std::vector<Ps> ps_;
  std::map<WorkerId, Worker> workers_;
  int workers_target_;
  int next_worker_id_ = 0;
  int worker_relaunches_ = 0;
  int worker_losses_ = 0;
  int ps_relaunches_ = 0;
  // The workers as the journal last recorded them.
  std::map<WorkerId, proto::JournalProcess> workers_written_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MEMBERSHIP_H_
