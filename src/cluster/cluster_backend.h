// Where a job's processes run. The client asks a backend for the master,
// the master asks one of its own for parameter servers and workers, and
// both hear back when a process ends; `local` (processes on this machine)
// is the default.
#ifndef ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
#define ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

enum class Role { kMaster, kPs, kWorker };

// One process of a job, by role and id: the master, parameter server 2,
// worker 7. Its label ("master", "ps-2", "worker-7") names it in logs, in
// Slurm job and pod names, and in the local backend's process table.
class ProcessName {
 public:
  static ProcessName Master() { return ProcessName(Role::kMaster, 0); }
  static ProcessName Ps(PsId id) { return ProcessName(Role::kPs, id.value()); }
  static ProcessName Worker(WorkerId id) { return ProcessName(Role::kWorker, id.value()); }
  // The inverse of label(); nullopt for anything else.
  static std::optional<ProcessName> Parse(std::string_view label);

  Role role() const { return role_; }
  // The id within the role; only for that role.
  PsId ps() const;
  WorkerId worker() const;
  // The number after the role in the label (0 for the master).
  int32_t index() const { return index_; }
  std::string label() const;

  friend bool operator==(const ProcessName& a, const ProcessName& b) {
    return a.role_ == b.role_ && a.index_ == b.index_;
  }
  friend bool operator!=(const ProcessName& a, const ProcessName& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const ProcessName& p) {
    return os << p.label();
  }

 private:
  ProcessName(Role role, int32_t index) : role_(role), index_(index) {}

  Role role_;
  int32_t index_;
};

// A process of the job has ended. `ok` is a clean exit (code 0);
// `description` says how it ended ("exit code 1", "killed by SIGKILL").
struct ProcessExit {
  ProcessName process = ProcessName::Master();
  bool ok = false;
  std::string description;
  // Someone ended it on purpose (`scancel` of its Slurm job), rather than
  // a failure (a crash, a lost node): a master that ends so is not started
  // again.
  bool cancelled = false;
  // The cluster ended it (Slurm's PREEMPTED), `ok` whatever it was doing;
  // otherwise an `ok` process exited by itself.
  bool preempted = false;
};

// Names one started process for good, so that a restarted master can find
// it again: pid and start time on the local backend, the Slurm job id on
// Slurm. A worker that joined by itself (`elasticdl worker --master=...`)
// has no handle a backend can use: `joined`.
struct ProcessHandle {
  int pid = 0;
  uint64_t start_time = 0;
  std::string backend_id;
  bool joined = false;
};

// How to start a parameter server.
struct PsLaunch {
  // Restore the shard's newest checkpoint (a relaunch after a failure).
  bool restore = false;
};

// Where the job's processes run: `local` (processes on the master's
// machine), `slurm` (Slurm jobs on the nodes Slurm picks), `kubernetes`
// (a pod per process, exits from a watch on pod events) and `external`
// (parameter servers on the master's machine; workers started by someone
// else join by themselves). The master holds one, chosen by the job's
// ClusterSpec (cluster/backends.h), and never asks which kind it is: a new
// engine is one more implementation.
//
// Processes started by a backend outlive the master that asked for them, so
// that a restarted master can carry on with them (Adopt). Exits are
// reported through the ExitCallback the backend was built with, from any
// thread; a process that is not known to have ended counts as running.
class ClusterBackend {
 public:
  using ExitCallback = std::function<void(const ProcessExit&)>;
  virtual ~ClusterBackend() = default;

  // False where workers are started by someone else (`external`): the
  // master then waits for them to join.
  virtual bool starts_workers() const { return true; }
  // Where the processes write their output, one file each, when not to the
  // starter's own output (Slurm: <job_dir>/logs); the client follows them.
  virtual std::string log_dir() const { return {}; }

  // Names a started process for people: "pid 1234", "Slurm job 17".
  virtual std::string Describe(const ProcessHandle& handle) const;

  // Starts the job's master (the client asks). Its exit is reported as
  // ProcessName::Master(), and Signal(ProcessName::Master(), ...) reaches it.
  virtual StatusOr<ProcessHandle> StartMaster() = 0;

  // Starts parameter server `ps` / worker `worker` of the job. The process
  // connects to the master by itself.
  virtual StatusOr<ProcessHandle> StartPs(PsId ps, const PsLaunch& launch) = 0;
  virtual StatusOr<ProcessHandle> StartWorker(WorkerId worker) = 0;
  // Watches a process that an earlier master of the job started. NOT_FOUND
  // when it is gone.
  virtual Status Adopt(const ProcessName& process, const ProcessHandle& handle) = 0;
  // Sends SIGTERM (graceful: finish the minibatch, report, exit) or SIGKILL
  // (the backend's way of ending a process at once).
  virtual Status Signal(const ProcessName& process, int signal) = 0;
  // Asks every process to stop (SIGTERM or the backend's equivalent) and
  // forces the ones still running after `grace`. Blocks until all are gone.
  virtual void StopAll(std::chrono::milliseconds grace) = 0;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
