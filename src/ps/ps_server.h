// A parameter-server shard process, wired from PsServerOptions (the
// composition root of the role): reads the job spec and token, initializes
// the shard (from the first worker's model, from a checkpoint of another
// job, or, when relaunched, from its own newest checkpoint), serves the
// ParameterServer service, registers with the master, writes checkpoints in
// the background and serves until cancelled or until the master has been
// unreachable for too long.
#ifndef ELASTICDL_PS_PS_SERVER_H_
#define ELASTICDL_PS_PS_SERVER_H_

#include <chrono>
#include <string>

#include "common/stop_flag.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "ps/parameter_store.h"

namespace elasticdl::ps {

struct PsServerOptions {
  std::string job_dir;
  int ps_id = 0;
  // host:port of the master.
  std::string master_address;
  // Interface and port to serve on; port 0 picks a free one.
  std::string host = "127.0.0.1";
  int port = 0;
  // Set by the master when it relaunches a lost server: start from the
  // newest checkpoint of this shard (an error when there is none) and tell
  // the master, on registering, the version and minibatches it holds.
  bool restore = false;
  // The server exits with an error when the master has not answered for
  // this long (registering, or the liveness check every
  // `master_check_interval`). A master that comes back at the same address
  // within it is fine. Default 60 s.
  std::chrono::milliseconds master_patience{60000};
  std::chrono::milliseconds master_check_interval{1000};
  // Set (by the signal thread, say) to stop serving; the server's main
  // thread waits on it between its looks at the master.
  const StopFlag* cancel = nullptr;
};

// Serves until `cancel` is set (OK). Errors: the job spec or token cannot be
// read, no checkpoint to restore, a checkpoint to initialize from cannot be
// read or does not fit, the port cannot be bound, the master refuses the
// registration or cannot be reached for `master_patience`.
Status RunPsServer(const PsServerOptions& options);

// The store of shard `ps_id` as the job's parameter-server settings say:
// the optimizer, the update rule, the checkpoint cadence.
StatusOr<ParameterStoreOptions> StoreOptionsOf(const proto::PsSpec& spec,
                                               const proto::OptimizerConfig& optimizer, int ps_id);

// The checkpoint directory of a job: spec.checkpoint_dir(), or
// `<job_dir>/checkpoints` when that is empty.
std::string CheckpointDirOf(const proto::PsSpec& spec, const std::string& job_dir);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PS_SERVER_H_
