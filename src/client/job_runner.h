// Runs a prepared job from the client and follows it with a progress bar.
//
// `local` and `external` clusters: the client starts the master process (in
// its own process group, so Ctrl-C reaches only the client), stops it on
// Ctrl-C, and restarts it on the same job directory if it dies (the new
// master resumes from its journal; the job's parameter servers and workers
// carry on). The client is the job's subreaper: processes whose master died
// are reparented to it, and it reaps them. They leave by themselves when
// the client is gone too.
//
// `slurm`: the client submits the master as a Slurm batch job (which then
// submits the parameter servers and workers), relays the job's logs from
// <job_dir>/logs/, and on Ctrl-C asks the master to stop the job. Detached,
// it returns once Slurm has the job; `elasticdl job status` follows it.
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
  // "local", "external" or "slurm" (the job spec's cluster kind).
  std::string cluster = "local";
  // Slurm: the partition of the master's job; empty: the default.
  std::string partition;
  // Slurm: return once the job is submitted.
  bool detach = false;
};

// Runs the job to its end and returns its final status. The status is an
// error when the job could not run or failed (its message says why);
// CANCELLED once `*cancel` is set.
// Detached, the status is empty but for `message`, which says how to follow
// the job.
StatusOr<proto::GetJobStatusResponse> RunJob(const RunJobOptions& options);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_RUNNER_H_
