// Runs a prepared job from the client and follows it with a progress bar.
//
// The client builds the job's cluster backend from the spec
// (cluster/backends.h) and asks it for the master: a process in a group of
// its own on this machine (`local`, `external`; the client is then the
// job's subreaper, reaping processes whose master died), or a Slurm batch
// job (`slurm`). The master starts the rest through a backend of its own.
// The client relays the job's output (written to it directly, or to the
// backend's log files, which it follows), asks the master to stop on
// Ctrl-C, and starts it again on the same job directory if it died without
// a final status, where the backend allows (the new master resumes from
// its journal; the job's parameter servers and workers carry on).
// Detached, it returns once the master is started; `elasticdl job status`
// follows the job.
#ifndef ELASTICDL_CLIENT_JOB_RUNNER_H_
#define ELASTICDL_CLIENT_JOB_RUNNER_H_

#include <atomic>
#include <string>

#include "elasticdl/api.h"
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
  // Return once the master is started.
  bool detach = false;
  // Where the job's output (the client's lines and every process's) goes,
  // appended; empty: stderr.
  std::string log_file;
};

// Runs the job to its end and returns its final status. The status is an
// error when the job could not run or failed (its message says why);
// CANCELLED once `*cancel` is set.
// Detached, the status is empty but for `message`, which says how to follow
// the job.
StatusOr<proto::GetJobStatusResponse> RunJob(const RunJobOptions& options);

// RunJob, its final status summed up as the library API reports it.
StatusOr<JobResult> RunJobToResult(const RunJobOptions& options);

// Train's preparation: checks `args`, creates the job directory, snapshots
// and builds the zoo, checks the model's entries and writes the job spec
// and token. RunJob then runs it (again, on the same directory, after the
// client died: the master resumes from its journal).
StatusOr<proto::JobSpec> PrepareTraining(const JobArgs& args);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_RUNNER_H_
