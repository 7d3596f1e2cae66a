// Where a job's parameter servers and workers run. The master asks its
// backend for processes and hears back when one ends; `local` (processes on
// this machine) is the default.
#ifndef ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
#define ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::cluster {

enum class Role { kPs, kWorker };

// "ps-0", "worker-3".
std::string RoleLabel(Role role, int id);

// A process of the job has ended. `ok` is a clean exit (code 0);
// `description` says how it ended ("exit code 1", "killed by SIGKILL").
struct ProcessExit {
  Role role = Role::kWorker;
  int id = 0;
  bool ok = false;
  std::string description;
};

// Names one started process for good, so that a restarted master can find
// it again (pid and start time on the local backend).
struct ProcessHandle {
  int pid = 0;
  uint64_t start_time = 0;
};

// How to start a parameter server.
struct PsLaunch {
  // Restore the shard's newest checkpoint (a relaunch after a failure).
  bool restore = false;
};

// Processes started by a backend outlive the master that asked for them, so
// that a restarted master can carry on with them (Adopt).
class ClusterBackend {
 public:
  using ExitCallback = std::function<void(const ProcessExit&)>;
  virtual ~ClusterBackend() = default;

  // Starts parameter server `ps_id` / worker `worker_id` of the job. The
  // process connects to the master by itself.
  virtual StatusOr<ProcessHandle> StartPs(int ps_id, const PsLaunch& launch) = 0;
  virtual StatusOr<ProcessHandle> StartWorker(int worker_id) = 0;
  // Watches a process that an earlier master of the job started. NOT_FOUND
  // when it is gone.
  virtual Status Adopt(Role role, int id, const ProcessHandle& handle) = 0;
  // Sends SIGTERM (graceful: finish the minibatch, report, exit) or SIGKILL.
  virtual Status Signal(Role role, int id, int signal) = 0;
  // Asks every process to stop (SIGTERM or the backend's equivalent) and
  // forces the ones still running after `grace`. Blocks until all are gone.
  virtual void StopAll(std::chrono::milliseconds grace) = 0;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
