// Keeps a job's processes as the job wants them: starts the parameter
// servers and workers through the cluster backend, relaunches a lost
// parameter server (restoring its checkpoint) and replaces lost workers,
// takes a worker whose lease lapsed as lost, and follows scaling requests
// (starting workers, or asking the surplus to finish their minibatch and
// leave). A restarted master adopts the processes its predecessor started.
//
// Driven by the master's loop: Tick() on one thread; exits may be reported
// from any thread.
#ifndef ELASTICDL_MASTER_SUPERVISOR_H_
#define ELASTICDL_MASTER_SUPERVISOR_H_

#include <deque>
#include <mutex>
#include <set>

#include "cluster/cluster_backend.h"
#include "elasticdl/status.h"
#include "master/job_state.h"

namespace elasticdl::master {

// Exits reported by a backend's watcher thread, taken by the master's loop.
class ExitQueue {
 public:
  void Push(const cluster::ProcessExit& exit);
  std::deque<cluster::ProcessExit> TakeAll();

 private:
  std::mutex mu_;
  std::deque<cluster::ProcessExit> exits_;
};

struct SupervisorOptions {
  int num_ps = 0;
  // Replacements of workers that crashed (not of ones that left cleanly,
  // e.g. preempted with SIGTERM) the job allows.
  int max_worker_relaunches = 3;
  // Relaunches of parameter servers the job allows.
  int max_ps_relaunches = 3;
  // Where processes leave why they ended (ExitReasonFile); empty: nowhere.
  std::string job_dir;
};

class Supervisor {
 public:
  // None of the pointers is owned.
  Supervisor(SupervisorOptions options, JobState* state, cluster::ClusterBackend* backend,
             ExitQueue* exits);

  // Starts the parameter servers of a new job.
  Status StartNew();
  // A restarted master: watches the processes its predecessor started and
  // relaunches the ones that are gone.
  Status Adopt();
  // Handles exits, lapsed leases and scaling. An error fails the job.
  Status Tick();

 private:
  Status HandleExit(const cluster::ProcessExit& exit);
  Status RelaunchPs(PsId ps);
  Status StartWorker(bool relaunch);
  Status Reconcile();
  // What `process` left in its ExitReasonFile, taken (the file removed so
  // that its replacement's is its own), or "".
  std::string TakeExitReason(const cluster::ProcessName& process) const;
  // `message`, and why the last such process ended when it said.
  static std::string WithReason(std::string message, const std::string& reason);

  const SupervisorOptions options_;
  JobState* const state_;
  cluster::ClusterBackend* const backend_;
  ExitQueue* const exits_;
  // Workers whose processes run, as far as the backend has told us.
  std::set<WorkerId> running_;
  bool workers_started_ = false;
  // Crashed workers not replaced yet.
  int to_replace_ = 0;
  // Why the last crashed worker and parameter server ended, as they said.
  std::string last_worker_reason_;
  std::string last_ps_reason_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_SUPERVISOR_H_
