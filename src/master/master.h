// The master of one job, the composition root of the role. Master::Start
// assembles it from a MasterConfig (master_config.h) and its peers: it
// indexes the data into tasks, resumes the journal an earlier master of the
// job left, serves the Master service, and starts (or adopts) parameter
// servers and workers through the cluster backend. Master::Run supervises
// until the tasks are done, writes the results (trained model, merged
// predictions) and the final status, and stops everyone.
//
//   MasterConfig config = ConfigureMaster(options);
//   std::unique_ptr<Master> master = Master::Start(config, MasterPeers());
//   Status outcome = master->Run(&cancel);
#ifndef ELASTICDL_MASTER_MASTER_H_
#define ELASTICDL_MASTER_MASTER_H_

#include <grpcpp/server.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cluster/backends.h"
#include "common/clock.h"
#include "common/doorbell.h"
#include "elasticdl/status.h"
#include "master/event_log.h"
#include "master/group_publisher.h"
#include "master/job_state.h"
#include "master/master_config.h"
#include "master/master_service.h"
#include "master/observer.h"
#include "master/supervisor.h"
#include "rpc/parameter_servers.h"

namespace elasticdl::master {

// What the master reaches outside its process. The defaults are the real
// ones; tests give fakes.
struct MasterPeers {
  // Builds the cluster backend the job names (cluster::MakeBackend).
  std::function<StatusOr<std::unique_ptr<cluster::ClusterBackend>>(
      const cluster::BackendConfig&, cluster::ClusterBackend::ExitCallback)>
      make_backend = cluster::MakeBackend;
  // Reaches the job's parameter servers; empty: gRPC with the job's token.
  rpc::ConnectParameterServers connect_ps;
  // Leases, patience and cadences are measured with it. Not owned.
  const Clock* clock = Clock::Steady();
};

class Master {
 public:
  // Serving once it returns. An error when the job cannot start (data that
  // cannot be read, a journal that cannot be, no port).
  static StatusOr<std::unique_ptr<Master>> Start(MasterConfig config, MasterPeers peers);
  // Stops serving.
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Runs the job to its end: OK when it succeeded; otherwise how it failed
  // (CANCELLED once `cancel`, polled, is set; may be null). Writes
  // <job_dir>/status.pbtxt and stops the job's processes. Once.
  Status Run(const std::atomic<bool>* cancel);

  // One pass of Run's loop (supervision, the servers' group and flush, the
  // journal): tests drive a master with it. An error fails the job.
  Status Tick();

  // host:port the Master service answers on (also in <job_dir>/master.addr).
  const std::string& address() const { return address_; }
  // Whether the job resumed from an earlier master's journal.
  bool resumed() const { return resumed_; }

 private:
  Master(MasterConfig config, MasterPeers peers, bool resumed);
  // Synchronous training: the gradients still waiting for a step when
  // training ends are applied before the model is read.
  void FlushServers();
  void LogEvaluations();
  // Once the tasks are done: the results. True when they are written; an
  // error fails the job.
  StatusOr<bool> WriteResults();
  // A training job that fails once its training is done (an evaluation
  // after the last step failed, say) still writes the model it trained:
  // `failure`, saying so when it is written. One that fails before keeps
  // what it trained so far (KeepTrainingSoFar).
  Status KeepTrainedModel(const Status& failure);
  // A training job on parameter servers that fails with its training
  // unfinished (a task given up, the workers' relaunches used up; not a
  // diverged model) has the servers write a checkpoint of their values,
  // from which a new job can start (--checkpoint_dir_for_init) rather than
  // from the beginning: `failure`, saying where the newest complete one is
  // when it is newer than the initial model.
  Status KeepTrainingSoFar(const Status& failure);
  std::unique_ptr<rpc::ParameterServers> Servers(std::chrono::milliseconds timeout);

  const MasterConfig config_;
  const MasterPeers peers_;
  const bool resumed_;
  // Rung by the service's calls that change the job and by process exits:
  // the loop acts on them at once rather than at its next idle tick.
  Doorbell changes_;
  MasterService service_;
  std::string address_;
  ExitQueue exits_;
  EventLog events_;
  std::unique_ptr<cluster::ClusterBackend> backend_;
  std::unique_ptr<JobState> state_;
  // Null when the dashboard could not start (a job goes on without it).
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<Supervisor> supervisor_;
  std::optional<GroupPublisher> group_;
  // The processes were started (or adopted), or why not.
  Status launched_;
  size_t evaluations_logged_ = 0;
  Clock::time_point last_journal_write_;
  // Since when the results could not be written for want of a server.
  std::optional<Clock::time_point> results_failing_since_;
  // Last: stopped first, before what it serves goes.
  std::unique_ptr<grpc::Server> server_;
};

// The `master` command: configures the job in `options.job_dir`, runs it,
// and leaves a final status even when the job could not start.
Status RunMaster(const MasterOptions& options, const std::atomic<bool>* cancel);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_MASTER_H_
