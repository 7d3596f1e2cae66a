// Where a job's parameter servers and workers run. The master asks its
// backend for processes and hears back when one ends; `local` (processes on
// this machine) is the default.
#ifndef ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
#define ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_

#include <chrono>
#include <functional>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::cluster {

enum class Role { kPs, kWorker };

// A process of the job has ended. `ok` is a clean exit (code 0);
// `description` says how it ended ("exit code 1", "killed by SIGKILL").
struct ProcessExit {
  Role role = Role::kWorker;
  int id = 0;
  bool ok = false;
  std::string description;
};

class ClusterBackend {
 public:
  using ExitCallback = std::function<void(const ProcessExit&)>;
  virtual ~ClusterBackend() = default;

  // Starts parameter server `ps_id` / worker `worker_id` of the job. The
  // process connects to the master by itself.
  virtual Status StartPs(int ps_id) = 0;
  virtual Status StartWorker(int worker_id) = 0;
  // Asks every process to stop (SIGTERM or the backend's equivalent) and
  // forces the ones still running after `grace`. Blocks until all are gone.
  virtual void StopAll(std::chrono::milliseconds grace) = 0;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_CLUSTER_BACKEND_H_
