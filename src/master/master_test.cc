// The master's wiring and loop: a real Master (its gRPC service, job state,
// journal, supervisor and dashboard) with a fake cluster backend and fake
// parameter servers; the test plays the workers and the servers'
// registration over the Master service.
#include "master/master.h"

#include <arpa/inet.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "common/file.h"
#include "common/job_dir.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "job/trained_model.h"
#include "rpc/grpc_util.h"
#include "testing/fake_backend.h"
#include "testing/manual_clock.h"
#include "testing/temp_dir.h"

namespace elasticdl::master {
namespace {

using namespace std::chrono_literals;
using testing::FakeBackend;

constexpr char kToken[] = "job-token";

// What the job's parameter servers were asked, across every connection the
// master made. Faults: `flush_failures` flushes fail as unreachable;
// `pull_failures` pulls do (-1: every one); `nonfinite` models hold a NaN.
struct ServersRecord {
  std::mutex mu;
  int flushes = 0;  // answered, without a checkpoint
  int checkpoints = 0;
  int pulls = 0;
  int failed_calls = 0;
  std::vector<std::vector<int32_t>> groups;  // as published, in order
  std::vector<int64_t> generations;
  int flush_failures = 0;
  int pull_failures = 0;
  bool nonfinite = false;

  Status Fault(int* failures) {
    if (*failures == 0) return absl::OkStatus();
    if (*failures > 0) --*failures;
    ++failed_calls;
    return absl::UnavailableError("parameter server 0: connection refused");
  }
};

class FakeServers : public rpc::ParameterServers {
 public:
  FakeServers(ServersRecord* record, int shards) : record_(record), shards_(shards) {}

  int num_shards() const override { return shards_; }
  Status Init(const std::vector<proto::InitRequest>&, std::vector<proto::InitResponse>*) override {
    return NotForTheMaster();
  }
  Status Pull(const std::vector<proto::PullRequest>& requests,
              std::vector<proto::PullResponse>* responses) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    EDL_RETURN_IF_ERROR(record_->Fault(&record_->pull_failures));
    ++record_->pulls;
    responses->assign(requests.size(), proto::PullResponse());
    for (size_t i = 0; i < requests.size(); ++i) {
      proto::PullResponse& r = (*responses)[i];
      r.set_initialized(true);
      r.mutable_values()->set_version(7);
      proto::Tensor* t = r.mutable_values()->add_parameters();
      t->set_name("w" + std::to_string(i));
      t->set_dtype(proto::DT_FLOAT32);
      t->add_shape(2);
      const float values[2] = {1.5f,
                               record_->nonfinite ? std::numeric_limits<float>::quiet_NaN() : 2.5f};
      t->set_content(std::string(reinterpret_cast<const char*>(values), sizeof values));
    }
    return absl::OkStatus();
  }
  Status PullRows(const std::vector<proto::PullRowsRequest>&, std::vector<proto::PullRowsResponse>*,
                  const std::vector<int>&) override {
    return NotForTheMaster();
  }
  Status Push(std::vector<proto::PushRequest>*, std::vector<proto::PushResponse>*,
              const std::vector<int>&) override {
    return NotForTheMaster();
  }
  Status Flush(std::vector<proto::FlushResponse>* responses, bool checkpoint) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    EDL_RETURN_IF_ERROR(record_->Fault(&record_->flush_failures));
    ++(checkpoint ? record_->checkpoints : record_->flushes);
    responses->assign(static_cast<size_t>(shards_), proto::FlushResponse());
    return absl::OkStatus();
  }
  Status Export(const std::string&, int64_t, std::vector<proto::ExportResponse>*) override {
    return absl::UnimplementedError("these servers hold no embedding tables");
  }
  Status SetGroup(const proto::SetGroupRequest& request) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    record_->generations.push_back(request.generation());
    record_->groups.emplace_back(request.workers().begin(), request.workers().end());
    return absl::OkStatus();
  }
  Status Stats(PsId, proto::PsStatsResponse*) override { return absl::OkStatus(); }

 private:
  static Status NotForTheMaster() {
    ADD_FAILURE() << "the master called a worker's parameter-server method";
    return absl::UnimplementedError("not the master's call");
  }
  ServersRecord* const record_;
  const int shards_;
};

// A worker or a parameter server, as the master hears them: calls over the
// Master service with the job's token.
class Caller {
 public:
  explicit Caller(const std::string& address)
      : stub_(proto::Master::NewStub(rpc::MakeChannel(address, {}))) {}

  Status RegisterPs(int ps) {
    proto::RegisterPsRequest request;
    request.set_ps_id(ps);
    request.set_address("fake-ps:" + std::to_string(ps));
    proto::RegisterPsResponse response;
    return Call(&proto::Master::Stub::RegisterPs, request, &response);
  }
  // Registers `worker` once the master has started it (FAILED_PRECONDITION
  // before) and every server registered (UNAVAILABLE before).
  Status RegisterWorker(int worker) {
    proto::RegisterWorkerRequest request;
    request.set_worker_id(worker);
    proto::RegisterWorkerResponse response;
    Status s;
    for (int i = 0; i < 500; ++i) {
      s = Call(&proto::Master::Stub::RegisterWorker, request, &response);
      if (s.ok() || (s.code() != absl::StatusCode::kUnavailable &&
                     s.code() != absl::StatusCode::kFailedPrecondition)) {
        return s;
      }
      std::this_thread::sleep_for(10ms);
    }
    return s;
  }
  StatusOr<proto::Task> GetTask(int worker) {
    proto::GetTaskRequest request;
    request.set_worker_id(worker);
    proto::GetTaskResponse response;
    EDL_RETURN_IF_ERROR(Call(&proto::Master::Stub::GetTask, request, &response));
    return response.task();
  }
  StatusOr<proto::GetJobStatusResponse> JobStatus() {
    proto::GetJobStatusRequest request;
    proto::GetJobStatusResponse response;
    EDL_RETURN_IF_ERROR(Call(&proto::Master::Stub::GetJobStatus, request, &response));
    return response;
  }
  // `task` trained whole (two minibatches).
  Status Done(int worker, const proto::Task& task) {
    proto::ReportTaskRequest report;
    report.set_worker_id(worker);
    report.set_task_id(task.task_id());
    report.set_attempt(task.attempt());
    report.set_minibatches_done(2);
    report.set_minibatches(2);
    report.set_records(task.end() - task.start());
    report.set_model_version(7);
    proto::ReportTaskResponse response;
    return Call(&proto::Master::Stub::ReportTask, report, &response);
  }
  // Trains every task `worker` gets until the job has none left for it, or
  // `tasks` of them; how many it trained.
  int Train(int worker, int tasks = std::numeric_limits<int>::max()) {
    int trained = 0;
    while (trained < tasks) {
      StatusOr<proto::Task> task = GetTask(worker);
      if (!task.ok() || task->type() == proto::TASK_NONE) break;
      if (task->type() == proto::TASK_WAIT) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      EXPECT_EQ(task->type(), proto::TASK_TRAINING);
      if (!Done(worker, *task).ok()) break;
      ++trained;
    }
    return trained;
  }

 private:
  template <typename Request, typename Response, typename Method>
  Status Call(Method method, const Request& request, Response* response) {
    auto context = rpc::MakeContext(2s, kToken);
    return rpc::FromGrpc((stub_.get()->*method)(context.get(), request, response));
  }
  std::unique_ptr<proto::Master::Stub> stub_;
};

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_dir_ = dir_.path() + "/job";
    ASSERT_TRUE(CreateDirectories(job_dir_ + "/" + kZooDir).ok());
    ASSERT_TRUE(WriteFileAtomically(job_dir_ + "/" + kZooDir + "/model.py", "# zoo\n").ok());
    // 40 records: 4 tasks of 2 minibatches of 5.
    const std::string data = dir_.path() + "/train.recordio";
    auto writer = RecordWriter::Create(data, RecordWriter::Options());
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE((*writer)->Write("r").ok());
    ASSERT_TRUE((*writer)->Close().ok());

    spec_.set_type(proto::JOB_TRAINING);
    spec_.set_job_name("master-test");
    spec_.set_job_dir(job_dir_);
    spec_.set_output(dir_.path() + "/model");
    spec_.mutable_tasks()->add_training_data(data);
    spec_.mutable_tasks()->set_minibatch_size(5);
    spec_.mutable_tasks()->set_num_minibatches_per_task(2);
    spec_.mutable_tasks()->set_num_epochs(1);
    spec_.mutable_ps()->set_num_ps(1);
    spec_.mutable_workers()->set_num_workers(2);
    spec_.mutable_fault_tolerance()->set_max_worker_relaunches(3);
  }

  MasterConfig Config() {
    MasterOptions options;
    options.job_dir = job_dir_;
    StatusOr<MasterConfig> config = ConfigureMaster(options, spec_, {kToken});
    EXPECT_TRUE(config.ok()) << config.status();
    return *config;
  }

  // A master of the job with the fakes; the backend is kept in backend_.
  std::unique_ptr<Master> Start(MasterConfig config) {
    MasterPeers peers;
    peers.make_backend = [this](const cluster::BackendConfig& c,
                                cluster::ClusterBackend::ExitCallback on_exit)
        -> StatusOr<std::unique_ptr<cluster::ClusterBackend>> {
      EXPECT_FALSE(c.master_address.empty());
      auto backend = std::make_unique<FakeBackend>(true, std::move(on_exit));
      backend_ = backend.get();
      return std::unique_ptr<cluster::ClusterBackend>(std::move(backend));
    };
    peers.connect_ps = [this](const std::vector<std::string>& addresses,
                              std::chrono::milliseconds) {
      for (const std::string& a : addresses) EXPECT_EQ(a.rfind("fake-ps:", 0), 0u) << a;
      return std::unique_ptr<rpc::ParameterServers>(
          std::make_unique<FakeServers>(&servers_, static_cast<int>(addresses.size())));
    };
    peers.clock = &clock_;
    StatusOr<std::unique_ptr<Master>> master = Master::Start(std::move(config), std::move(peers));
    EXPECT_TRUE(master.ok()) << master.status();
    return master.ok() ? std::move(*master) : nullptr;
  }

  // A first master of the job: a server and a worker register, the worker
  // trains three tasks, and the master dies without running its loop to
  // the end. Its address in `address`.
  void TrainThreeTasksAndDie(std::string* address) {
    std::unique_ptr<Master> first = Start(Config());
    ASSERT_NE(first, nullptr);
    *address = first->address();
    Caller caller(*address);
    ASSERT_TRUE(caller.RegisterPs(0).ok());
    ASSERT_TRUE(first->Tick().ok());  // starts the workers
    ASSERT_TRUE(caller.RegisterWorker(0).ok());
    EXPECT_EQ(caller.Train(0, 3), 3);
  }

  // Runs `master` on a thread of its own; join it with Outcome().
  void Run(Master* master) {
    run_ = std::thread([this, master] {
      outcome_ = master->Run(&cancel_);
      ran_ = true;
    });
  }
  // How the run ended; a run still going after 20 s is cancelled and fails
  // the test.
  Status Outcome() {
    for (int i = 0; i < 2000 && !ran_; ++i) std::this_thread::sleep_for(10ms);
    if (!ran_) {
      ADD_FAILURE() << "the job did not end; cancelling it";
      cancel_ = true;
    }
    run_.join();
    return outcome_;
  }

  // Registers the server and trains every task with workers 0 and 1.
  void TrainAll(Caller* caller) {
    ASSERT_TRUE(caller->RegisterPs(0).ok());
    ASSERT_TRUE(caller->RegisterWorker(0).ok());
    ASSERT_TRUE(caller->RegisterWorker(1).ok());
    std::thread other([caller] { caller->Train(1); });
    caller->Train(0);
    other.join();
  }

  // The server and workers 0 and 1 register, worker 0 trains a task, then
  // worker 1 dies: the servers' steps stop waiting for it (the group {0} is
  // published) and a replacement is started.
  void TrainATaskThenLoseWorkerOne(Caller* caller) {
    ASSERT_TRUE(caller->RegisterPs(0).ok());
    ASSERT_TRUE(caller->RegisterWorker(0).ok());
    ASSERT_TRUE(caller->RegisterWorker(1).ok());
    EXPECT_EQ(caller->Train(0, 1), 1);
    backend_->Exit(cluster::ProcessName::Worker(WorkerId(1)), false, "killed by SIGKILL");
    auto published = [this](const std::vector<int32_t>& group) {
      std::lock_guard<std::mutex> lock(servers_.mu);
      return std::find(servers_.groups.begin(), servers_.groups.end(), group) !=
             servers_.groups.end();
    };
    for (int i = 0; i < 500 && !published({0}); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(published({0}));
  }

  // A master of the job run to its end, its server registered and every
  // task trained by workers 0 and 1: how the run ended.
  Status TrainJob() {
    std::unique_ptr<Master> master = Start(Config());
    if (master == nullptr) return absl::InternalError("no master");
    Run(master.get());
    Caller caller(master->address());
    TrainAll(&caller);
    return Outcome();
  }

  proto::GetJobStatusResponse FinalStatus() {
    proto::GetJobStatusResponse status;
    StatusOr<std::string> text = ReadFileToString(FinalStatusFile(job_dir_));
    EXPECT_TRUE(text.ok()) << text.status();
    if (text.ok()) {
      EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &status));
    }
    return status;
  }

  ::elasticdl::testing::TempDir dir_;
  std::string job_dir_;
  proto::JobSpec spec_;
  ServersRecord servers_;
  FakeBackend* backend_ = nullptr;
  ::elasticdl::testing::ManualClock clock_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> ran_{false};
  std::thread run_;
  Status outcome_;
};

TEST_F(MasterTest, TrainsToTheEndAndWritesTheResultsOnce) {
  spec_.mutable_ps()->set_checkpoint_steps(10);
  std::unique_ptr<Master> master = Start(Config());
  ASSERT_NE(master, nullptr);
  EXPECT_FALSE(master->resumed());
  StatusOr<std::string> address = ReadFileToString(MasterAddressFile(job_dir_));
  ASSERT_TRUE(address.ok());
  EXPECT_EQ(*address, master->address());
  Run(master.get());
  Caller caller(master->address());
  // The client watches the job through the master's RPC, dashboard included.
  StatusOr<proto::GetJobStatusResponse> status = caller.JobStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->dashboard_url().rfind("http://127.0.0.1:", 0), 0u) << status->dashboard_url();
  EXPECT_EQ(status->workers_target(), 2);
  TrainAll(&caller);
  ASSERT_TRUE(Outcome().ok()) << outcome_;

  {
    std::lock_guard<std::mutex> lock(backend_->mu);
    EXPECT_EQ(backend_->ps_started, (std::vector<std::pair<PsId, bool>>{{PsId(0), false}}));
    EXPECT_EQ(backend_->workers_started, testing::WorkerIds({0, 1}));
    EXPECT_EQ(backend_->stops, 1);
  }
  // Synchronous steps: what waits is applied once, then the last checkpoint
  // and the model are written once each.
  EXPECT_EQ(servers_.flushes, 1);
  EXPECT_EQ(servers_.checkpoints, 1);
  EXPECT_EQ(servers_.pulls, 1);
  StatusOr<proto::TrainedModel> model = ReadTrainedModelRecord(spec_.output());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->model_version(), 7);
  EXPECT_TRUE(std::filesystem::exists(spec_.output() + "/zoo/model.py"));
  const proto::GetJobStatusResponse final_status = FinalStatus();
  EXPECT_TRUE(final_status.finished());
  EXPECT_FALSE(final_status.failed()) << final_status.message();
}

TEST_F(MasterTest, TrainingBeginsWithMinWorkersAndTheOthersJoin) {
  spec_.mutable_workers()->set_num_workers(3);
  spec_.mutable_workers()->set_min_workers(2);
  std::unique_ptr<Master> master = Start(Config());
  ASSERT_NE(master, nullptr);
  Run(master.get());
  Caller caller(master->address());
  ASSERT_TRUE(caller.RegisterPs(0).ok());
  // The master starts its three workers once the server has registered (its
  // run loop, on a thread of its own); until then it knows of none to wait
  // for.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto started = [this] {
    std::lock_guard<std::mutex> lock(backend_->mu);
    return backend_->workers_started.size();
  };
  while (started() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(started(), 3u);
  ASSERT_TRUE(caller.RegisterWorker(0).ok());
  // One of the two it needs: worker 0 waits (its Slurm peers may pend).
  StatusOr<proto::Task> task = caller.GetTask(0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->type(), proto::TASK_WAIT);
  ASSERT_TRUE(caller.RegisterWorker(1).ok());
  task = caller.GetTask(0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->type(), proto::TASK_TRAINING);
  ASSERT_TRUE(caller.Done(0, *task).ok());
  // The third starts late and is dealt a task at once (asked before the
  // others go on, which could otherwise take every task first).
  ASSERT_TRUE(caller.RegisterWorker(2).ok());
  EXPECT_EQ(caller.Train(2, 1), 1);
  std::thread one([&caller] { caller.Train(1); });
  std::thread two([&caller] { caller.Train(2); });
  caller.Train(0);
  one.join();
  two.join();
  ASSERT_TRUE(Outcome().ok()) << outcome_;
}

TEST_F(MasterTest, OneMinWorkerTrainsAloneUntilTheOtherRegisters) {
  spec_.mutable_workers()->set_min_workers(1);
  std::unique_ptr<Master> master = Start(Config());
  ASSERT_NE(master, nullptr);
  Run(master.get());
  Caller caller(master->address());
  ASSERT_TRUE(caller.RegisterPs(0).ok());
  ASSERT_TRUE(caller.RegisterWorker(0).ok());
  StatusOr<proto::Task> task = caller.GetTask(0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->type(), proto::TASK_TRAINING);
  ASSERT_TRUE(caller.Done(0, *task).ok());
  // The servers wait for worker 0 alone; worker 1 joins with its first task.
  auto published = [this](const std::vector<int32_t>& group) {
    for (int i = 0; i < 300; ++i) {
      {
        std::lock_guard<std::mutex> lock(servers_.mu);
        if (!servers_.groups.empty() && servers_.groups.back() == group) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  };
  EXPECT_TRUE(published({0}));
  ASSERT_TRUE(caller.RegisterWorker(1).ok());
  EXPECT_GT(caller.Train(1, 1), 0);
  EXPECT_TRUE(published({0, 1}));
  std::thread other([&caller] { caller.Train(1); });
  caller.Train(0);
  other.join();
  ASSERT_TRUE(Outcome().ok()) << outcome_;
}

TEST_F(MasterTest, KeepsFlushingAServerLostMidFlush) {
  servers_.flush_failures = 3;
  ASSERT_TRUE(TrainJob().ok()) << outcome_;
  EXPECT_EQ(servers_.failed_calls, 3);
  // The model is read only after the flush went through.
  EXPECT_EQ(servers_.flushes, 1);
  EXPECT_EQ(servers_.pulls, 1);
  EXPECT_FALSE(FinalStatus().failed());
}

TEST_F(MasterTest, PublishesEveryChangeOfTheTrainingGroupAsItHappens) {
  MasterConfig config = Config();
  // Longer than Outcome waits: the calls that change the job and the
  // processes' exits wake the loop, which would otherwise sleep through the
  // job and fail it by cancellation.
  config.idle_tick = 30s;
  std::unique_ptr<Master> master = Start(std::move(config));
  ASSERT_NE(master, nullptr);
  Run(master.get());
  Caller caller(master->address());
  TrainATaskThenLoseWorkerOne(&caller);
  caller.Train(0);
  ASSERT_TRUE(Outcome().ok()) << outcome_;

  std::lock_guard<std::mutex> lock(servers_.mu);
  // Until the first task goes out the group is empty, and the master's loop
  // may publish it so (once the server has registered) before the workers'.
  std::vector<std::vector<int32_t>> groups;
  for (const std::vector<int32_t>& group : servers_.groups) {
    if (!group.empty() || !groups.empty()) groups.push_back(group);
  }
  ASSERT_GE(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(groups[1], (std::vector<int32_t>{0}));
  for (size_t i = 1; i < servers_.generations.size(); ++i) {
    EXPECT_GT(servers_.generations[i], servers_.generations[i - 1]);
  }
  std::lock_guard<std::mutex> backend_lock(backend_->mu);
  EXPECT_EQ(backend_->workers_started, testing::WorkerIds({0, 1, 2}));
}

TEST_F(MasterTest, AsynchronousTrainingNeitherFlushesNorPublishesAGroup) {
  spec_.mutable_ps()->mutable_update()->set_mode(proto::UpdateRule::ASYNC);
  ASSERT_TRUE(TrainJob().ok()) << outcome_;
  EXPECT_EQ(servers_.flushes, 0);
  EXPECT_TRUE(servers_.groups.empty());
  EXPECT_EQ(servers_.pulls, 1);
}

TEST_F(MasterTest, FailsWhenTheModelCannotBeReadWithinItsPatience) {
  servers_.pull_failures = -1;
  std::unique_ptr<Master> master = Start(Config());
  ASSERT_NE(master, nullptr);
  Run(master.get());
  Caller caller(master->address());
  TrainAll(&caller);
  // The server does not answer: the master tries again while its patience
  // (60 s by the master's clock) lasts...
  auto failed_calls = [this] {
    std::lock_guard<std::mutex> lock(servers_.mu);
    return servers_.failed_calls;
  };
  for (int i = 0; i < 500 && failed_calls() < 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(failed_calls(), 3);
  EXPECT_FALSE(ran_);
  clock_.Advance(59s);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran_);
  // ...and fails the job once it is spent.
  clock_.Advance(2s);
  Status outcome = Outcome();
  EXPECT_TRUE(rpc::IsUnreachable(outcome)) << outcome;
  EXPECT_NE(outcome.message().find("writing the trained model"), std::string::npos) << outcome;
  EXPECT_GE(servers_.failed_calls, 1);
  EXPECT_FALSE(std::filesystem::exists(spec_.output()));
  const proto::GetJobStatusResponse status = FinalStatus();
  EXPECT_TRUE(status.failed());
  EXPECT_NE(status.message().find("connection refused"), std::string::npos) << status.message();
}

TEST_F(MasterTest, RefusesToWriteAModelHoldingNaN) {
  servers_.nonfinite = true;
  Status outcome = TrainJob();
  EXPECT_EQ(outcome.code(), absl::StatusCode::kDataLoss) << outcome;
  EXPECT_NE(outcome.message().find("'w0' holds non-finite values"), std::string::npos) << outcome;
  EXPECT_EQ(servers_.pulls, 1);  // not retried: the model will not get better
  EXPECT_FALSE(ReadTrainedModelRecord(spec_.output()).ok());
}

TEST_F(MasterTest, CancelledJobStopsEveryoneAndSaysSo) {
  std::unique_ptr<Master> master = Start(Config());
  ASSERT_NE(master, nullptr);
  Run(master.get());
  Caller caller(master->address());
  ASSERT_TRUE(caller.RegisterPs(0).ok());
  ASSERT_TRUE(caller.RegisterWorker(0).ok());
  EXPECT_EQ(caller.Train(0, 1), 1);
  cancel_ = true;
  EXPECT_EQ(Outcome().code(), absl::StatusCode::kCancelled);
  const proto::GetJobStatusResponse status = FinalStatus();
  EXPECT_TRUE(status.failed());
  EXPECT_TRUE(status.cancelled());
  std::lock_guard<std::mutex> lock(backend_->mu);
  EXPECT_EQ(backend_->stops, 1);
  EXPECT_EQ(servers_.pulls, 0);
}

TEST_F(MasterTest, ASecondMasterResumesTheJobAtTheSameAddress) {
  std::string address;
  ASSERT_NO_FATAL_FAILURE(TrainThreeTasksAndDie(&address));
  std::unique_ptr<Master> second = Start(Config());
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->resumed());
  EXPECT_EQ(second->address(), address);
  {
    std::lock_guard<std::mutex> lock(backend_->mu);
    // It watches the processes the first one started instead of starting
    // new ones.
    EXPECT_TRUE(backend_->ps_started.empty());
    EXPECT_EQ(backend_->adopted, (std::vector<std::string>{"ps-0", "worker-0", "worker-1"}));
  }
  Run(second.get());
  Caller caller(address);
  ASSERT_TRUE(caller.RegisterPs(0).ok());
  ASSERT_TRUE(caller.RegisterWorker(0).ok());
  // Only the task not done before is left.
  EXPECT_EQ(caller.Train(0), 1);
  ASSERT_TRUE(Outcome().ok()) << outcome_;
  EXPECT_EQ(FinalStatus().master_restarts(), 1);
}

TEST_F(MasterTest, ASecondMasterWhosePortIsTakenServesElsewhereAndSaysWhere) {
  std::string address;
  ASSERT_NO_FATAL_FAILURE(TrainThreeTasksAndDie(&address));
  // Something else listens on the old port by the time the master is back.
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const int squatter = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(squatter, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The old master's connections may linger in TIME_WAIT; a port another
  // process took meanwhile is taken as well.
  const int reuse = 1;
  ASSERT_EQ(::setsockopt(squatter, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse), 0);
  if (::bind(squatter, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0) {
    ASSERT_EQ(::listen(squatter, 1), 0);
  } else {
    ASSERT_EQ(errno, EADDRINUSE);
  }
  std::unique_ptr<Master> second = Start(Config());
  ::close(squatter);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->resumed());
  EXPECT_NE(second->address(), address);
  // Where the job's processes look for it.
  EXPECT_EQ(ReadFileToString(MasterAddressFile(job_dir_)).value_or(""), second->address());
  Run(second.get());
  Caller caller(second->address());
  ASSERT_TRUE(caller.RegisterPs(0).ok());
  ASSERT_TRUE(caller.RegisterWorker(0).ok());
  EXPECT_EQ(caller.Train(0), 1);
  ASSERT_TRUE(Outcome().ok()) << outcome_;
}

TEST_F(MasterTest, DataThatCannotBeReadStopsTheStart) {
  spec_.mutable_tasks()->set_training_data(0, dir_.path() + "/missing.recordio");
  MasterPeers peers;
  peers.make_backend = [](const cluster::BackendConfig&, cluster::ClusterBackend::ExitCallback)
      -> StatusOr<std::unique_ptr<cluster::ClusterBackend>> {
    ADD_FAILURE() << "a job whose data cannot be read started a backend";
    return absl::InternalError("unexpected");
  };
  StatusOr<std::unique_ptr<Master>> master = Master::Start(Config(), std::move(peers));
  ASSERT_FALSE(master.ok());
  EXPECT_NE(master.status().message().find("--training_data"), std::string::npos)
      << master.status();
}

// Each file's records once, in order, in tasks of at most records_per_task.
std::vector<int64_t> TaskSizesOf(const std::vector<Range>& ranges, const std::string& file) {
  std::vector<int64_t> sizes;
  int64_t next = 0;
  for (const Range& r : ranges) {
    if (r.file != file) continue;
    EXPECT_EQ(r.start, next) << file;
    next = r.end;
    sizes.push_back(r.end - r.start);
  }
  return sizes;
}

TEST(SplitIntoTasksTest, FullTasksFirstOrTheRecordsDealtEvenly) {
  const std::vector<Shard> shards = {{"a", 10000}, {"b", 100}, {"c", 0}, {"d", 1024}, {"e", 1025}};
  std::vector<Range> full = SplitIntoTasks(shards, 512);
  std::vector<int64_t> a = TaskSizesOf(full, "a");
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(std::count(a.begin(), a.end(), 512), 19);
  EXPECT_EQ(a.back(), 272);  // 5 minibatches of 64 against the others' 8
  EXPECT_EQ(TaskSizesOf(full, "b"), std::vector<int64_t>{100});
  EXPECT_TRUE(TaskSizesOf(full, "c").empty());
  EXPECT_EQ(TaskSizesOf(full, "d"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(TaskSizesOf(full, "e"), (std::vector<int64_t>{512, 512, 1}));

  // As many tasks, each of a file's the same number of minibatches of 64.
  std::vector<Range> even = SplitIntoTasks(shards, 512, TaskSizes::kEven);
  EXPECT_EQ(even.size(), full.size());
  EXPECT_EQ(TaskSizesOf(even, "a"), std::vector<int64_t>(20, 500));  // 8 minibatches each
  EXPECT_EQ(TaskSizesOf(even, "b"), std::vector<int64_t>{100});
  EXPECT_TRUE(TaskSizesOf(even, "c").empty());
  EXPECT_EQ(TaskSizesOf(even, "d"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(TaskSizesOf(even, "e"), (std::vector<int64_t>{342, 342, 341}));
}

// The configuration is derived from the spec in one place.
TEST(MasterConfigTest, DerivesEachRoleFromTheSpec) {
  MasterOptions options;
  options.job_dir = "/jobs/a";
  options.binary = "/bin/elasticdl";
  proto::JobSpec spec;
  spec.set_type(proto::JOB_TRAINING);
  spec.mutable_tasks()->set_minibatch_size(8);
  spec.mutable_tasks()->set_num_minibatches_per_task(4);
  spec.mutable_ps()->set_num_ps(3);
  spec.mutable_ps()->set_checkpoint_steps(100);
  spec.mutable_workers()->set_num_workers(5);
  spec.mutable_fault_tolerance()->set_max_worker_relaunches(9);
  StatusOr<MasterConfig> config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->records_per_task, 32);
  EXPECT_EQ(config->state.num_ps, 3);
  EXPECT_EQ(config->supervisor.num_ps, 3);
  EXPECT_EQ(config->supervisor.max_worker_relaunches, 9);
  EXPECT_EQ(config->state.workers_target, 5);
  EXPECT_EQ(config->state.worker_lease, std::chrono::milliseconds(kDefaultWorkerLeaseMs));
  EXPECT_TRUE(config->state.flush_at_end);
  EXPECT_TRUE(config->publish_group);
  EXPECT_TRUE(config->checkpoint_at_end);
  EXPECT_EQ(config->training_task_sizes, TaskSizes::kEven);  // synchronous steps
  EXPECT_EQ(config->backend.kind, "local");
  EXPECT_EQ(config->backend.binary, "/bin/elasticdl");
  EXPECT_EQ(config->host, "127.0.0.1");
  EXPECT_EQ(config->observer.credentials.token, "t");

  spec.mutable_ps()->mutable_update()->set_mode(proto::UpdateRule::SYNC_FIXED);
  config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->state.flush_at_end);
  EXPECT_FALSE(config->publish_group);
  EXPECT_EQ(config->training_task_sizes, TaskSizes::kEven);
  spec.mutable_ps()->mutable_update()->set_mode(proto::UpdateRule::ASYNC);
  config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->training_task_sizes, TaskSizes::kFullFirst);  // no lockstep
  spec.set_strategy(proto::ALLREDUCE_STRATEGY);
  config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->training_task_sizes, TaskSizes::kEven);  // collective steps
  spec.set_strategy(proto::PARAMETER_SERVER_STRATEGY);
  spec.mutable_ps()->mutable_update()->set_mode(proto::UpdateRule::SYNC_FIXED);

  // Prediction needs servers only to restore a model's embedding tables.
  spec.set_type(proto::JOB_PREDICTION);
  config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->state.num_ps, 0);
  EXPECT_FALSE(config->state.flush_at_end);
  EXPECT_FALSE(config->checkpoint_at_end);
  spec.mutable_ps()->set_checkpoint_dir_for_init("/ckpt");
  config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->state.num_ps, 3);
}

TEST(MasterConfigTest, ServesWhereTheJobSays) {
  MasterOptions options;
  options.job_dir = "/jobs/a";
  proto::JobSpec spec;
  spec.mutable_tasks()->set_minibatch_size(1);
  spec.mutable_tasks()->set_num_minibatches_per_task(1);
  spec.mutable_cluster()->set_master_addr("10.0.0.7:7000");
  StatusOr<MasterConfig> config = ConfigureMaster(options, spec, {"t"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "10.0.0.7");
  EXPECT_EQ(config->port, 7000);
  EXPECT_EQ(config->observer.host, "10.0.0.7");

  spec.mutable_cluster()->set_master_addr(":7000");
  config = ConfigureMaster(options, spec, {"t"});
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("--master_addr=:7000"), std::string::npos);
}

TEST(MasterConfigTest, RefusesTasksWithoutRecords) {
  MasterOptions options;
  proto::JobSpec spec;
  spec.mutable_tasks()->set_minibatch_size(16);
  StatusOr<MasterConfig> config = ConfigureMaster(options, spec, {"t"});
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("--num_minibatches_per_task=0"), std::string::npos)
      << config.status();
}

}  // namespace
}  // namespace elasticdl::master
