// What people watch while the master runs: the dashboard and the metrics
// page (a dashboard::Server over a JobView that follows the event log and
// the parameter servers' figures, asked for every few seconds on a thread of
// the observer's own) and TensorBoard's event file in <job_dir>/tensorboard
// (loss at every finished training task, every evaluation metric,
// throughput).
#ifndef ELASTICDL_MASTER_OBSERVER_H_
#define ELASTICDL_MASTER_OBSERVER_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dashboard/event_file.h"
#include "dashboard/job_view.h"
#include "dashboard/server.h"
#include "elasticdl/status.h"
#include "master/event_log.h"
#include "master/job_state.h"
#include "rpc/job_credentials.h"
#include "rpc/parameter_servers.h"

namespace elasticdl::master {

struct ObserverOptions {
  std::string job_dir;
  std::string job_name;
  // Where the dashboard listens (port 0: a free one).
  std::string host = "127.0.0.1";
  int port = 0;
  // The job's credentials: the token programs send the dashboard, the
  // certificate it serves HTTPS with.
  rpc::JobCredentials credentials;
  // The dashboard's web files; empty: dashboard::WebDir().
  std::string web_dir;
  // Reaches the parameter servers for their figures.
  rpc::ConnectParameterServers connect_ps;
  // How often the parameter servers are asked for their figures (rows,
  // bytes, checkpoints), and how long each may take to answer.
  std::chrono::milliseconds ps_stats_every = std::chrono::seconds(2);
  std::chrono::milliseconds ps_stats_timeout = std::chrono::seconds(1);
};

class Observer {
 public:
  // Follows `events` (replaying what an earlier master logged) and serves
  // the dashboard; writes <job_dir>/dashboard.url. `events` and `state`
  // must outlive the observer.
  static StatusOr<std::unique_ptr<Observer>> Start(const ObserverOptions& options, EventLog* events,
                                                   JobState* state);
  ~Observer();
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  // From the master's loop: a throughput point every few seconds.
  void Tick();
  // The training job's TensorBoard files, copied into its output directory.
  Status CopyEventFiles(const std::string& output_dir) const;
  const std::string& url() const { return server_->url(); }
  // A link that logs a person in once (dashboard::Server::NewLoginUrl).
  StatusOr<std::string> NewLoginUrl() { return server_->NewLoginUrl(); }

 private:
  Observer(const ObserverOptions& options, EventLog* events, JobState* state);
  void OnEvent(const nlohmann::json& event, bool replayed);
  // Until the observer is destroyed: the servers' figures into view_.
  void PollServers();

  const ObserverOptions options_;
  EventLog* const events_;
  JobState* const state_;
  dashboard::JobView view_;
  std::unique_ptr<dashboard::EventFile> tensorboard_;
  std::unique_ptr<dashboard::Server> server_;
  std::chrono::steady_clock::time_point last_throughput_{};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread poller_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_OBSERVER_H_
