// Goodput: where a job's worker time went (proto::WorkerSeconds). Workers
// account their own time (worker/time_account.h); the master sums the
// job's (master/worker_time.h); the client, `job status`, the dashboard and
// /metrics show the sums with these words.
#ifndef ELASTICDL_JOB_WORKER_SECONDS_H_
#define ELASTICDL_JOB_WORKER_SECONDS_H_

#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::job {

// Adds every field of `more` to `*total`.
void AddWorkerSeconds(const proto::WorkerSeconds& more, proto::WorkerSeconds* total);

// Every part of `s` with its name as /metrics and the dashboard label it
// ("startup", "trained", "step_wait", "discarded", "recovery",
// "evaluation", "lost", "between_tasks"), in that order. "between_tasks" is
// what held leaves after the others (never below 0).
std::vector<std::pair<const char*, double>> WorkerSecondsParts(const proto::WorkerSeconds& s);

// trained / held; 0 when nothing was held.
double Goodput(const proto::WorkerSeconds& s);

// One line for people: "goodput 87.3% of 412.0 worker-seconds (start-up
// 3.1%, waiting for steps 6.0%, ...)", the parts that are not zero; empty
// when nothing was held.
std::string DescribeWorkerSeconds(const proto::WorkerSeconds& s);

}  // namespace elasticdl::job

#endif  // ELASTICDL_JOB_WORKER_SECONDS_H_
