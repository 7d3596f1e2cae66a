// The `local` cluster backend: parameter servers and workers as processes
// on this machine, started by the master. They write to the master's stdout
// and stderr directly, labelling their own lines ("[worker-1] ..."), and do
// not die with the master: a restarted master adopts them (the processes
// leave by themselves when the master stays away too long).
#ifndef ELASTICDL_CLUSTER_LOCAL_BACKEND_H_
#define ELASTICDL_CLUSTER_LOCAL_BACKEND_H_

#include <memory>
#include <string>

#include "cluster/cluster_backend.h"
#include "cluster/log_sink.h"
#include "cluster/process_group.h"

namespace elasticdl::cluster {

struct LocalBackendOptions {
  // The elasticdl binary; empty: the running one (/proc/self/exe).
  std::string binary;
  std::string job_dir;
  // host:port the processes connect to.
  std::string master_address;
  // Where parameter servers bind and advertise (the master's host).
  std::string ps_host = "127.0.0.1";
};

class LocalBackend : public ClusterBackend {
 public:
  // `on_exit` runs on a watcher thread for every process that ends.
  LocalBackend(LocalBackendOptions options, ExitCallback on_exit);
  ~LocalBackend() override;

  StatusOr<ProcessHandle> StartPs(int ps_id, const PsLaunch& launch) override;
  StatusOr<ProcessHandle> StartWorker(int worker_id) override;
  Status Adopt(Role role, int id, const ProcessHandle& handle) override;
  Status Signal(Role role, int id, int signal) override;
  void StopAll(std::chrono::milliseconds grace) override;

 private:
  StatusOr<ProcessHandle> Start(Role role, int id, std::vector<std::string> extra_args);

  const LocalBackendOptions options_;
  const ExitCallback on_exit_;
  LogSink sink_;
  ProcessGroup group_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_LOCAL_BACKEND_H_
