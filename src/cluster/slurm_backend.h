// The `slurm` cluster backend: the master, each parameter server and each
// worker is a Slurm batch job of its own, placed on whichever node Slurm
// picks, whose batch script runs the process as a one-task job step
// (`exec srun --ntasks=1 elasticdl ps|worker ...`), with its output in
// <job_dir>/logs/.
//
// Why separate jobs rather than steps of one allocation: an allocation is
// fixed when it is granted, so steps inside it could not grow the job past
// its first size; separate jobs let `elasticdl job scale` ask Slurm for more
// workers at any time, and a replacement for a worker whose node was lost
// lands on any node that is up.
//
// Why the command-line tools (sbatch, squeue, scancel) rather than
// slurmrestd: they are on every node of an ordinary Slurm cluster and find
// it the way users' own commands do (SLURM_CONF, else
// /etc/slurm/slurm.conf), with the user's munge credentials; slurmrestd is
// an optional daemon that needs its own deployment and tokens.
//
// Why a job step: the signals Slurm sends before it ends a job go to its
// steps, not to the batch script. A preempted job (PreemptMode=REQUEUE or
// CANCEL with a GraceTime) gets SIGTERM at the start of the grace time only
// in its steps; a process run by the batch script itself would hear of its
// preemption from the SIGKILL at the end of it.
//
// Exits: a watcher thread asks squeue about the job's Slurm jobs every
// `poll` and reports each that reached a final state. COMPLETED is a clean
// exit, and so is PREEMPTED (the scheduler took the CPUs back; a worker
// that got its SIGTERM in time handed its task back, and is replaced at no
// cost to the relaunch budget); FAILED, NODE_FAIL, CANCELLED by someone
// else, TIMEOUT, ... are not. Parameter servers, workers and the master of
// an attached client are submitted with --no-requeue: Slurm holds a
// requeued batch job for about two minutes before it may start again, while
// a replacement submitted by the master (or by the client, for the master)
// starts as soon as Slurm has room. A detached job's master, which no
// client watches, is submitted with --requeue (`requeue_master`).
// Signals: SIGTERM goes to the job step (`scancel --signal=TERM`), so the
// process finishes its minibatch and leaves (srun itself would end the step
// at once on a SIGTERM of its own); SIGKILL cancels the Slurm job.
#ifndef ELASTICDL_CLUSTER_SLURM_BACKEND_H_
#define ELASTICDL_CLUSTER_SLURM_BACKEND_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_backend.h"

namespace elasticdl::cluster {

struct SlurmBackendOptions {
  // The elasticdl binary, at a path every node sees.
  std::string binary;
  // The job directory (shared storage): spec, token, logs/.
  std::string job_dir;
  // host:port of the master.
  std::string master_address;
  // Names the Slurm jobs: "<job_name>-worker-3".
  std::string job_name;
  // Empty: the cluster's default partition.
  std::string partition;
  // The workers' partition (a preemptible one for a low-priority job);
  // empty: `partition`.
  std::string worker_partition;
  // Submit the master with --requeue: a detached job's master, which no
  // client starts again, is requeued by Slurm when its node fails (Slurm
  // holds it about two minutes, then it resumes from its journal on the
  // node Slurm picks). An attached client submits a new master at once.
  bool requeue_master = false;
  // CPUs requested per worker and per parameter server.
  int worker_cpus = 1;
  int ps_cpus = 1;
  std::chrono::milliseconds poll{1000};
};

// A Slurm job as squeue reports it.
struct SlurmJobState {
  std::string id;
  std::string state;   // PENDING, RUNNING, COMPLETED, NODE_FAIL, ...
  std::string reason;  // why pending, or why it ended
  std::string node;
};

// The state of each of `ids` that Slurm still knows (all states, finished
// ones included). UNAVAILABLE when squeue fails for another reason than
// unknown ids.
StatusOr<std::vector<SlurmJobState>> QuerySlurmJobs(const std::vector<std::string>& ids);
// True for the states a Slurm job does not leave.
bool SlurmStateIsFinal(const std::string& state);

// Submits `command` as a batch job that runs it as a one-task job step
// (/bin/sh expands it: `exec srun --ntasks=1 <command>`); returns its id.
// `extra` are more sbatch options. An error carries sbatch's own message
// (an unknown partition, no such account, ...).
StatusOr<std::string> SubmitSlurmJob(const std::string& name, const std::string& output,
                                     const std::string& partition, int cpus,
                                     const std::string& command,
                                     const std::vector<std::string>& extra = {});

class SlurmBackend : public ClusterBackend {
 public:
  SlurmBackend(SlurmBackendOptions options, ExitCallback on_exit);
  // Stops watching; the Slurm jobs go on (a restarted master adopts them).
  ~SlurmBackend() override;

  // <job_dir>/logs: one file per process, "<label>.log".
  std::string log_dir() const override;
  std::string Describe(const ProcessHandle& handle) const override;
  // The master as a Slurm job of one CPU; its id also goes to
  // <job_dir>/slurm_job_id.
  StatusOr<ProcessHandle> StartMaster() override;
  StatusOr<ProcessHandle> StartPs(PsId ps, const PsLaunch& launch) override;
  StatusOr<ProcessHandle> StartWorker(WorkerId worker) override;
  Status Adopt(const ProcessName& process, const ProcessHandle& handle) override;
  Status Signal(const ProcessName& process, int signal) override;
  void StopAll(std::chrono::milliseconds grace) override;

 private:
  struct Job {
    ProcessName process;
    // We cancelled it: its CANCELLED state is a clean end.
    bool cancelled = false;
  };
  // Submits `elasticdl <args>` as the Slurm job of `process`, in its role's
  // partition; only a master to be requeued is requeueable.
  StatusOr<ProcessHandle> Submit(const ProcessName& process, const std::string& args, int cpus);
  // "<role> --job_dir=... --master=...".
  std::string RoleArgs(const char* role) const;
  void Watch();
  // Reports the watched jobs that reached a final state; returns how many
  // are still watched. From any thread: each exit is reported once, by the
  // call that takes its job out of jobs_.
  size_t PollOnce();
  std::vector<std::string> Ids(const ProcessName& process);
  // Cancels the jobs, marked first as cancelled by us (a clean end).
  Status Cancel(const std::vector<std::string>& ids);

  const SlurmBackendOptions options_;
  const ExitCallback on_exit_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Job> jobs_;  // by Slurm job id
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_SLURM_BACKEND_H_
