// The master's request handlers: membership of parameter servers and
// workers, and the task ledger, behind one mutex. The gRPC adapter
// (MasterService) and tests call it directly.
#ifndef ELASTICDL_MASTER_JOB_STATE_H_
#define ELASTICDL_MASTER_JOB_STATE_H_

#include <chrono>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "master/task_manager.h"

namespace elasticdl::master {

class JobState {
 public:
  JobState(proto::JobType type, int num_ps, TaskManager tasks);

  Status RegisterPs(const proto::RegisterPsRequest& request);
  // UNAVAILABLE until every parameter server has registered.
  Status RegisterWorker(const proto::RegisterWorkerRequest& request,
                        proto::RegisterWorkerResponse* response);
  Status GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response);
  Status ReportTask(const proto::ReportTaskRequest& request);
  void GetStatus(proto::GetJobStatusResponse* response);

  // A worker process is gone: its tasks go back to the queue.
  int WorkerLost(WorkerId worker);
  // Ends the job as failed (e.g. a parameter server died), unless it has
  // already ended.
  void Fail(const std::string& message);

  bool all_ps_registered();
  std::vector<std::string> ps_addresses();
  bool finished();
  // The failure message, if the job failed.
  std::optional<std::string> failure();
  std::vector<Evaluation> evaluations();
  std::vector<std::pair<Range, TaskId>> prediction_tasks();
  int64_t model_version();
  // Records processed and the records of the whole job.
  std::pair<int64_t, int64_t> progress();

 private:
  Status CheckWorker(WorkerId worker) const;
  double ThroughputLocked();

  const proto::JobType type_;
  std::mutex mu_;
  TaskManager tasks_;
  std::vector<std::string> ps_addresses_;
  std::set<WorkerId> workers_;
  std::optional<std::string> failure_;
  // (time, records done) after each report, for the throughput estimate.
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> samples_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOB_STATE_H_
