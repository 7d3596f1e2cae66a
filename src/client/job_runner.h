// Runs a prepared job on the local backend from the client: starts the
// master process (in its own process group, so Ctrl-C reaches only the
// client), prefixes its output, follows its status with a progress bar, and
// stops it on Ctrl-C. No child outlives the client.
#ifndef ELASTICDL_CLIENT_JOB_RUNNER_H_
#define ELASTICDL_CLIENT_JOB_RUNNER_H_

#include <atomic>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

// Runs the job whose spec is in `job_dir` to its end and returns its final
// status. The status is an error when the job could not run or failed (its
// message says why); CANCELLED once `*cancel` is set (polled; may be null).
StatusOr<proto::GetJobStatusResponse> RunJob(const std::string& job_dir, bool progress,
                                             const std::atomic<bool>* cancel);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_RUNNER_H_
