// The `local` cluster backend: parameter servers and workers as child
// processes of the master on this machine, their output prefixed by role
// ("[worker-1] ...") on the master's stderr. Children die with the master.
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
};

class LocalBackend : public ClusterBackend {
 public:
  // `on_exit` runs on a watcher thread for every process that ends.
  LocalBackend(LocalBackendOptions options, ExitCallback on_exit);
  ~LocalBackend() override;

  Status StartPs(int ps_id) override;
  Status StartWorker(int worker_id) override;
  void StopAll(std::chrono::milliseconds grace) override;

 private:
  Status Start(Role role, int id);

  const LocalBackendOptions options_;
  const ExitCallback on_exit_;
  LogSink sink_;
  ProcessGroup group_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_LOCAL_BACKEND_H_
