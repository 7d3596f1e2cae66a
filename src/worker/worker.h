// A worker: asks the master for tasks and runs them until the job is over.
// Training tasks read their records, run the zoo's dataset_fn, and for each
// minibatch pull the model, compute gradients with LibTorch and push them,
// tagged with the task and minibatch so that each parameter server applies
// them at most once; evaluation tasks accumulate metric states; prediction
// tasks write one CSV row per record.
//
// Determinism: every random choice derives from the job's seed
// (elasticdl/seed.h): the initial model from the seed alone; a task's
// pipeline from (seed, epoch, task), LibTorch's generator before each pull of
// a minibatch from the pipeline from (seed, task, minibatch), and before the
// minibatch's forward from (seed, task, minibatch) again, with another
// purpose. Every attempt of a task therefore yields the same minibatches, a
// resumed attempt skips exactly the ones the servers applied, and a
// minibatch computed again (after a refused push) has the same dropout
// masks.
//
// Synchronous steps of a group (grads_to_wait = 0): after a push accepted
// into a step that waits for other workers, the next minibatch is computed
// on the version after that step (the pull waits for it).
//
// Fault tolerance:
//   - A heartbeat thread renews the worker's lease and tells the master how
//     many minibatches of the current task every server has applied.
//   - Asked to stop (SIGTERM, or the master scaling down), the worker
//     finishes the current minibatch, reports how far the task got (the rest
//     goes back to the queue) and returns OK.
//   - A lost parameter server: the worker hands its task back, waits for
//     the server to be relaunched (registering again) and carries on.
//   - A lost master: calls are retried until it is back (a restarted master
//     resumes the job) or `master_patience` passes.
// A task that fails (bad record, a throw in model code) is reported with its
// error and the worker goes on.
#ifndef ELASTICDL_WORKER_WORKER_H_
#define ELASTICDL_WORKER_WORKER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/aside_thread.h"
#include "elasticdl/api.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "worker/call_timings.h"
#include "worker/model_calls.h"
#include "worker/peers.h"
#include "worker/pipeline_ahead.h"
#include "worker/server_rows.h"
#include "worker/sharded_model.h"
#include "worker/team_binding.h"
#include "worker/time_account.h"
#include "zoo/zoo_program.h"

namespace elasticdl::worker {

struct WorkerOptions {
  // The job directory holding job.pbtxt and the job's credentials.
  std::string job_dir;
  int worker_id = 0;
  // host:port of the master.
  std::string master_address;
  // LibTorch intra-op threads; 0 takes the job's worker_threads, else 1.
  int num_threads = 0;
  // Set (by a SIGTERM handler) to stop after the current minibatch; polled.
  const std::atomic<bool>* stop = nullptr;
  // How long the master may be unreachable before the worker gives up.
  std::chrono::milliseconds master_patience{60000};
  // How long registration waits for the master and its parameter servers
  // (a relaunched server restores its checkpoint first).
  std::chrono::milliseconds register_patience{120000};
  // Ends the process, `status` being why (a call into the model's code that
  // does not return cannot be stopped otherwise); must not return. Unset:
  // std::_Exit(1).
  std::function<void(const Status&)> end_process;
};

// A worker's part of the job spec.
struct WorkerJob {
  // Seeds the initial model, dataset_fn and every minibatch (elasticdl/seed.h).
  uint64_t seed = 0;
  int64_t minibatch_size = 1;
  // Heartbeats renew a lease this long, a few times within it.
  std::chrono::milliseconds lease{kDefaultWorkerLeaseMs};
  // Evaluation and prediction: the trained-model directory to load.
  std::string trained_model;
  // Prediction: where each task's CSV part goes.
  std::string predictions_dir;
  // Training: how gradients are combined; under AllreduceStrategy (and
  // Local) the worker holds the model and its optimizer (CollectiveTrainer).
  proto::DistributionStrategy strategy = proto::PARAMETER_SERVER_STRATEGY;
  proto::OptimizerConfig optimizer;
  // AllreduceStrategy: where checkpoints go, how often, how many are kept;
  // the checkpoint a new job starts from; the last model version; how long
  // a collective waits for a silent peer.
  std::string checkpoint_dir;
  int64_t checkpoint_steps = 0;
  int keep_checkpoint_max = 0;
  std::string checkpoint_dir_for_init;
  int64_t max_steps = 0;
  std::chrono::milliseconds collective_timeout{60000};
  // A call into the model's code that runs this long ends the worker
  // (EndStuck); 0: never.
  std::chrono::seconds model_call_timeout{0};
  // Parameter-server strategy: a worker with as many cores as LibTorch
  // threads binds each thread to a core of its own while its pipeline keeps
  // ahead of the model (TeamBinding; `--bind_workers`).
  bool bind_team = true;

  static WorkerJob Of(const proto::JobSpec& spec);
};

class CollectiveTrainer;

// The first input of `batch` (a feature, then the labels) holding a NaN or
// an infinity, with its row and the record it came from; nullopt if none.
std::optional<std::string> FirstNonFiniteInput(const Example& batch);

class Worker {
 public:
  // Reads the job's spec, token and zoo from options.job_dir and talks to
  // its peers over gRPC.
  static StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& options);
  // A worker of `job` running `program`, talking to `peers` (tests: fakes).
  Worker(WorkerOptions options, WorkerJob job, ZooProgram program, WorkerPeers peers);
  ~Worker();

  // Runs tasks until the master says the job is over or the worker is asked
  // to stop (then OK, after reporting how far its task got).
  Status Run();

 private:
  friend class CollectiveTrainer;

  // A master call, retried while the master is unreachable (restarting).
  template <typename Request, typename Response, typename Method>
  Status CallMaster(const char* what, Method method, const Request& request, Response* response);

  // AllreduceStrategy and Local: CollectiveTrainer (collective_trainer.cc).
  Status RunCollective();
  Status Register();
  Status LoadInitialModel();
  // Pulls what changed. With `wait_for_steps`, first waits until every step
  // this worker's gradients wait in has been taken (CANCELLED when asked to
  // stop meanwhile).
  Status Pull(bool wait_for_steps = false);
  // `started_ahead`: a training task's pipeline already runs on Ahead()
  // (handed out ahead, TakeNext).
  Status RunTask(const proto::Task& task, proto::ReportTaskRequest* report,
                 bool started_ahead = false);
  Status Train(const proto::Task& task, proto::ReportTaskRequest* report, bool started_ahead);
  // The task handed out ahead of the current one's end; `started`: its
  // pipeline runs on Ahead().
  struct NextTask {
    proto::Task task;
    bool started = false;
  };
  // Asks the master for the task after `current`, keeping it
  // (GetTaskRequest.keep), on a thread of its own: the call waits for the
  // master's journal, which the training thread does not. The heartbeats
  // name the ask, then its answer, as held. TakeNext takes the answer.
  void AskForNext(const proto::Task& current);
  // Whether an ask of AskForNext waits to be taken.
  bool AskedForNext() const { return asked_.valid(); }
  // Takes the answer of the ask in flight, if any: false while it is on its
  // way (at once without `wait`), else true with the task handed out in
  // *next, nothing when the master has none to give now (or refuses to
  // hand out ahead: asks_ahead_ is cleared). A training task's pipeline
  // starts on Ahead(), in place of any pipeline there, on the calling
  // thread (a dataset_fn runs where the model's draws cannot interleave
  // with its own).
  bool TakeNext(bool wait, std::optional<NextTask>* next);
  // A report of `task` as handed out: none of it done since.
  proto::ReportTaskRequest ReportOf(const proto::Task& task) const;
  // Hands next_ back to the master, untouched (after a failed task, or when
  // the worker stops).
  Status HandBackNext();
  // Computes and pushes one minibatch, with LibTorch's generator seeded from
  // `seed` before every forward. A non-finite loss or gradient is an error
  // with *nonfinite set; nothing is pushed. `while_pushing`, if set, runs
  // on this thread while the first push is in flight (at most once; not at
  // all when the minibatch fails before it).
  Status TrainMinibatch(const Example& batch, const proto::MinibatchTag& tag, uint64_t seed,
                        double* loss, bool* nonfinite, std::function<void()> while_pushing = {});
  Status Evaluate(const proto::Task& task, proto::ReportTaskRequest* report);
  Status Predict(const proto::Task& task, proto::ReportTaskRequest* report);
  // dataset_fn over the task's records, batched; its randomness seeded from
  // the job's seed, the epoch and the task. A pipeline made to run ahead of
  // the model (`ahead`, on PipelineAhead's thread) reads its records as it
  // goes; one the training thread runs reads them a minibatch ahead on a
  // thread of the pipeline's own.
  StatusOr<Dataset<Example>> Batches(const proto::Task& task, Mode mode, bool ahead = false);
  // A task pipeline's first pull; *free says whether it left LibTorch's
  // global generator alone (and yielded a minibatch): such a pipeline may
  // run ahead of the model on a thread of its own.
  StatusOr<std::optional<Example>> ProbedPull(Dataset<Example>* batches, bool* free);
  // The thread that runs a task's pipeline ahead (made on first use).
  PipelineAhead<Example>& Ahead();
  // Before a training task: binds the training thread's team to a core a
  // thread while the pipeline keeps ahead of the model (it made the model
  // wait at most once in the last task), unbinds it once the pipeline falls
  // behind, whose thread then needs the cores the team would hold.
  void UpdateTeamBinding();
  // The newest version this worker has seen.
  int64_t ModelVersion() const;
  Status DatasetError(const Status& status) const;
  StatusOr<std::shared_ptr<const RecordFile>> OpenFile(const std::string& path);
  // Reports a task and waits for the master's answer. A report on its way
  // in the background is waited for first; its error, if any, is returned
  // (this one is sent all the same).
  Status Report(const proto::ReportTaskRequest& report);
  // One report, sent now.
  Status Send(const proto::ReportTaskRequest& report);
  // Sends `report` from a thread of its own and returns at once: the task
  // handed out ahead begins while the master records this one (its
  // journal's commit may take a while). The heartbeats name the task as
  // held until its answer is collected.
  void ReportInBackground(proto::ReportTaskRequest report);
  // No report is on its way (the answer of one that came is collected).
  bool ReportAnswered();
  // Waits for the report on its way, if any. Returns the error of the last
  // report sent in the background, once.
  Status AwaitReport();
  // Waits for the lost parameter server(s) to come back and reconnects.
  Status Reconnect();
  // Pulls, and while a server cannot be reached (not yet serving, gone,
  // its connection not yet made) asks the master for the servers again and
  // retries, for up to options_.register_patience.
  Status PullWhileServersComeUp();

  void HeartbeatLoop();
  void StopHeartbeats();
  // A call into the model's code has run past job_.model_call_timeout:
  // says which, and where a Python model's code is, fails the task it was
  // for (a call that hangs on the task's records would hang again, so it
  // counts against the task's retries) and ends the process. Returns only
  // when the call returned meanwhile. On stuck_, while heartbeats go on.
  void EndStuck(const ModelCalls::Call& call);
  bool stopping() const;
  // The task the heartbeats name, from its hand-out to its report.
  void BeginTask(const proto::Task& task);
  void EndTask();
  // The task handed out ahead of the current one's end, which the
  // heartbeats name as held too (nullptr: none). AskingAhead():
  // one is asked for; until HoldAhead, heartbeats say so (an answer may be
  // on its way).
  void AskingAhead();
  void HoldAhead(const proto::Task* task);
  // stopping(), or the master no longer has this worker hold its current
  // task (another attempt finished it; taken back): the training loop stops
  // after the current minibatch.
  bool task_stopping() const;

  const WorkerOptions options_;
  const WorkerJob job_;
  ZooProgram program_;
  WorkerPeers peers_;
  CallTimings timings_;  // of ps_'s calls, reported with each task
  // The calls into the model's code under way, which the heartbeat thread
  // watches.
  ModelCalls calls_;
  // Where this process's time went, sent with heartbeats and reports.
  TimeAccount account_{TimeAccount::ProcessStart()};
  std::unique_ptr<rpc::ParameterServers> ps_;
  std::unique_ptr<ShardedModel> model_;
  ServerRows rows_;                  // the Embedding layers' rows
  std::vector<int64_t> versions_;    // per shard, of the values in model_
  std::vector<uint64_t> instances_;  // per shard, the server instance of versions_
  // Per shard: a push of ours waits in a step on top of versions_.
  std::vector<bool> awaiting_step_;
  // Per shard: the last push of the task was answered with the values after
  // its step (now versions_): the next minibatch needs no pull.
  std::vector<bool> answered_;
  int64_t pushed_version_ = 0;  // the newest version a push of ours produced
  double learning_rate_ = 0;    // of the last step a push of ours made or joined
  std::map<std::string, std::shared_ptr<const RecordFile>> files_;
  // Runs a training task's pipeline ahead of the model (Train, and the
  // collective trainer's next task); see Ahead().
  std::unique_ptr<PipelineAhead<Example>> ahead_;
  // The training thread's team's cores (UpdateTeamBinding), from the
  // first training task whose pipeline runs ahead on; not used again once
  // binding failed.
  std::unique_ptr<TeamBinding> team_binding_;
  bool team_binding_failed_ = false;
  // Pushes a minibatch's gradients while the training thread takes the
  // next minibatch (TrainMinibatch).
  AsideThread pusher_{"edl-push"};
  // Parameter-server strategy: a pipeline was seen to leave LibTorch's
  // global generator alone (ProbedPull) and to run in C++: the pipelines of
  // tasks handed out ahead start on Ahead() at once, without a probe of
  // their own (as AllreduceStrategy's do).
  bool pipelines_free_ = false;
  // Set when a master refuses to hand out tasks ahead.
  bool asks_ahead_ = true;
  // Parameter-server strategy: the task handed out ahead (AskForNext).
  std::optional<NextTask> next_;
  // The master's answer to AskForNext on its way, until TakeNext.
  struct Asked {
    Status status;
    proto::GetTaskResponse response;
    // Whether the master handed out a task.
    bool handed() const {
      const proto::TaskType type = response.task().type();
      return status.ok() && type != proto::TASK_NONE && type != proto::TASK_WAIT;
    }
  };
  std::future<Asked> asked_;
  // The report on its way (ReportInBackground), and the answer of the last.
  std::future<Status> report_sent_;
  Status reported_;

  // Shared with the heartbeat thread. task_mu_ keeps the task, its attempt
  // and whether it was revoked together, so that an answer about one task
  // never stops the next.
  std::mutex task_mu_;
  int64_t task_id_ = -1;
  int32_t attempt_ = 0;
  // As the heartbeats name them: the task held ahead (task -1: asked for,
  // the answer not seen yet) and the one whose report is on its way.
  std::optional<proto::HeldTask> ahead_held_;
  std::optional<proto::HeldTask> reporting_;
  std::atomic<bool> task_revoked_{false};
  std::atomic<int64_t> minibatches_done_{0};
  std::atomic<bool> leave_{false};  // the master asked us to leave
  std::atomic<bool> lost_{false};   // the master no longer knows us
  // AllreduceStrategy: the newest collective group version heartbeats told.
  std::atomic<int64_t> latest_group_version_{0};
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_quit_ = false;
  std::thread heartbeat_;
  // EndStuck's thread, and whether it runs.
  std::thread stuck_;
  std::atomic<bool> ending_stuck_{false};
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_WORKER_H_
