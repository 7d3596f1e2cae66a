// A parameter-server shard process, wired from PsServerOptions (the
// composition root of the role): reads the job spec, serves the
// ParameterServer service, registers its address with the master and serves
// until cancelled.
#ifndef ELASTICDL_PS_PS_SERVER_H_
#define ELASTICDL_PS_PS_SERVER_H_

#include <atomic>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::ps {

struct PsServerOptions {
  std::string job_dir;
  int ps_id = 0;
  // host:port of the master.
  std::string master_address;
  // Interface and port to serve on; port 0 picks a free one.
  std::string host = "127.0.0.1";
  int port = 0;
  // Set (by a signal handler) to stop serving; polled.
  const std::atomic<bool>* cancel = nullptr;
};

// Serves until `cancel` is set. Errors: the job spec cannot be read, the
// port cannot be bound, the master cannot be reached.
Status RunPsServer(const PsServerOptions& options);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PS_SERVER_H_
