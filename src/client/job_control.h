// Commands on a running job: find it, ask its master how it is doing,
// scale its workers.
#ifndef ELASTICDL_CLIENT_JOB_CONTROL_H_
#define ELASTICDL_CLIENT_JOB_CONTROL_H_

#include <chrono>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

// The directory of job `job`: `job` itself when it is a job directory, else
// the newest job of that name under $TMPDIR/elasticdl-jobs-$UID (where jobs
// without --job_dir live). NOT_FOUND naming both places otherwise.
StatusOr<std::string> FindJobDir(const std::string& job);

// The status the master of the job in `job_dir` left when the job ended
// (<job_dir>/status.pbtxt); NOT_FOUND while it runs.
StatusOr<proto::GetJobStatusResponse> ReadFinalStatus(const std::string& job_dir);

// The job's status: the final one once it ended, else from its master.
StatusOr<proto::GetJobStatusResponse> GetJobStatus(
    const std::string& job_dir, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Asks the job's master to run `num_workers` workers: new ones start and
// pull the current model; surplus ones finish their minibatch, hand back
// the rest of their task and leave.
Status ScaleJob(const std::string& job_dir, int num_workers,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

// A new link to the running job's dashboard, good for one login (the
// master's DashboardLogin); NOT_FOUND when the job has no dashboard.
StatusOr<std::string> DashboardLoginUrl(
    const std::string& job_dir, std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_CONTROL_H_
