// What the dashboard and the metrics page show of one job: its event log
// (<job_dir>/events.jsonl, see master/event_log.h) folded into curves, a
// table of processes, task counts and a timeline, beside the job's status.
//
// The same view serves a running job (the master applies each event as it
// is logged, and the status comes from its live state) and a job that has
// ended (`elasticdl dashboard JOB_DIR` replays the log and reads
// status.pbtxt).
//
// Thread-safe.
#ifndef ELASTICDL_DASHBOARD_JOB_VIEW_H_
#define ELASTICDL_DASHBOARD_JOB_VIEW_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::dashboard {

// The job's status as the JSON API gives it (GetJobStatusResponse with its
// field names; numbers as numbers).
nlohmann::json StatusToJson(const proto::GetJobStatusResponse& status);

// A histogram of LatencyBounds() as the event log keeps it: {"count": n,
// "sum": seconds, "counts": [one per bucket]}; nullopt from JSON that is not
// one.
nlohmann::json LatencyHistogramToJson(const Histogram& h);
std::optional<Histogram> LatencyHistogramFromJson(const nlohmann::json& j);

struct JobViewOptions {
  std::string job_name;
  // The newest events and curve points kept (older ones are dropped from
  // the view, never from the event log).
  size_t max_events = 20000;
  size_t max_points = 20000;
};

class JobView {
 public:
  // The job's status now: a StatusToJson object, optionally with "tasks"
  // ({"todo": n, "doing": n}) and "leases" ({"<worker>": milliseconds since
  // it was last heard from}). Called for every page and scrape; may be empty.
  using StatusSource = std::function<nlohmann::json()>;

  JobView(JobViewOptions options, StatusSource status);

  // One event-log object ({"t": ..., "event": ..., ...}). Unknown events
  // only join the timeline. A finished task's "rpc_seconds" ({call:
  // LatencyHistogramToJson}) add to the workers' call latencies.
  void Apply(const nlohmann::json& event);
  // What parameter server `ps` reported last (its rows, bytes and
  // checkpoints); replaces the earlier report.
  void SetServerStats(int ps, const proto::PsStatsResponse& stats);

  // GET /api/job: {"job", "status", "summary", "tasks", "workers", "ps"}.
  nlohmann::json Job(double now) const;
  // GET /api/curves?since=N: loss points (t, version, loss) from the N-th
  // on, and every evaluation ({t, version, metrics}); "next" is the N of
  // the following request.
  nlohmann::json Curves(size_t since) const;
  // GET /api/events?since=N: the timeline from the N-th event on.
  nlohmann::json Events(size_t since) const;
  // GET /metrics: the Prometheus text exposition format.
  std::string Metrics(double now) const;

 private:
  struct Process {
    // "starting", "running", "leaving", "left", "lost"; "ended" when the
    // job ended with it running.
    std::string state;
    int pid = 0;
    std::string host;
    std::string address;
    int64_t task = -1;  // the task it works on; -1: none
    int64_t tasks_done = 0;
    int restarts = 0;  // parameter servers: relaunches
    bool relaunch = false;
    double started = 0;
    double changed = 0;
    std::string how;  // how it was lost
  };
  struct LossPoint {
    double t;
    int64_t version;
    double loss;
  };

  nlohmann::json SummaryLocked(const nlohmann::json& status, double now) const;
  static nlohmann::json ProcessJson(int id, const Process& p);

  const JobViewOptions options_;
  const StatusSource status_;
  mutable std::mutex mu_;
  std::string host_;
  double first_t_ = 0;
  double last_t_ = 0;
  double finished_t_ = 0;
  std::map<int, Process> workers_;
  std::map<int, Process> ps_;
  // Task counts from the log.
  int64_t dispatched_ = 0;
  int64_t redispatched_ = 0;
  int64_t done_ = 0;
  int64_t failed_ = 0;
  int64_t stopped_ = 0;
  int64_t nonfinite_ = 0;
  int64_t worker_losses_ = 0;
  int64_t worker_relaunches_ = 0;
  int64_t ps_losses_ = 0;
  int64_t master_starts_ = 0;
  // Task durations (dispatch to done), seconds.
  std::map<int64_t, double> dispatched_at_;
  Histogram task_seconds_;
  // The workers' calls to the parameter servers, by call.
  std::map<std::string, Histogram> rpc_seconds_;
  std::map<int, proto::PsStatsResponse> ps_stats_;
  std::vector<LossPoint> loss_;
  size_t loss_dropped_ = 0;
  std::vector<nlohmann::json> evaluations_;
  std::vector<nlohmann::json> timeline_;
  size_t timeline_dropped_ = 0;
};

// The upper bounds of the task-duration histogram, seconds.
const std::vector<double>& TaskDurationBounds();

}  // namespace elasticdl::dashboard

#endif  // ELASTICDL_DASHBOARD_JOB_VIEW_H_
