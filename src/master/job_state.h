// The master's state behind one mutex, and the rules that span its parts:
// the job's processes (Membership: servers, workers, leases), the tasks
// (TaskManager), the workers synchronous steps wait for (TrainingGroup), and
// the journal that lets a restarted master resume (JournalWriter). The gRPC adapter
// (MasterService), the master's supervision loop and tests call it directly.
//
// Membership: a worker exists once the master has started (or adopted) it;
// calls from other worker ids are refused (FAILED_PRECONDITION). A started
// worker registers, and then renews its lease with every call; one whose
// lease lapses is taken as lost (ExpiredLeases). Parameter servers register
// their address; while one is missing (lost and being relaunched) workers
// get no task and registration waits.
//
// Durability: every change that matters for exact accounting is in the
// journal (<job_dir>/journal.log) before the call returns: the change is
// made under the lock, a JournalWriter thread writes it (with whatever else
// changed meanwhile: group commit), and the call waits for that write
// outside the lock. Heartbeat progress is written at the next
// FlushJournal(); losing it costs only recomputation, as parameter servers
// apply each minibatch once. A journal that cannot be written fails the
// job, and every call that waits for it fails with that error.
#ifndef ELASTICDL_MASTER_JOB_STATE_H_
#define ELASTICDL_MASTER_JOB_STATE_H_

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_backend.h"
#include "common/clock.h"
#include "elasticdl/api.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "master/collective_group.h"
#include "master/event_log.h"
#include "master/membership.h"
#include "master/task_manager.h"
#include "master/training_group.h"
#include "master/worker_time.h"

namespace elasticdl::master {

struct JobStateOptions {
  proto::JobType type = proto::JOB_TRAINING;
  int num_ps = 0;
  // Workers the job runs; Scale() changes it, up to max_workers (0: no
  // bound).
  int workers_target = 1;
  int max_workers = 0;
  // A registered worker not heard from for this long is lost.
  std::chrono::milliseconds worker_lease{kDefaultWorkerLeaseMs};
  // Where the journal goes; empty: no journal (tests).
  std::string job_dir;
  // The master's address, recorded in the journal.
  std::string master_address;
  // Synchronous training: when training ends, the parameter servers apply
  // the gradients still waiting for a step (Flush) before anything
  // (evaluation, the trained model) reads the model.
  bool flush_at_end = false;
  // Minibatches with non-finite values (reported by workers) the job
  // tolerates; the next one fails it. Each is retried like a stopped task.
  int max_nonfinite_minibatches = kDefaultMaxNonfiniteMinibatches;
  // No task is handed out before this many workers have registered
  // (--min_workers). Later ones join as they register.
  int wait_for_workers = 0;
  // The workers are started by the job's backend (not the `external`
  // cluster's, which others start): one it lost before it registered is
  // not waited for.
  bool job_starts_workers = false;
  // A training worker whose minibatches take this many times the others'
  // median is a straggler (TakeStraggler()); 0: never.
  double straggler_factor = 0;
  // Near the end of training, a worker with nothing to do is handed a backup
  // attempt of a task whose holder trains more than kBackupPaceFactor times
  // slower than it does (parameter-server strategy only; under
  // AllreduceStrategy a step's minibatches are one collective, and a second
  // attempt's would drop it). See BackupLocked().
  bool backup_tasks = false;
  // AllreduceStrategy: the workers train in a collective group whose
  // rendezvous is the master (CollectiveGroup); heartbeats tell its version.
  bool collective = false;
  // What leases and the throughput estimate are measured with. Not owned.
  const Clock* clock = Clock::Steady();
};

class JournalWriter;

// How much slower than an idle worker a task's holder must train (seconds
// per applied minibatch) for that worker to back the task up; it must also
// be WorkerTime::kMinLag behind it.
inline constexpr double kBackupPaceFactor = 3;

class JobState {
 public:
  // A new job. `events` may be null; not owned.
  JobState(JobStateOptions options, TaskManager tasks, EventLog* events);
  // A job resumed from `journal` (tasks rebuilt by the caller from its ledger).
  JobState(JobStateOptions options, TaskManager tasks, EventLog* events,
           const proto::MasterJournal& journal);
  // Writes the journal's last changes.
  ~JobState();
  JobState(const JobState&) = delete;
  JobState& operator=(const JobState&) = delete;

  // RPC handlers.
  Status RegisterPs(const proto::RegisterPsRequest& request);
  // UNAVAILABLE until every parameter server has registered.
  Status RegisterWorker(const proto::RegisterWorkerRequest& request,
                        proto::RegisterWorkerResponse* response);
  Status GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response);
  // FAILED_PRECONDITION for a task the worker does not hold at that attempt.
  Status ReportTask(const proto::ReportTaskRequest& request);
  Status Heartbeat(const proto::HeartbeatRequest& request, proto::HeartbeatResponse* response);
  Status Scale(const proto::ScaleRequest& request, proto::ScaleResponse* response);
  // AllreduceStrategy (see CollectiveGroup).
  Status Rendezvous(const proto::RendezvousRequest& request, proto::RendezvousResponse* response);
  Status GroupStore(const proto::GroupStoreRequest& request, proto::GroupStoreResponse* response);
  // A new group version's state: when it is older than what the master
  // counted, the tasks counted beyond it are set back (TaskManager::PsRestored).
  Status GroupState(const proto::GroupStateRequest& request, proto::GroupStateResponse* response);
  void GetStatus(proto::GetJobStatusResponse* response);
  // The dashboard's status (dashboard::JobView::StatusSource): GetStatus,
  // the tasks queued and held, and each worker's milliseconds since it was
  // last heard from.
  nlohmann::json LiveStatus();

  // Supervision.
  // A worker id for a new worker process.
  // A worker that someone else started joins: it becomes worker
  // `response->worker_id` of the job (a member with a lease, like the ones
  // the master started) and learns the job directory.
  Status Join(const proto::JoinRequest& request, proto::JoinResponse* response);
  // Workers that joined by themselves and are not asked to leave.
  std::vector<WorkerId> joined_workers();
  WorkerId NewWorkerId();
  void WorkerStarted(WorkerId worker, const cluster::ProcessHandle& handle, bool relaunch);
  // A worker process is gone (or its lease lapsed): its tasks go back to the
  // queue. Returns how many. `clean`: it exited by itself with success.
  int WorkerLost(WorkerId worker, bool clean, const std::string& how);
  // More minibatches than --max_nonfinite_minibatches gave non-finite
  // values: the model diverged.
  bool diverged();
  // The model has reached `version` (the servers said so, applying the
  // gradients that waited for a step).
  void NoteModelVersion(int64_t version);
  // The tasks `worker` holds, said as TaskManager::DescribeHeldBy says them.
  std::string DescribeTasksOf(WorkerId worker);
  // Registered workers whose lease has lapsed.
  std::vector<WorkerId> ExpiredLeases();
  // Workers started and not lost, and of those the ones asked to leave.
  std::vector<WorkerId> workers();
  // The workers synchronous steps wait for (see TrainingGroup).
  TrainingGroup training_group();
  bool leaving(WorkerId worker);
  // Asks `worker` to finish its minibatch, report and exit.
  void AskToLeave(WorkerId worker);
  // A worker that is now a straggler (see WorkerTime::FindStraggler), asked to
  // leave; the caller ends it and starts another in its place. At most one
  // per call.
  std::optional<WorkerId> TakeStraggler();
  int workers_target();
  bool worker_relaunch_allowed(int max_relaunches);

  void PsStarted(PsId ps, const cluster::ProcessHandle& handle, bool relaunch);
  // A parameter server is gone; until it registers again, no task is handed out.
  void PsLost(PsId ps, const std::string& how);
  int ps_relaunches();

  // Ends the job as failed (e.g. a parameter server cannot be relaunched),
  // unless it has already ended.
  void Fail(const std::string& message);

  // Synchronous training has ended and the servers have not been flushed
  // since: call Flush on them, then Flushed().
  bool NeedsFlush();
  void Flushed();

  // Asks for a journal write of the heartbeats' progress, if any came since
  // the last write. OK, or the journal's failure.
  Status FlushJournal();
  // The processes recorded in the journal (for adoption by a new master).
  std::vector<std::pair<PsId, cluster::ProcessHandle>> ps_processes();
  std::vector<std::pair<WorkerId, cluster::ProcessHandle>> worker_processes();

  bool all_ps_registered();
  std::vector<std::string> ps_addresses();
  // Every task is done, or the job failed.
  bool finished();
  bool training_finished();
  // Every training task is done and the servers hold the model they made
  // (the last gradients applied where the job applies them at its end),
  // whether or not the job failed since.
  bool trained_model_ready();
  // The job's results are written: from now on its status says it finished.
  void ResultsWritten();
  // The failure message, if the job failed.
  std::optional<std::string> failure();
  std::vector<Evaluation> evaluations();
  std::vector<std::pair<Range, TaskId>> prediction_tasks();
  int64_t model_version();
  // Records processed and the records of the whole job.
  std::pair<int64_t, int64_t> progress();

 private:
  // GetTask's answer for a known worker, which keeps `keep` if it holds it;
  // the change it made (0: none).
  uint64_t GetTaskLocked(WorkerId worker, std::optional<TaskAttempt> keep, proto::Task* task);
  // A backup attempt for `worker`, which has nothing to do, in `task`: of
  // the tasks it could back up (TaskManager::BackupCandidates), the one
  // whose holder, training over kBackupPaceFactor times slower than
  // `worker` and WorkerTime::kMinLag behind it, would take longest to finish it (minibatches left
  // times the holder's pace). `worker`'s pace is its WorkerTime pace, which must be known; the
  // holder's the slower of its WorkerTime pace and the least its pace on this task can be: from the
  // hand-out to its latest heartbeat, over the minibatches of it known applied then plus the one
  // under way (a worker whose pushes are refused over and over applies none, and has no WorkerTime
  // pace). In synchronous training the holder leaves the group steps wait for, so that the steps go
  // at the backup's pace; its pushes still count when they come first. Returns whether it handed
  // one out.
  bool BackupLocked(WorkerId worker, proto::Task* task);
  Clock::time_point Now() const { return options_.clock->Now(); }
  double ThroughputLocked();
  // The journal's records (JournalWriter::Source): the whole state, and
  // what changed since the last record.
  proto::MasterJournal JournalLocked();
  proto::JournalChanges JournalChangesLocked();
  // Every field of MasterJournal but the ledger and the workers.
  void ScalarsLocked(proto::MasterJournal* journal) const;
  // Numbers a change to the journaled state and asks for its write;
  // returns its number.
  uint64_t ChangedLocked();
  // Waits, without the lock, until `change` (0: none) is in the journal.
  // The journal's failure if it cannot be written.
  Status Durable(uint64_t change);
  void Event(const std::string& event, const nlohmann::json& fields);

  const JobStateOptions options_;
  EventLog* const events_;
  std::mutex mu_;
  TaskManager tasks_;
  Membership members_;
  int master_restarts_ = 0;
  int nonfinite_minibatches_ = 0;
  TrainingGroup group_;
  // Where the workers' time went (goodput).
  WorkerTime worker_time_;
  // Each worker's latest task: when it was handed out, the task's progress
  // then, and the worker's latest heartbeat on it (BackupLocked).
  struct OnTask {
    TaskId task;
    Clock::time_point since;
    int64_t minibatches_done = 0;
    Clock::time_point heard;
  };
  std::map<WorkerId, OnTask> on_task_;
  // AllreduceStrategy; thread-safe by itself (its store calls wait).
  CollectiveGroup collective_;
  // Whether a version has been handed out; before that, workers asking
  // wait for the others started (since the first asked).
  bool collective_formed_ = false;
  std::optional<Clock::time_point> first_rendezvous_;
  // Whether a training task was handed out: until then a started worker
  // joins the group at once (the job's first steps wait for every worker it
  // starts); afterwards at its first training task, so that the workers
  // training do not wait for a replacement or an added worker to start.
  bool training_begun_ = false;
  // A task has been handed out (a resumed job counts as started).
  bool dispatched_any_ = false;
  bool told_awaiting_workers_ = false;
  // Heartbeats moved a task's progress since the last journal write.
  bool progress_unwritten_ = false;
  bool flushed_ = false;
  // Changes to the journaled state so far.
  uint64_t changes_ = 0;
  std::optional<std::string> failure_;
  bool results_written_ = false;
  // (time, records done) after each report, for the throughput estimate.
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> samples_;
  // Null without a job directory (tests). Last: it stops, writing the last
  // changes, before the state it reads goes.
  std::unique_ptr<JournalWriter> journal_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOB_STATE_H_
