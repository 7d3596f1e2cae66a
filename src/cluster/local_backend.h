// The `local` cluster backend: the job's processes on this machine. The
// client starts the master, which dies with it; the master starts parameter
// servers and workers, which do not die with the master: a restarted master
// adopts them (the processes leave by themselves when the master stays away
// too long). All write to `output_fd` (or the starter's stdout and stderr)
// directly, labelling their own lines ("[worker-1] ..."). The master's
// fork server forks them (the first one started also starts it).
#ifndef ELASTICDL_CLUSTER_LOCAL_BACKEND_H_
#define ELASTICDL_CLUSTER_LOCAL_BACKEND_H_

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/cluster_backend.h"
#include "cluster/fork_server.h"
#include "cluster/log_sink.h"
#include "cluster/process_group.h"

namespace elasticdl::cluster {

struct LocalBackendOptions {
  // The elasticdl binary; empty: ElasticdlBinary() (common/file.h).
  std::string binary;
  std::string job_dir;
  // host:port the processes connect to.
  std::string master_address;
  // Where parameter servers bind and advertise (the master's host).
  std::string ps_host = "127.0.0.1";
  // The processes' stdout and stderr (an OutputRelay's descriptor, which
  // outlives a master); -1: the starter's own.
  int output_fd = -1;
  // Variables set for the parameter servers and workers on top of the
  // starter's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Parameter servers and workers are forked by a fork server (see
  // cluster/fork_server.h) that loaded elasticdl-torch's libraries once,
  // rather than each exec'ing elasticdl-torch; false: each is exec'ed.
  bool fork_server = true;
  // A spare fork server's socket (owned; see StartSpareForkServer in
  // cluster/fork_server.h) for the fork server to adopt; -1: none.
  int spare_fork_server = -1;
  // > 0: the CPUs this process may run on, in order, are cut into slots of
  // this many, and each worker started takes a free slot: every thread of
  // it runs on those CPUs only (`elasticdl worker --cpus`). A worker
  // started while every slot is held runs on all of them; a slot is free
  // again when its worker ends. Parameter servers are never bound.
  int worker_cpus = 0;
};

class LocalBackend : public ClusterBackend {
 public:
  // `on_exit` runs on a watcher thread for every process that ends.
  LocalBackend(LocalBackendOptions options, ExitCallback on_exit);
  ~LocalBackend() override;

  // The master leads a process group of its own, with the processes it
  // starts; StopAll ends whatever of each master's group is left. Processes
  // of the job whose master died become children of this process (a child
  // subreaper), which reaps them.
  StatusOr<ProcessHandle> StartMaster() override;
  StatusOr<ProcessHandle> StartPs(PsId ps, const PsLaunch& launch) override;
  StatusOr<ProcessHandle> StartWorker(WorkerId worker) override;
  Status Adopt(const ProcessName& process, const ProcessHandle& handle) override;
  Status Signal(const ProcessName& process, int signal) override;
  void StopAll(std::chrono::milliseconds grace) override;

 private:
  StatusOr<ProcessHandle> Start(const ProcessName& process, std::vector<std::string> extra_args);
  std::string Binary() const;
  // The job's processes write to output_fd, or to our stdout and stderr.
  void SetOutput(ProcessSpec* spec) const;
  // A free slot's CPUs for the worker labelled `label`, marked as its;
  // empty when none is free (or workers are not bound).
  std::vector<int> TakeSlot(const std::string& label);
  void FreeSlot(const std::string& label);
  // FreeSlot with mu_ held.
  void FreeSlotLocked(const std::string& label);
  // Reaps the children of its masters' groups that are not in group_
  // (orphans of a master that died) until stopped.
  void ReapOrphans();

  const LocalBackendOptions options_;
  const ExitCallback on_exit_;
  LogSink sink_;
  // Before group_: its processes hold it, and the server outlives them.
  std::shared_ptr<ForkServer> fork_server_;
  ProcessGroup group_;
  std::mutex mu_;
  std::condition_variable stop_reaping_;
  bool stopping_ = false;
  // The process groups of the masters started.
  std::vector<pid_t> master_groups_;
  // Workers' CPU slots (LocalBackendOptions::worker_cpus), each with the
  // label of the worker holding it ("" when free; under mu_).
  struct Slot {
    std::vector<int> cpus;
    std::string holder;
  };
  std::vector<Slot> slots_;
  std::thread reaper_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_LOCAL_BACKEND_H_
