#include "master/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <vector>

#include "common/strings.h"
#include "testing/fake_backend.h"

namespace elasticdl::master {
namespace {

using testing::FakeBackend;

std::vector<Range> TaskRanges(int n) {
  std::vector<Range> out;
  for (int i = 0; i < n; ++i) out.push_back({"f", i * 10, (i + 1) * 10});
  return out;
}

TaskManager Tasks() {
  TaskManagerOptions options;
  options.num_epochs = 1;
  options.minibatch_size = 5;
  return TaskManager(options, TaskRanges(4), {}, {});
}

JobStateOptions WorkerStateOptions(int workers) {
  JobStateOptions options;
  options.num_ps = 1;
  options.workers_target = workers;
  return options;
}

// `restored`: relaunched, from a checkpoint older than every task.
void RegisterPs(JobState* state, bool restored = false) {
  proto::RegisterPsRequest request;
  request.set_ps_id(0);
  request.set_address("127.0.0.1:1");
  request.set_restored(restored);
  ASSERT_TRUE(state->RegisterPs(request).ok());
}

cluster::ProcessExit Exit(const cluster::ProcessName& process, bool ok) {
  cluster::ProcessExit e;
  e.process = process;
  e.ok = ok;
  e.description = ok ? "exit code 0" : "Slurm job 7 NODE_FAIL";
  return e;
}

// Registers worker `id` and hands it the next task.
proto::Task RegisterAndTakeTask(JobState* state, int id) {
  proto::RegisterWorkerRequest join;
  join.set_worker_id(id);
  proto::RegisterWorkerResponse joined;
  EXPECT_TRUE(state->RegisterWorker(join, &joined).ok());
  proto::GetTaskRequest ask;
  ask.set_worker_id(id);
  proto::GetTaskResponse task;
  EXPECT_TRUE(state->GetTask(ask, &task).ok());
  return task.task();
}

SupervisorOptions SupervisorWith(int max_worker_relaunches = 3) {
  SupervisorOptions options;
  options.num_ps = 1;
  options.max_worker_relaunches = max_worker_relaunches;
  return options;
}

TEST(SupervisorTest, StartsWorkersOnceTheServersRegistered) {
  JobState state(WorkerStateOptions(2), Tasks(), nullptr);
  FakeBackend backend;
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  EXPECT_EQ(backend.ps_started, (std::vector<std::pair<PsId, bool>>{{PsId(0), false}}));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_TRUE(backend.workers_started.empty());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started, testing::WorkerIds({0, 1}));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started.size(), 2u);
}

TEST(SupervisorTest, ReplacesCrashedWorkersWithinTheBudgetAndLostServersWithRestore) {
  JobState state(WorkerStateOptions(1), Tasks(), nullptr);
  FakeBackend backend;
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(/*max_worker_relaunches=*/1), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());
  ASSERT_EQ(backend.workers_started, testing::WorkerIds({0}));

  exits.Push(Exit(cluster::ProcessName::Worker(WorkerId(0)), false));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started, testing::WorkerIds({0, 1}));
  // The budget is spent: the last worker's crash fails the job, saying how
  // it ended (no reason written: the backend's words) and on which task.
  const proto::Task task = RegisterAndTakeTask(&state, 1);
  ASSERT_EQ(task.type(), proto::TASK_TRAINING);
  exits.Push(Exit(cluster::ProcessName::Worker(WorkerId(1)), false));
  Status s = supervisor.Tick();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(),
            StrCat("every worker has ended and the 1 relaunches allowed are used up; "
                   "the last one ended with: Slurm job 7 NODE_FAIL (on training task ",
                   task.task_id(), " (f records [", task.start(), ", ", task.end(), ")))"));

  JobState state2(WorkerStateOptions(1), Tasks(), nullptr);
  FakeBackend backend2;
  Supervisor supervisor2(SupervisorWith(), &state2, &backend2, &exits);
  ASSERT_TRUE(supervisor2.StartNew().ok());
  exits.Push(Exit(cluster::ProcessName::Ps(PsId(0)), false));
  ASSERT_TRUE(supervisor2.Tick().ok());
  EXPECT_EQ(backend2.ps_started,
            (std::vector<std::pair<PsId, bool>>{{PsId(0), false}, {PsId(0), true}}));
}

// The model is read from the servers after the last task: one that ends in
// between is relaunched, and its restore reopens the work it lost.
TEST(SupervisorTest, RelaunchesAServerLostAfterTheLastTask) {
  JobState state(WorkerStateOptions(1), Tasks(), nullptr);
  FakeBackend backend;
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());  // worker 0
  proto::RegisterWorkerRequest join;
  join.set_worker_id(0);
  proto::RegisterWorkerResponse joined;
  ASSERT_TRUE(state.RegisterWorker(join, &joined).ok());
  while (!state.finished()) {
    proto::GetTaskRequest ask;
    ask.set_worker_id(0);
    proto::GetTaskResponse task;
    ASSERT_TRUE(state.GetTask(ask, &task).ok());
    ASSERT_EQ(task.task().type(), proto::TASK_TRAINING);
    proto::ReportTaskRequest done;
    done.set_worker_id(0);
    done.set_task_id(task.task().task_id());
    done.set_attempt(task.task().attempt());
    done.set_minibatches_done(2);
    done.set_minibatches(2);
    ASSERT_TRUE(state.ReportTask(done).ok());
  }
  exits.Push(Exit(cluster::ProcessName::Worker(WorkerId(0)), true));  // told there is no more
  exits.Push(Exit(cluster::ProcessName::Ps(PsId(0)), false));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.ps_started,
            (std::vector<std::pair<PsId, bool>>{{PsId(0), false}, {PsId(0), true}}));
  EXPECT_FALSE(state.all_ps_registered());
  // Its checkpoint is older than every task: all of them are trained again.
  RegisterPs(&state, /*restored=*/true);
  EXPECT_FALSE(state.finished());
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started, testing::WorkerIds({0, 1}));
}

TEST(SupervisorTest, APreemptedWorkerIsReplacedFreeOfTheBudget) {
  JobState state(WorkerStateOptions(1), Tasks(), nullptr);
  FakeBackend backend;
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(/*max_worker_relaunches=*/0), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());
  exits.Push(Exit(cluster::ProcessName::Worker(WorkerId(0)), true));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started, testing::WorkerIds({0, 1}));
}

// A worker that exits with success still holding a task was not preempted
// (that hands the task back first): the model's code ended it. Every worker
// would, on that task: it counts against the budget, which ends the job.
// Unless the cluster ended it (Slurm's PREEMPTED) before it could hand its
// task back: a preemption all the same, free of the budget.
TEST(SupervisorTest, AWorkerThatExitsWithItsTaskUnreportedCrashedUnlessPreempted) {
  for (const bool preempted : {false, true}) {
    SCOPED_TRACE(preempted ? "preempted" : "exited by itself");
    JobState state(WorkerStateOptions(1), Tasks(), nullptr);
    FakeBackend backend;
    ExitQueue exits;
    Supervisor supervisor(SupervisorWith(/*max_worker_relaunches=*/0), &state, &backend, &exits);
    ASSERT_TRUE(supervisor.StartNew().ok());
    RegisterPs(&state);
    ASSERT_TRUE(supervisor.Tick().ok());
    ASSERT_EQ(RegisterAndTakeTask(&state, 0).type(), proto::TASK_TRAINING);
    cluster::ProcessExit exit = Exit(cluster::ProcessName::Worker(WorkerId(0)), true);
    exit.preempted = preempted;
    exits.Push(exit);
    Status s = supervisor.Tick();
    proto::GetJobStatusResponse status;
    state.GetStatus(&status);
    EXPECT_EQ(status.worker_losses(), preempted ? 0 : 1);
    if (preempted) {
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(backend.workers_started, testing::WorkerIds({0, 1}));
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr("the last one ended with: exit code 0 in the middle of a "
                                     "task it did not hand back"));
    EXPECT_EQ(backend.workers_started, testing::WorkerIds({0}));
  }
}

TEST(SupervisorTest, ScalingDownSignalsTheNewestAndCountsJoinedWorkers) {
  JobState state(WorkerStateOptions(2), Tasks(), nullptr);
  FakeBackend backend;
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());  // workers 0 and 1
  proto::JoinRequest join;
  join.set_host("elsewhere");
  proto::JoinResponse joined;
  ASSERT_TRUE(state.Join(join, &joined).ok());
  EXPECT_EQ(joined.worker_id(), 2);
  proto::ScaleRequest scale;
  scale.set_num_workers(1);
  proto::ScaleResponse scaled;
  ASSERT_TRUE(state.Scale(scale, &scaled).ok());
  ASSERT_TRUE(supervisor.Tick().ok());
  // Workers 2 (joined: told by its heartbeat) and 1 (signalled) leave.
  EXPECT_TRUE(state.leaving(WorkerId(2)));
  EXPECT_TRUE(state.leaving(WorkerId(1)));
  EXPECT_FALSE(state.leaving(WorkerId(0)));
  EXPECT_EQ(backend.signals, (std::vector<std::pair<std::string, int>>{{"worker-1", SIGTERM}}));
  EXPECT_EQ(backend.workers_started.size(), 2u);
}

TEST(SupervisorTest, ABackendThatStartsNoWorkersWaitsForJoins) {
  JobStateOptions options = WorkerStateOptions(2);
  options.wait_for_workers = 2;
  JobState state(options, Tasks(), nullptr);
  FakeBackend backend(/*starts_workers=*/false);
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.StartNew().ok());
  RegisterPs(&state);
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_TRUE(backend.workers_started.empty());
  // A joined worker whose lease lapses is lost, not replaced.
  proto::JoinResponse joined;
  ASSERT_TRUE(state.Join(proto::JoinRequest(), &joined).ok());
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_TRUE(backend.workers_started.empty());
  EXPECT_TRUE(backend.signals.empty());
}

TEST(SupervisorTest, ARestartedMasterAdoptsWhatIsLeftAndReplacesTheRest) {
  JobState state(WorkerStateOptions(2), Tasks(), nullptr);
  cluster::ProcessHandle ps;
  ps.backend_id = "10";
  state.PsStarted(PsId(0), ps, false);
  RegisterPs(&state);
  cluster::ProcessHandle alive;
  alive.backend_id = "11";
  cluster::ProcessHandle dead;
  dead.backend_id = "12";
  state.WorkerStarted(WorkerId(state.NewWorkerId()), alive, false);
  state.WorkerStarted(WorkerId(state.NewWorkerId()), dead, false);
  FakeBackend backend;
  backend.gone.insert("12");
  ExitQueue exits;
  Supervisor supervisor(SupervisorWith(), &state, &backend, &exits);
  ASSERT_TRUE(supervisor.Adopt().ok());
  EXPECT_EQ(backend.adopted, (std::vector<std::string>{"ps-0", "worker-0"}));
  ASSERT_TRUE(supervisor.Tick().ok());
  EXPECT_EQ(backend.workers_started, testing::WorkerIds({2}));
}

}  // namespace
}  // namespace elasticdl::master
