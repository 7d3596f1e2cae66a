#include "master/job_state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "master/event_log.h"
#include "master/journal.h"
#include "master/master_service.h"
#include "rpc/grpc_util.h"
#include "rpc/job_token.h"
#include "testing/ids.h"
#include "testing/manual_clock.h"
#include "testing/temp_dir.h"

namespace elasticdl::master {
namespace {

using namespace std::chrono_literals;

TaskManagerOptions TrainingOptions() {
  TaskManagerOptions options;
  options.num_epochs = 1;
  options.minibatch_size = 5;
  return options;
}

std::vector<Range> Ranges(int n) {
  std::vector<Range> out;
  for (int i = 0; i < n; ++i) out.push_back({"f", i * 10, (i + 1) * 10});
  return out;
}

JobStateOptions StateOptions(int num_ps = 1) {
  JobStateOptions options;
  options.num_ps = num_ps;
  options.workers_target = 1;
  return options;
}

Status RegisterPs(JobState* state, int id, const std::string& address = "127.0.0.1:1") {
  proto::RegisterPsRequest request;
  request.set_ps_id(id);
  request.set_address(address);
  return state->RegisterPs(request);
}

Status RegisterWorker(JobState* state, int id) {
  proto::RegisterWorkerRequest request;
  request.set_worker_id(id);
  proto::RegisterWorkerResponse response;
  return state->RegisterWorker(request, &response);
}

StatusOr<proto::Task> GetTask(JobState* state, int worker) {
  proto::GetTaskRequest request;
  request.set_worker_id(worker);
  proto::GetTaskResponse response;
  EDL_RETURN_IF_ERROR(state->GetTask(request, &response));
  return response.task();
}

proto::ReportTaskRequest Done(int worker, const proto::Task& task) {
  proto::ReportTaskRequest report;
  report.set_worker_id(worker);
  report.set_task_id(task.task_id());
  report.set_attempt(task.attempt());
  report.set_minibatches_done(2);
  report.set_minibatches(2);
  return report;
}

TEST(JobStateTest, RefusesWorkersItDidNotStart) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  EXPECT_EQ(RegisterWorker(&state, 7).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetTask(&state, 7).status().code(), absl::StatusCode::kFailedPrecondition);
  proto::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(7);
  proto::HeartbeatResponse response;
  EXPECT_EQ(state.Heartbeat(heartbeat, &response).code(), absl::StatusCode::kFailedPrecondition);
  proto::ReportTaskRequest report;
  report.set_worker_id(7);
  EXPECT_EQ(state.ReportTask(report).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobStateTest, NoTasksWhileAParameterServerIsMissing) {
  JobState state(StateOptions(2), TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  state.WorkerStarted(WorkerId(0), {}, false);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  EXPECT_EQ(RegisterWorker(&state, 0).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(RegisterPs(&state, 1).ok());
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  state.PsLost(PsId(1), "killed by SIGKILL");
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_WAIT);
  EXPECT_EQ(RegisterWorker(&state, 0).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(RegisterPs(&state, 1, "127.0.0.1:2").ok());
  task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_TRAINING);
}

TEST(JobStateTest, LeasesLapseWithoutCalls) {
  testing::ManualClock clock;
  JobStateOptions options = StateOptions();
  options.worker_lease = 5s;
  options.clock = &clock;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(3), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 3).ok());
  clock.Advance(5s);
  EXPECT_TRUE(state.ExpiredLeases().empty());
  clock.Advance(1ms);
  EXPECT_EQ(state.ExpiredLeases(), testing::WorkerIds({3}));
  proto::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(3);
  heartbeat.set_task_id(-1);
  proto::HeartbeatResponse response;
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  EXPECT_TRUE(state.ExpiredLeases().empty());
  EXPECT_FALSE(response.leave());
  state.AskToLeave(WorkerId(3));
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  EXPECT_TRUE(response.leave());
}

TEST(JobStateTest, AWorkerLostSaysHowLongNothingCameFromIt) {
  testing::TempDir dir;
  EventLog events(dir.path() + "/events.jsonl");
  std::vector<nlohmann::json> lost;
  events.Follow([&lost](const nlohmann::json& event, bool) {
    if (event.at("event") == "worker_lost") lost.push_back(event);
  });
  testing::ManualClock clock;
  JobStateOptions options = StateOptions();
  options.worker_lease = 5s;
  options.clock = &clock;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), &events);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(3), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 3).ok());
  clock.Advance(5001ms);
  ASSERT_EQ(state.ExpiredLeases(), testing::WorkerIds({3}));
  state.WorkerLost(WorkerId(3), /*clean=*/false, "lease expired");
  state.WorkerStarted(WorkerId(4), {}, false);
  clock.Advance(40ms);
  state.WorkerLost(WorkerId(4), /*clean=*/false, "killed by SIGKILL");
  events.Follow(nullptr);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].at("silent_ms"), 5001);
  EXPECT_EQ(lost[1].at("silent_ms"), 40);
}

TEST(JobStateTest, ReportsQuoteTheAttempt) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(1), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  state.WorkerStarted(WorkerId(1), {}, false);
  StatusOr<proto::Task> first = GetTask(&state, 0);
  ASSERT_TRUE(first.ok());
  // Worker 0 is lost; its task goes to worker 1 as a new attempt.
  EXPECT_EQ(state.WorkerLost(WorkerId(0), false, "killed"), 1);
  StatusOr<proto::Task> second = GetTask(&state, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->task_id(), first->task_id());
  EXPECT_GT(second->attempt(), first->attempt());
  proto::ReportTaskRequest stale = Done(1, *first);
  EXPECT_EQ(state.ReportTask(stale).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(state.ReportTask(Done(1, *second)).ok());
  EXPECT_TRUE(state.finished());
}

TEST(JobStateTest, StatusSaysFinishedOnceTheResultsAreWritten) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(1), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  ASSERT_TRUE(state.ReportTask(Done(0, *task)).ok());
  ASSERT_TRUE(state.finished());
  // Every task is done, but the model is not written yet: whoever waits for
  // the job's end (`job status`) must not read its output now.
  proto::GetJobStatusResponse status;
  state.GetStatus(&status);
  EXPECT_FALSE(status.finished());
  EXPECT_EQ(status.records_done(), status.records_total());
  state.ResultsWritten();
  state.GetStatus(&status);
  EXPECT_TRUE(status.finished());
  EXPECT_FALSE(status.failed());
}

TEST(JobStateTest, ResumesFromItsJournal) {
  testing::TempDir dir;
  JobStateOptions options = StateOptions();
  options.job_dir = dir.path();
  options.master_address = "127.0.0.1:5555";
  proto::Task held;
  {
    JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
    ASSERT_TRUE(RegisterPs(&state, 0).ok());
    cluster::ProcessHandle handle;
    handle.pid = 1234;
    handle.start_time = 99;
    state.WorkerStarted(WorkerId(state.NewWorkerId()), handle, false);
    StatusOr<proto::Task> done = GetTask(&state, 0);
    ASSERT_TRUE(done.ok());
    ASSERT_TRUE(state.ReportTask(Done(0, *done)).ok());
    StatusOr<proto::Task> task = GetTask(&state, 0);
    ASSERT_TRUE(task.ok());
    held = *task;
    // The master dies here.
  }
  StatusOr<std::optional<proto::MasterJournal>> journal = ReadJournal(dir.path());
  ASSERT_TRUE(journal.ok()) << journal.status();
  ASSERT_TRUE(journal->has_value());
  EXPECT_EQ((*journal)->master_address(), "127.0.0.1:5555");
  ASSERT_EQ((*journal)->workers_size(), 1);
  EXPECT_EQ((*journal)->workers(0).pid(), 1234);
  EXPECT_EQ((*journal)->next_worker_id(), 1);
  StatusOr<TaskManager> tasks =
      TaskManager::FromLedger(TrainingOptions(), Ranges(3), {}, {}, (*journal)->ledger());
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  JobState resumed(options, *std::move(tasks), nullptr, **journal);
  EXPECT_EQ(resumed.progress().first, 10);
  // The worker carries on with the new master: its report on the task the
  // old master handed out is accepted.
  EXPECT_TRUE(resumed.ReportTask(Done(0, held)).ok());
  EXPECT_EQ(resumed.progress().first, 20);
  EXPECT_EQ(resumed.NewWorkerId(), WorkerId(1));
  proto::GetJobStatusResponse status;
  resumed.GetStatus(&status);
  EXPECT_EQ(status.master_restarts(), 1);
}

proto::WorkerSeconds Seconds(double held, double trained, double step_wait = 0) {
  proto::WorkerSeconds s;
  s.set_held(held);
  s.set_startup(1);
  s.set_trained(trained);
  s.set_step_wait(step_wait);
  return s;
}

TEST(JobStateTest, GoodputSumsTheWorkersTimeAndSurvivesTheMaster) {
  testing::TempDir dir;
  testing::ManualClock clock;
  JobStateOptions options = StateOptions();
  options.workers_target = 2;
  options.job_dir = dir.path();
  options.clock = &clock;
  proto::GetJobStatusResponse status;
  {
    JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
    ASSERT_TRUE(RegisterPs(&state, 0).ok());
    state.WorkerStarted(WorkerId(0), {}, false);
    state.WorkerStarted(WorkerId(1), {}, false);
    ASSERT_TRUE(RegisterWorker(&state, 0).ok());
    ASSERT_TRUE(RegisterWorker(&state, 1).ok());
    proto::HeartbeatRequest heartbeat;
    heartbeat.set_task_id(-1);
    proto::HeartbeatResponse response;
    heartbeat.set_worker_id(0);
    *heartbeat.mutable_seconds() = Seconds(10, 8);
    ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
    heartbeat.set_worker_id(1);
    *heartbeat.mutable_seconds() = Seconds(10, 6, 2);
    ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
    // Totals that hold less time than the ones kept are older: ignored.
    *heartbeat.mutable_seconds() = Seconds(9, 5);
    ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
    state.GetStatus(&status);
    EXPECT_DOUBLE_EQ(status.worker_seconds().held(), 20);
    EXPECT_DOUBLE_EQ(status.worker_seconds().trained(), 14);
    EXPECT_DOUBLE_EQ(status.worker_seconds().step_wait(), 2);
    // Worker 1 is lost 3 s after it was last heard from: those count as
    // held and lost. Worker 0 leaves by itself: nothing is added.
    clock.Advance(3s);
    state.WorkerLost(WorkerId(1), /*clean=*/false, "killed");
    state.WorkerLost(WorkerId(0), /*clean=*/true, "exited");
    state.GetStatus(&status);
    EXPECT_DOUBLE_EQ(status.worker_seconds().held(), 23);
    EXPECT_DOUBLE_EQ(status.worker_seconds().lost(), 3);
    EXPECT_DOUBLE_EQ(status.worker_seconds().trained(), 14);
    EXPECT_DOUBLE_EQ(status.worker_seconds().startup(), 2);
    // The master dies here.
  }
  StatusOr<std::optional<proto::MasterJournal>> journal = ReadJournal(dir.path());
  ASSERT_TRUE(journal.ok() && journal->has_value()) << journal.status();
  JobState resumed(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr, **journal);
  proto::GetJobStatusResponse after;
  resumed.GetStatus(&after);
  EXPECT_EQ(after.worker_seconds().SerializeAsString(), status.worker_seconds().SerializeAsString())
      << after.worker_seconds().DebugString();
}

TEST(JobStateTest, AnAnswerComesOnceItsChangeIsInTheJournal) {
  testing::TempDir dir;
  JobStateOptions options = StateOptions();
  options.job_dir = dir.path();
  JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(state.NewWorkerId()), cluster::ProcessHandle(), false);
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  // Read while the master lives (a master killed now loses nothing): the
  // journal has the worker hold the task it was just handed.
  StatusOr<std::optional<proto::MasterJournal>> journal = ReadJournal(dir.path());
  ASSERT_TRUE(journal.ok() && journal->has_value()) << journal.status();
  bool held = false;
  for (const proto::JournalTask& t : (*journal)->ledger().tasks()) {
    held = held || (t.task().task_id() == task->task_id() && t.holder() == 0);
  }
  EXPECT_TRUE(held) << (*journal)->DebugString();
}

TEST(JobStateTest, AJournalThatCannotBeWrittenFailsTheJob) {
  testing::TempDir dir;
  JobStateOptions options = StateOptions();
  // A file where the job directory should be: no journal write succeeds.
  options.job_dir = dir.path() + "/not-a-directory";
  std::ofstream(options.job_dir) << "x";
  JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
  Status registered = RegisterPs(&state, 0);
  EXPECT_FALSE(registered.ok());
  EXPECT_NE(registered.message().find(JournalPath(options.job_dir)), std::string::npos)
      << registered;
  ASSERT_TRUE(state.failure().has_value());
  EXPECT_EQ(*state.failure(), std::string(registered.message()));
  EXPECT_TRUE(state.finished());
  EXPECT_FALSE(state.FlushJournal().ok());
  // No task is handed out past it.
  state.WorkerStarted(WorkerId(state.NewWorkerId()), cluster::ProcessHandle(), false);
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->type(), proto::TASK_NONE);
}

TEST(MasterServiceTest, RefusesCallsWithoutTheTokenAndOversizedOnes) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(1), {}, {}), nullptr);
  const std::string token(64, 'a');
  MasterService service(&state, token);
  std::string address;
  auto server = rpc::StartServer("127.0.0.1", 0, {&service}, &address, {}, kMaxMasterRequestBytes);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = proto::Master::NewStub(rpc::MakeChannel(address, {}));

  proto::GetJobStatusResponse status;
  auto anonymous = rpc::MakeContext(5s);
  EXPECT_EQ(stub->GetJobStatus(anonymous.get(), {}, &status).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto wrong = rpc::MakeContext(5s, std::string(64, 'b'));
  EXPECT_EQ(stub->GetJobStatus(wrong.get(), {}, &status).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  proto::ReportTaskRequest huge;
  huge.set_error(std::string(kMaxMasterRequestBytes + 1, 'x'));
  proto::ReportTaskResponse ignored;
  auto big = rpc::MakeContext(5s, token);
  EXPECT_EQ(stub->ReportTask(big.get(), huge, &ignored).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  // The server keeps serving.
  auto ok = rpc::MakeContext(5s, token);
  EXPECT_TRUE(stub->GetJobStatus(ok.get(), {}, &status).ok());
  EXPECT_EQ(status.records_total(), 10);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace elasticdl::master

namespace elasticdl::master {
namespace {

TEST(JobStateFlushTest, SyncTrainingFlushesBeforeTheFinalEvaluation) {
  JobStateOptions options = StateOptions();
  options.flush_at_end = true;
  TaskManagerOptions task_options = TrainingOptions();
  JobState state(options, TaskManager(task_options, Ranges(1), Ranges(1), {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  EXPECT_FALSE(state.NeedsFlush());
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  ASSERT_TRUE(state.ReportTask(Done(0, *task)).ok());
  // Training is over; the evaluation waits for the flush.
  EXPECT_TRUE(state.NeedsFlush());
  task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_WAIT);
  state.Flushed();
  EXPECT_FALSE(state.NeedsFlush());
  task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_EVALUATION);
}

TEST(JobStateTest, WorkersStillPendingWhenTrainingBeginsJoinWithTheirFirstTask) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(4), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  state.WorkerStarted(WorkerId(1), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  // Worker 1 is not running yet (a Slurm job pending for resources): the
  // first steps do not wait for it.
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0}));
  ASSERT_TRUE(RegisterWorker(&state, 1).ok());
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0}));
  task = GetTask(&state, 1);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0, 1}));
}

TEST(JobStateTest, MinWorkersGateTheFirstTaskUnlessTheyCannotCome) {
  JobStateOptions options = StateOptions();
  options.wait_for_workers = 2;
  options.job_starts_workers = true;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  state.WorkerStarted(WorkerId(1), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  StatusOr<proto::Task> task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_WAIT);
  // Worker 1 died before it registered and is not replaced: nobody else
  // can come, so worker 0 trains.
  state.WorkerLost(WorkerId(1), false, "exited with 1");
  task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_TRAINING);
}

TEST(JobStateTest, AWorkerToldToWaitForTheOthersStaysInTheFirstSteps) {
  JobStateOptions options = StateOptions();
  options.wait_for_workers = 3;
  options.job_starts_workers = true;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  for (int w : {0, 1, 2}) state.WorkerStarted(WorkerId(w), {}, false);
  // Workers 0 and 1 ask before worker 2 has registered: they wait, and the
  // first steps still wait for them.
  for (int w : {0, 1}) {
    ASSERT_TRUE(RegisterWorker(&state, w).ok());
    StatusOr<proto::Task> task = GetTask(&state, w);
    ASSERT_TRUE(task.ok());
    EXPECT_EQ(task->type(), proto::TASK_WAIT);
    EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0, 1, 2}));
  }
  // Worker 2's first task goes out before the others ask again: its first
  // push is not a step of its own.
  ASSERT_TRUE(RegisterWorker(&state, 2).ok());
  StatusOr<proto::Task> task = GetTask(&state, 2);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0, 1, 2}));
}

TEST(JobStateTest, TheFirstCollectiveVersionWaitsForMinWorkersNotYetStarted) {
  JobStateOptions options = StateOptions();
  options.collective = true;
  options.num_ps = 0;
  options.wait_for_workers = 2;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  state.WorkerStarted(WorkerId(0), {}, false);
  proto::RendezvousRequest request;
  request.set_worker_id(0);
  proto::RendezvousResponse place;
  // Worker 1 is not even started yet: the version waits for it.
  ASSERT_TRUE(state.Rendezvous(request, &place).ok());
  EXPECT_EQ(place.world_size(), 0);
  state.WorkerStarted(WorkerId(1), {}, false);
  request.set_worker_id(1);
  ASSERT_TRUE(state.Rendezvous(request, &place).ok());
  EXPECT_EQ(place.world_size(), 2);
}

// Worker 0 asks for the task after `keep`, keeping it.
Status AskAhead(JobState* state, const proto::Task& keep, proto::GetTaskResponse* response) {
  proto::GetTaskRequest request;
  request.set_worker_id(0);
  request.mutable_keep()->set_task_id(keep.task_id());
  request.mutable_keep()->set_attempt(keep.attempt());
  return state->GetTask(request, response);
}

// Worker 0's heartbeat naming `current` and `next` as its tasks.
proto::HeartbeatRequest HeartbeatNaming(const proto::Task& current, const proto::Task& next) {
  proto::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(0);
  heartbeat.set_task_id(current.task_id());
  heartbeat.set_attempt(current.attempt());
  heartbeat.mutable_next()->set_task_id(next.task_id());
  heartbeat.mutable_next()->set_attempt(next.attempt());
  return heartbeat;
}

TEST(JobStateTest, CollectiveWorkersMayAskForTheirNextTaskKeepingTheCurrentOne) {
  JobStateOptions options = StateOptions(/*num_ps=*/0);
  options.collective = true;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(3), {}, {}), nullptr);
  state.WorkerStarted(WorkerId(0), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  StatusOr<proto::Task> current = GetTask(&state, 0);
  ASSERT_TRUE(current.ok());
  ASSERT_EQ(current->type(), proto::TASK_TRAINING);
  proto::GetTaskResponse ahead;
  ASSERT_TRUE(AskAhead(&state, *current, &ahead).ok());
  ASSERT_EQ(ahead.task().type(), proto::TASK_TRAINING);
  // Heartbeats name both; the current one's report counts.
  proto::HeartbeatRequest heartbeat = HeartbeatNaming(*current, ahead.task());
  proto::HeartbeatResponse response;
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  EXPECT_FALSE(response.task_revoked());
  ASSERT_TRUE(state.ReportTask(Done(0, *current)).ok());
  heartbeat.set_task_id(-1);
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  ASSERT_TRUE(state.ReportTask(Done(0, ahead.task())).ok());
}

TEST(JobStateTest, ParameterServerWorkersAskAheadAndStayInTheTrainingGroup) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  StatusOr<proto::Task> current = GetTask(&state, 0);
  ASSERT_TRUE(current.ok());
  ASSERT_EQ(current->type(), proto::TASK_TRAINING);
  proto::GetTaskResponse ahead;
  ASSERT_TRUE(AskAhead(&state, *current, &ahead).ok());
  ASSERT_EQ(ahead.task().type(), proto::TASK_TRAINING);
  EXPECT_NE(ahead.task().task_id(), current->task_id());
  // Heartbeats name both: neither is taken back.
  proto::HeartbeatRequest heartbeat = HeartbeatNaming(*current, ahead.task());
  proto::HeartbeatResponse response;
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  EXPECT_FALSE(response.task_revoked());
  ASSERT_TRUE(state.ReportTask(Done(0, *current)).ok());
  heartbeat.set_task_id(ahead.task().task_id());
  heartbeat.set_attempt(ahead.task().attempt());
  heartbeat.clear_next();
  ASSERT_TRUE(state.Heartbeat(heartbeat, &response).ok());
  EXPECT_FALSE(response.task_revoked());
  // Nothing more to hand out: the worker trains its task still, and the
  // synchronous steps go on waiting for it.
  proto::GetTaskResponse none;
  ASSERT_TRUE(AskAhead(&state, ahead.task(), &none).ok());
  EXPECT_NE(none.task().type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0}));
  ASSERT_TRUE(state.ReportTask(Done(0, ahead.task())).ok());
  // Asking once its task is reported, it leaves the group.
  StatusOr<proto::Task> after = GetTask(&state, 0);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->type(), proto::TASK_TRAINING);
  EXPECT_TRUE(state.training_group().members().empty());
}

TEST(JobStateTest, TheTrainingGroupIsTheWorkersThatTrain) {
  JobState state(StateOptions(), TaskManager(TrainingOptions(), Ranges(1), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  const int64_t start = state.training_group().generation();
  // Started workers are waited for from the start: the first steps of a job
  // wait for every worker registered when training begins.
  state.WorkerStarted(WorkerId(0), {}, false);
  state.WorkerStarted(WorkerId(1), {}, false);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0, 1}));
  EXPECT_GT(state.training_group().generation(), start);
  ASSERT_TRUE(RegisterWorker(&state, 0).ok());
  ASSERT_TRUE(RegisterWorker(&state, 1).ok());

  auto task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  const int64_t before = state.training_group().generation();
  // Nothing left for worker 1: it leaves the group.
  auto nothing = GetTask(&state, 1);
  ASSERT_TRUE(nothing.ok());
  EXPECT_NE(nothing->type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0}));
  EXPECT_GT(state.training_group().generation(), before);
  // Asking again changes nothing.
  const int64_t after = state.training_group().generation();
  ASSERT_TRUE(GetTask(&state, 1).ok());
  EXPECT_EQ(state.training_group().generation(), after);

  // A worker started once training has begun (a replacement, an added
  // worker) is waited for from its first training task, not while it starts.
  state.WorkerStarted(WorkerId(2), {}, true);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({0}));

  state.WorkerLost(WorkerId(0), false, "killed");
  EXPECT_TRUE(state.training_group().members().empty());
}

// A heartbeat of `worker` on `task` (minibatches_done of it), its totals
// those of `minibatches` applied minibatches having taken `trained` seconds.
proto::HeartbeatResponse Beat(JobState* state, int worker, const proto::Task& task,
                              int64_t minibatches_done, int64_t minibatches, double trained) {
  proto::HeartbeatRequest request;
  request.set_worker_id(worker);
  request.set_task_id(task.task_id());
  request.set_attempt(task.attempt());
  request.set_minibatches_done(minibatches_done);
  request.mutable_seconds()->set_held(trained + 1);
  request.mutable_seconds()->set_trained(trained);
  request.mutable_seconds()->set_minibatches(minibatches);
  proto::HeartbeatResponse response;
  EXPECT_TRUE(state->Heartbeat(request, &response).ok());
  return response;
}

// Backups: two workers (1 and 2) and the two tasks of 20 minibatches they
// are handed, in that order.
JobStateOptions TwoWorkers(bool backup_tasks, const Clock* clock = Clock::Steady()) {
  JobStateOptions options = StateOptions();
  options.workers_target = 2;
  options.backup_tasks = backup_tasks;
  options.clock = clock;
  return options;
}

TaskManager TwoTasksOfTwentyMinibatches() {
  return TaskManager(TrainingOptions(), {{"f", 0, 100}, {"f", 100, 200}}, {}, {});
}

StatusOr<std::pair<proto::Task, proto::Task>> HandOutBoth(JobState* state, bool with_ps = true) {
  if (with_ps) EDL_RETURN_IF_ERROR(RegisterPs(state, 0));
  for (int w : {1, 2}) {
    state->WorkerStarted(WorkerId(w), {}, false);
    EDL_RETURN_IF_ERROR(RegisterWorker(state, w));
  }
  EDL_ASSIGN_OR_RETURN(proto::Task first, GetTask(state, 1));
  EDL_ASSIGN_OR_RETURN(proto::Task second, GetTask(state, 2));
  return std::make_pair(first, second);
}

// Worker 2 reports `task` done and asks for another: what it is handed.
StatusOr<proto::Task> DoneThenAsk(JobState* state, const proto::Task& task) {
  EDL_RETURN_IF_ERROR(state->ReportTask(Done(2, task)));
  return GetTask(state, 2);
}

TEST(JobStateTest, AnIdleWorkerBacksUpATaskWhoseWorkerIsFarSlower) {
  JobState state(TwoWorkers(true), TwoTasksOfTwentyMinibatches(), nullptr);
  auto tasks = HandOutBoth(&state);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  const proto::Task* slow = &tasks->first;
  const proto::Task* fast = &tasks->second;
  // 0.25 s per minibatch against 0.1 s: not slow enough for a backup.
  for (int64_t m = 4; m <= 20; m += 2) {
    Beat(&state, 1, *slow, 1, m, 0.25 * static_cast<double>(m));
    Beat(&state, 2, *fast, m, m, 0.1 * static_cast<double>(m));
  }
  auto idle = DoneThenAsk(&state, *fast);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->type(), proto::TASK_WAIT);
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({1}));
  // Worker 1 slows down to 0.5 s per minibatch.
  for (int64_t m = 22; m <= 60; m += 2) {
    Beat(&state, 1, *slow, 1, m, 5.0 + 0.5 * static_cast<double>(m - 20));
  }
  auto backup = GetTask(&state, 2);
  ASSERT_TRUE(backup.ok());
  ASSERT_EQ(backup->type(), proto::TASK_TRAINING);
  EXPECT_EQ(backup->task_id(), slow->task_id());
  EXPECT_EQ(backup->minibatches_done(), 1);
  // Synchronous steps go at the backup's pace.
  EXPECT_EQ(state.training_group().members(), testing::WorkerIds({2}));
  EXPECT_FALSE(Beat(&state, 1, *slow, 2, 62, 33.4).task_revoked());
  EXPECT_FALSE(Beat(&state, 2, *backup, 5, 24, 2.4).task_revoked());
  proto::ReportTaskRequest done = Done(2, *backup);
  done.set_minibatches_done(20);
  ASSERT_TRUE(state.ReportTask(done).ok());
  // The slow attempt is told to stop, and its report is refused.
  EXPECT_TRUE(Beat(&state, 1, *slow, 3, 64, 34.4).task_revoked());
  EXPECT_EQ(state.ReportTask(Done(1, *slow)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(state.training_finished());
  EXPECT_EQ(state.progress().first, 200);
}

TEST(JobStateTest, AHolderOnlyMillisecondsBehindIsNotBackedUp) {
  // 2.5 ms a minibatch against 0.5 ms: five times slower, but what the
  // machine's scheduling makes of a tiny model; a second attempt would save
  // nothing, and in synchronous training would change the steps.
  JobState state(TwoWorkers(true), TwoTasksOfTwentyMinibatches(), nullptr);
  auto tasks = HandOutBoth(&state);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  const proto::Task* slow = &tasks->first;
  const proto::Task* fast = &tasks->second;
  for (int64_t m = 4; m <= 40; m += 2) {
    Beat(&state, 1, *slow, 1, m, 0.0025 * static_cast<double>(m));
    Beat(&state, 2, *fast, m / 2, m, 0.0005 * static_cast<double>(m));
  }
  auto idle = DoneThenAsk(&state, *fast);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->type(), proto::TASK_WAIT);
  // 12.5 ms against 0.5 ms: backed up.
  for (int64_t m = 42; m <= 80; m += 2) {
    Beat(&state, 1, *slow, 1, m, 0.1 + 0.0125 * static_cast<double>(m - 40));
  }
  auto backup = GetTask(&state, 2);
  ASSERT_TRUE(backup.ok());
  ASSERT_EQ(backup->type(), proto::TASK_TRAINING);
  EXPECT_EQ(backup->task_id(), slow->task_id());
}

TEST(JobStateTest, ATaskWithoutProgressIsBackedUpThoughItsWorkerHasNoPace) {
  // A worker whose pushes are refused as stale over and over applies
  // nothing: it has no pace, but its task's time tells.
  testing::ManualClock clock;
  JobState state(TwoWorkers(true, &clock), TwoTasksOfTwentyMinibatches(), nullptr);
  auto tasks = HandOutBoth(&state);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  const proto::Task* stuck = &tasks->first;
  const proto::Task* fast = &tasks->second;
  for (int64_t m = 4; m <= 20; m += 2) {
    Beat(&state, 2, *fast, m, m, 0.1 * static_cast<double>(m));
    clock.Advance(200ms);
  }
  // Not heard from since it was handed its task: nothing tells it is slow.
  auto idle = DoneThenAsk(&state, *fast);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->type(), proto::TASK_WAIT);
  // Its heartbeat 1.8 s after the hand-out, nothing applied: at least 1.8 s
  // per minibatch against 0.1 s.
  Beat(&state, 1, *stuck, 0, 0, 0);
  auto backup = GetTask(&state, 2);
  ASSERT_TRUE(backup.ok());
  ASSERT_EQ(backup->type(), proto::TASK_TRAINING);
  EXPECT_EQ(backup->task_id(), stuck->task_id());
}

TEST(JobStateTest, NoBackupsWhenTurnedOffOrUnderAllreduce) {
  for (bool collective : {false, true}) {
    JobStateOptions options = TwoWorkers(/*backup_tasks=*/collective);
    options.num_ps = collective ? 0 : 1;
    options.collective = collective;
    JobState state(options, TwoTasksOfTwentyMinibatches(), nullptr);
    auto tasks = HandOutBoth(&state, /*with_ps=*/!collective);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    const proto::Task* slow = &tasks->first;
    const proto::Task* fast = &tasks->second;
    for (int64_t m = 4; m <= 40; m += 2) {
      Beat(&state, 1, *slow, 1, m, 1.0 * static_cast<double>(m));
      Beat(&state, 2, *fast, m, m, 0.1 * static_cast<double>(m));
    }
    auto idle = DoneThenAsk(&state, *fast);
    ASSERT_TRUE(idle.ok()) << idle.status();
    EXPECT_EQ(idle->type(), proto::TASK_WAIT) << "collective " << collective;
  }
}

TEST(JobStateTest, AResumedMasterPublishesNewerGenerations) {
  testing::TempDir dir;
  JobStateOptions options = StateOptions();
  options.job_dir = dir.path();
  int64_t old_generation = 0;
  {
    JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
    ASSERT_TRUE(RegisterPs(&state, 0).ok());
    for (int i = 0; i < 5; ++i) state.WorkerStarted(WorkerId(i), {}, false);
    old_generation = state.training_group().generation();
  }
  auto journal = ReadJournal(dir.path());
  ASSERT_TRUE(journal.ok() && journal->has_value());
  auto tasks = TaskManager::FromLedger(TrainingOptions(), Ranges(2), {}, {}, (*journal)->ledger());
  ASSERT_TRUE(tasks.ok());
  JobState resumed(options, std::move(*tasks), nullptr, **journal);
  EXPECT_GT(resumed.training_group().generation(), old_generation);
  EXPECT_EQ(resumed.training_group().members(), testing::WorkerIds({0, 1, 2, 3, 4}));
}

TEST(JobStateTest, NonFiniteMinibatchesAreRetriedThenFailTheJob) {
  JobStateOptions options = StateOptions();
  options.max_nonfinite_minibatches = 1;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(1), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  state.WorkerStarted(WorkerId(0), {}, false);
  auto diverged = [&](const proto::Task& task) {
    proto::ReportTaskRequest report = Done(0, task);
    report.set_minibatches_done(1);
    report.set_nonfinite(true);
    report.set_error("training diverged: minibatch 1 of task 0 ...");
    return state.ReportTask(report);
  };
  auto task = GetTask(&state, 0);
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(task->type(), proto::TASK_TRAINING);
  ASSERT_TRUE(diverged(*task).ok());
  // Not a failure of the task: it goes back, its progress kept.
  EXPECT_FALSE(state.failure().has_value());
  auto again = GetTask(&state, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->task_id(), task->task_id());
  EXPECT_EQ(again->minibatches_done(), 1);
  ASSERT_TRUE(diverged(*again).ok());
  ASSERT_TRUE(state.failure().has_value());
  EXPECT_NE(state.failure()->find("training diverged: minibatch 1 of task 0"), std::string::npos)
      << *state.failure();
  EXPECT_NE(state.failure()->find("--max_nonfinite_minibatches=1"), std::string::npos);
  EXPECT_TRUE(state.finished());
}

}  // namespace
}  // namespace elasticdl::master

namespace elasticdl::master {
namespace {

TEST(JobStateTest, JoinedWorkersAreMembersAndTasksWaitForEnoughOfThem) {
  testing::TempDir dir;
  JobStateOptions options = StateOptions();
  options.wait_for_workers = 2;
  options.job_dir = dir.path();
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  ASSERT_TRUE(RegisterPs(&state, 0).ok());
  proto::JoinRequest join;
  join.set_host("host-a");
  proto::JoinResponse first;
  ASSERT_TRUE(state.Join(join, &first).ok());
  EXPECT_EQ(first.job_dir(), dir.path());
  ASSERT_TRUE(RegisterWorker(&state, first.worker_id()).ok());
  StatusOr<proto::Task> task = GetTask(&state, first.worker_id());
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_WAIT);
  proto::JoinResponse second;
  ASSERT_TRUE(state.Join(join, &second).ok());
  EXPECT_NE(second.worker_id(), first.worker_id());
  ASSERT_TRUE(RegisterWorker(&state, second.worker_id()).ok());
  task = GetTask(&state, first.worker_id());
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->type(), proto::TASK_TRAINING);
  EXPECT_EQ(state.joined_workers(), testing::WorkerIds({first.worker_id(), second.worker_id()}));
  // A resumed master knows them as joined, and does not wait again.
  StatusOr<std::optional<proto::MasterJournal>> journal = ReadJournal(dir.path());
  ASSERT_TRUE(journal.ok() && journal->has_value());
  JobState resumed(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr, **journal);
  EXPECT_EQ(resumed.joined_workers().size(), 2u);
}

TEST(JobStateTest, ScalingStopsAtTheJobsMaxWorkers) {
  JobStateOptions options = StateOptions();
  options.max_workers = 8;
  JobState state(options, TaskManager(TrainingOptions(), Ranges(2), {}, {}), nullptr);
  proto::ScaleRequest request;
  proto::ScaleResponse response;
  request.set_num_workers(8);
  ASSERT_TRUE(state.Scale(request, &response).ok());
  request.set_num_workers(9);
  Status refused = state.Scale(request, &response);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("--max_workers=8"), std::string::npos) << refused;
  EXPECT_EQ(state.workers_target(), 8);
}

}  // namespace
}  // namespace elasticdl::master
