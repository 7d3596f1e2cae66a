// Everything a master is configured with, derived from the job's spec
// (<job_dir>/job.pbtxt) and the command line in one function, so that each
// default and each rule ("evaluation needs servers only for embedding
// tables") is written once. Master::Start takes a MasterConfig; nothing
// below it reads the spec's fields again for settings.
#ifndef ELASTICDL_MASTER_MASTER_CONFIG_H_
#define ELASTICDL_MASTER_MASTER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "cluster/backends.h"
#include "common/environment.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "master/data_source.h"
#include "master/job_state.h"
#include "master/observer.h"
#include "master/supervisor.h"
#include "master/task_manager.h"
#include "rpc/job_credentials.h"

namespace elasticdl::master {

// How the master process was started: the command line's part.
struct MasterOptions {
  // The job directory holding job.pbtxt and the job's credentials.
  std::string job_dir;
  // Interface and port to serve on; port 0 picks a free one. The job's
  // --master_addr, and a resumed job's earlier address, come first.
  std::string host = "127.0.0.1";
  int port = 0;
  // The elasticdl binary the local backend starts; empty: this process's.
  std::string binary;
  // The environment the master was started in (where the Kubernetes API
  // is, the dashboard's web files, ...).
  Environment environment;
  // The client's spare fork server (`--fork_server_fd`, owned), for the
  // local backend; -1: none.
  int fork_server_fd = -1;
};

struct MasterConfig {
  // The job as the client wrote it: the results (the trained model's
  // record, the predictions' file) are described by it.
  proto::JobSpec spec;
  std::string job_dir;
  // The job's token and certificates: every RPC of the job is made and
  // served with them.
  rpc::JobCredentials credentials;
  // Where to serve (see MasterOptions).
  std::string host;
  int port = 0;
  // Records per task (minibatch size × minibatches per task).
  int64_t records_per_task = 0;
  // How the training data is cut into tasks: evenly when the workers take
  // synchronous steps (see TaskSizes).
  TaskSizes training_task_sizes = TaskSizes::kFullFirst;
  TaskManagerOptions tasks;
  // `master_address` and `job_starts_workers` are filled in by
  // Master::Start (the address is known once the server listens; the
  // backend says whether it starts the workers).
  JobStateOptions state;
  SupervisorOptions supervisor;
  // `master_address` filled in by Master::Start.
  cluster::BackendConfig backend;
  // `connect_ps` filled in by Master::Start.
  ObserverOptions observer;
  // Synchronous steps of every worker: the training group goes to the
  // parameter servers whenever it changes.
  bool publish_group = false;
  // A training job checkpoints its servers once the tasks are done (so that
  // a later job can start from the end).
  bool checkpoint_at_end = false;
  // AllreduceStrategy: the workers hold the model; the trained model is
  // the checkpoint they write when training ends.
  bool collective = false;
  // How long the results may fail to be written for want of a parameter
  // server that is registered but does not answer, before the job fails.
  std::chrono::milliseconds results_patience{std::chrono::seconds(60)};
  // How often the heartbeats' progress is written to the journal.
  std::chrono::milliseconds journal_every{500};
  // The loop supervises when a call or a process exit changes the job, at
  // most once a tick, and otherwise once an idle tick (leases lapse,
  // cadences come round).
  std::chrono::milliseconds tick{10};
  std::chrono::milliseconds idle_tick{100};
};

// The configuration of the job in `options.job_dir`: reads its spec and
// credentials (and, for an evaluation job, the trained model's record). A spec
// that cannot run is INVALID_ARGUMENT naming the flag.
StatusOr<MasterConfig> ConfigureMaster(const MasterOptions& options);
// The same from a spec at hand (tests).
StatusOr<MasterConfig> ConfigureMaster(const MasterOptions& options, const proto::JobSpec& spec,
                                       rpc::JobCredentials credentials);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MASTER_CONFIG_H_
