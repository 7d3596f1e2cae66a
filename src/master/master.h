// The master of one job, wired from MasterOptions (the composition root of
// the role): reads the job spec, indexes the data, serves the Master service,
// starts parameter servers and workers through the cluster backend,
// relaunches lost workers, and when the tasks are done writes the outputs
// (trained model, merged predictions) and stops everyone.
#ifndef ELASTICDL_MASTER_MASTER_H_
#define ELASTICDL_MASTER_MASTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "cluster/backends.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

struct MasterOptions {
  // The job directory holding job.pbtxt; the master writes master.addr (its
  // address) and status.pbtxt (the final status) there.
  std::string job_dir;
  // Interface and port to serve on; port 0 picks a free one.
  std::string host = "127.0.0.1";
  int port = 0;
  // The elasticdl binary the local backend starts; empty: this process's.
  std::string binary;
  // Set by a signal handler to cancel the job; polled.
  const std::atomic<bool>* cancel = nullptr;
  // Builds the cluster backend the job's spec names (cluster::MakeBackend);
  // tests inject another.
  std::function<StatusOr<std::unique_ptr<cluster::ClusterBackend>>(
      const cluster::BackendConfig&, cluster::ClusterBackend::ExitCallback)>
      make_backend = cluster::MakeBackend;
};

// Runs the job to its end. OK when it succeeded; otherwise the status says
// how it failed (CANCELLED when cancelled).
Status RunMaster(const MasterOptions& options);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MASTER_H_
