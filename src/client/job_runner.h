// Runs a prepared job on the local backend from the client: starts the
// master process (in its own process group, so Ctrl-C reaches only the
// client), follows its status with a progress bar, stops it on Ctrl-C, and
// restarts it on the same job directory if it dies (the new master resumes
// from its journal; the job's parameter servers and workers carry on).
//
// The client is the job's subreaper: processes whose master died are
// reparented to it, and it reaps them. They leave by themselves when the
// client is gone too.
#ifndef ELASTICDL_CLIENT_JOB_RUNNER_H_
#define ELASTICDL_CLIENT_JOB_RUNNER_H_

#include <atomic>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

struct RunJobOptions {
  // Holds job.pbtxt and the job's token.
  std::string job_dir;
  // Show a progress bar on stderr.
  bool progress = true;
  // Set to stop the job (polled; may be null).
  const std::atomic<bool>* cancel = nullptr;
  // Restarts of a master that died (killed, crashed) before the job fails.
  int max_master_restarts = 3;
};

// Runs the job to its end and returns its final status. The status is an
// error when the job could not run or failed (its message says why);
// CANCELLED once `*cancel` is set.
StatusOr<proto::GetJobStatusResponse> RunJob(const RunJobOptions& options);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_RUNNER_H_
