// A worker that someone else started (by hand, mpirun, srun, a scheduler)
// joins a running job: `elasticdl worker --master=HOST:PORT
// --credentials_file=FILE`. It calls with the job's certificate and token
// (rpc/job_credentials.h), gets its worker id and
// the job directory from the master, and checks that this host sees the job
// directory and the job's data (they live on storage every host shares).
#ifndef ELASTICDL_WORKER_JOIN_H_
#define ELASTICDL_WORKER_JOIN_H_

#include <chrono>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::worker {

struct JoinOptions {
  // host:port of the master.
  std::string master_address;
  // The job's credentials file (a copy of <job_dir>/credentials).
  std::string credentials_file;
  // How long to keep trying to reach the master.
  std::chrono::milliseconds wait_for_master{60000};
};

struct JoinedJob {
  int worker_id = 0;
  std::string job_dir;
};

// UNAVAILABLE (naming the address) when the master cannot be reached in
// time; UNAUTHENTICATED when it refuses the credentials; FAILED_PRECONDITION when
// the job directory or a data path cannot be read on this host.
StatusOr<JoinedJob> JoinJob(const JoinOptions& options);

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_JOIN_H_
