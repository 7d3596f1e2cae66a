#include "worker/worker.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "elasticdl/data/record_file.h"
#include "elasticdl/seed.h"
#include "ps/parameter_store.h"
#include "rpc/grpc_util.h"
#include "testing/temp_dir.h"
#include "zoo/zoo_library.h"

namespace elasticdl::worker {
namespace {

using namespace std::chrono_literals;

// The model: y = w * x, w starting at 0; loss = sum of outputs, so that
// every record lowers w by lr * x. With x = 1 per record and SGD(1), w ends
// at minus the number of records applied: a record applied twice or lost
// shows.
std::shared_ptr<Model> counting_model(const Params&) {
  auto linear = torch::nn::Linear(torch::nn::LinearOptions(1, 1).bias(false));
  torch::NoGradGuard no_grad;
  linear->weight.zero_();
  return Functional(Input("x", {1}), torch::nn::Sequential(linear));
}

// Where dataset_fn's map function ran, and whether it draws from
// LibTorch's global generator (as a random augmentation written with
// torch::rand and no generator would).
struct PipelineThreads {
  std::mutex mu;
  std::set<std::thread::id> seen;
  std::atomic<bool> draws{false};
};
PipelineThreads& pipeline_threads() {
  static PipelineThreads* threads = new PipelineThreads();
  return *threads;
}

Dataset<Example> dataset_fn(Dataset<Record> records, Mode) {
  return records.map([](const Record&) -> StatusOr<Example> {
    PipelineThreads& threads = pipeline_threads();
    {
      std::lock_guard<std::mutex> lock(threads.mu);
      threads.seen.insert(std::this_thread::get_id());
    }
    if (threads.draws) torch::rand({1});
    Example e;
    e.features["x"] = torch::ones({1});
    e.labels = torch::zeros({1});
    return e;
  });
}

torch::Tensor loss(const torch::Tensor&, const torch::Tensor& predictions) {
  return predictions.sum();
}

OptimizerSpec optimizer() { return torch::optim::SGDOptions(1.0); }

ZooProgram Program() {
  static ZooRegistry* registry = [] {
    auto* r = new ZooRegistry();
    auto add = [r](const char* name, ZooEntry e) {
      e.module = "testzoo.worker";
      e.name = name;
      r->Add(std::move(e));
    };
    add("counting_model", zoo_internal::MakeEntry(counting_model));
    add("dataset_fn", zoo_internal::MakeEntry(dataset_fn));
    add("loss", zoo_internal::MakeEntry(loss));
    add("optimizer", zoo_internal::MakeEntry(optimizer));
    return r;
  }();
  ZooProgramNames names;
  names.model_def = "testzoo.worker.counting_model";
  auto library = ZooLibrary::FromRegistry(registry, "testzoo");
  EXPECT_TRUE(library.ok()) << library.status();
  auto program = ZooProgram::Resolve(*library, names, "");
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

// A master that hands out the tasks it was given, one at a time, and
// records what it hears; a task reported stopped goes back to the front of
// the queue from where it stopped, as the job's master queues it again.
// Faults: `unreachable_calls` calls fail as unreachable first;
// `forget_worker` answers heartbeats as to a worker taken as lost;
// `ask_to_leave` answers heartbeats with leave; each report takes
// `slow_report`; the first `failed_reports` reports fail;
// `hold_asks_until` holds the answers to asks ahead.
class FakeMaster : public MasterClient {
 public:
  Status RegisterWorker(const proto::RegisterWorkerRequest&,
                        proto::RegisterWorkerResponse* response,
                        std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu);
    EDL_RETURN_IF_ERROR(Fault());
    ++registrations;
    response->add_ps_addresses("fake:1");
    return absl::OkStatus();
  }
  Status GetTask(const proto::GetTaskRequest& request, proto::GetTaskResponse* response,
                 std::chrono::milliseconds) override {
    if (request.has_keep() && hold_asks_until) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      bool released = hold_asks_until();
      while (!released && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        released = hold_asks_until();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!released) ++asks_given_up;
    }
    std::lock_guard<std::mutex> lock(mu);
    EDL_RETURN_IF_ERROR(Fault());
    if (request.has_keep()) kept.push_back(request.keep().task_id());
    if (tasks.empty()) {
      response->mutable_task()->set_type(proto::TASK_NONE);
    } else {
      *response->mutable_task() = tasks.front();
      handed[tasks.front().task_id()] = tasks.front();
      tasks.pop_front();
    }
    return absl::OkStatus();
  }
  Status ReportTask(const proto::ReportTaskRequest& request, proto::ReportTaskResponse*,
                    std::chrono::milliseconds) override {
    std::this_thread::sleep_for(slow_report);
    std::lock_guard<std::mutex> lock(mu);
    EDL_RETURN_IF_ERROR(Fault());
    reports.push_back(request);
    if (request.stopped() && handed.count(request.task_id()) != 0) {
      proto::Task again = handed[request.task_id()];
      again.set_minibatches_done(request.minibatches_done());
      tasks.push_front(again);
    }
    if (failed_reports > 0) {
      --failed_reports;
      return absl::InternalError("the master's journal cannot be written");
    }
    return absl::OkStatus();
  }
  Status Heartbeat(const proto::HeartbeatRequest& request, proto::HeartbeatResponse* response,
                   std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu);
    heartbeats.push_back(request);
    if (forget_worker) return absl::FailedPreconditionError("worker 0 is not a worker of this job");
    response->set_leave(ask_to_leave);
    return absl::OkStatus();
  }
  void Reconnect() override { ++reconnects; }

  Status Fault() {
    if (unreachable_calls > 0) {
      --unreachable_calls;
      ++failed_calls;
      return absl::UnavailableError("connection refused");
    }
    return absl::OkStatus();
  }

  std::mutex mu;
  std::deque<proto::Task> tasks;
  std::vector<proto::ReportTaskRequest> reports;
  std::vector<proto::HeartbeatRequest> heartbeats;
  std::vector<int64_t> kept;              // tasks kept asking ahead
  std::map<int64_t, proto::Task> handed;  // by id, as last handed out
  // When set, an ask ahead is answered once this holds (or after 5 s).
  std::function<bool()> hold_asks_until;
  int asks_given_up = 0;  // asks ahead answered after the 5 s
  int unreachable_calls = 0;
  int failed_calls = 0;
  int registrations = 0;
  std::atomic<int> reconnects{0};
  bool forget_worker = false;
  bool ask_to_leave = false;
  std::chrono::milliseconds slow_report{0};
  int failed_reports = 0;
};

// One parameter server: a real ParameterStore in this process, and the
// faults it plays: `refuse_pushes` pushes are answered as refused (a stale
// version); `unreachable_pushes` fail as if the server were gone;
// `slow_push` makes each push take that long.
struct ServerState {
  static ps::ParameterStoreOptions Options() {
    ps::ParameterStoreOptions options;
    options.optimizer = torch::optim::SGDOptions(1.0);
    options.use_async = true;
    options.instance = 7;
    return options;
  }

  // The model's only weight.
  float weight() {
    proto::PullRequest request;
    request.set_known_version(-1);
    proto::PullResponse response;
    EXPECT_TRUE(store.Pull(request, &response).ok());
    const std::string& bytes = response.values().parameters(0).content();
    float w = 0;
    std::memcpy(&w, bytes.data(), sizeof w);
    return w;
  }

  ps::ParameterStore store{Options()};
  std::atomic<int> pushes{0};
  int refuse_pushes = 0;
  int unreachable_pushes = 0;
  std::chrono::milliseconds slow_push{0};
};

// What the worker owns: a connection to the test's server, so that
// connecting again (after a loss) reaches the same one.
class FakeServers : public rpc::ParameterServers {
 public:
  explicit FakeServers(ServerState* server) : server_(server) {}

  int num_shards() const override { return 1; }
  Status Init(const std::vector<proto::InitRequest>& requests,
              std::vector<proto::InitResponse>* responses) override {
    responses->resize(1);
    bool accepted = false;
    int64_t version = 0;
    EDL_RETURN_IF_ERROR(server_->store.Init(requests[0].values(), &accepted, &version));
    (*responses)[0].set_accepted(accepted);
    (*responses)[0].set_version(version);
    return absl::OkStatus();
  }
  Status Pull(const std::vector<proto::PullRequest>& requests,
              std::vector<proto::PullResponse>* responses) override {
    responses->resize(1);
    return server_->store.Pull(requests[0], &(*responses)[0]);
  }
  Status PullRows(const std::vector<proto::PullRowsRequest>& requests,
                  std::vector<proto::PullRowsResponse>* responses,
                  const std::vector<int>&) override {
    responses->resize(1);
    return server_->store.PullRows(requests[0], &(*responses)[0]);
  }
  Status Push(std::vector<proto::PushRequest>* requests,
              std::vector<proto::PushResponse>* responses, const std::vector<int>&) override {
    if (server_->slow_push.count() > 0) std::this_thread::sleep_for(server_->slow_push);
    responses->resize(1);
    ++server_->pushes;
    if (server_->unreachable_pushes > 0) {
      --server_->unreachable_pushes;
      return absl::UnavailableError("parameter server 0: connection refused");
    }
    if (server_->refuse_pushes > 0) {
      --server_->refuse_pushes;
      (*responses)[0].set_accepted(false);
      return absl::OkStatus();
    }
    return server_->store.Push((*requests)[0], &(*responses)[0]);
  }
  // The worker never calls what only the master does.
  Status Flush(std::vector<proto::FlushResponse>*, bool) override { return NotForWorkers(); }
  Status Export(const std::string&, int64_t, std::vector<proto::ExportResponse>*) override {
    return NotForWorkers();
  }
  Status SetGroup(const proto::SetGroupRequest&) override { return NotForWorkers(); }
  Status Stats(PsId, proto::PsStatsResponse*) override { return NotForWorkers(); }

 private:
  static Status NotForWorkers() {
    ADD_FAILURE() << "a worker called the master's parameter-server method";
    return absl::UnimplementedError("not a worker's call");
  }
  ServerState* const server_;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    records_ = dir_.path() + "/records.recordio";
    auto writer = RecordWriter::Create(records_, RecordWriter::Options());
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 64; ++i) ASSERT_TRUE((*writer)->Write("r").ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }

  // `tasks` training tasks of 16 records each (4 minibatches of 4).
  void AddTasks(int tasks) {
    for (int i = 0; i < tasks; ++i) {
      proto::Task task;
      task.set_task_id(i);
      task.set_type(proto::TASK_TRAINING);
      task.set_file(records_);
      task.set_start(i * 16);
      task.set_end((i + 1) * 16);
      task.set_attempt(1);
      master_->tasks.push_back(task);
    }
  }

  // Runs a worker through three tasks of `dataset_fn`, whose map function
  // draws from LibTorch's global generator or not; the threads it ran on.
  std::set<std::thread::id> PipelineThreadsOfThreeTasks(bool draws) {
    PipelineThreads& threads = pipeline_threads();
    threads.seen.clear();
    threads.draws = draws;
    AddTasks(3);
    const Status run = MakeWorker()->Run();
    threads.draws = false;
    EXPECT_TRUE(run.ok()) << run;
    return threads.seen;
  }

  std::unique_ptr<Worker> MakeWorker(int lease_ms = 200) {
    WorkerJob job;
    job.minibatch_size = 4;
    job.lease = std::chrono::milliseconds(lease_ms);
    job.predictions_dir = dir_.path() + "/predictions";
    WorkerOptions options;
    options.worker_id = 0;
    options.stop = &stop_;
    options.master_patience = 2s;
    options.register_patience = 2s;
    WorkerPeers peers;
    peers.master = std::unique_ptr<MasterClient>(master_);
    ServerState* server = servers_.get();
    peers.connect_ps = [this, server](const std::vector<std::string>&) {
      ++connects_;
      return std::unique_ptr<rpc::ParameterServers>(std::make_unique<FakeServers>(server));
    };
    return std::make_unique<Worker>(options, job, Program(), std::move(peers));
  }

  testing::TempDir dir_;
  std::string records_;
  std::atomic<bool> stop_{false};
  // Owned by the worker once made; the test keeps a view.
  FakeMaster* master_ = new FakeMaster();
  std::unique_ptr<ServerState> servers_ = std::make_unique<ServerState>();
  int connects_ = 0;
};

TEST_F(WorkerTest, TrainsEveryRecordOnceAndReportsEachTask) {
  AddTasks(3);
  auto worker = MakeWorker();
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_FLOAT_EQ(servers_->weight(), -48);
  ASSERT_EQ(master_->reports.size(), 3u);
  for (size_t t = 0; t < master_->reports.size(); ++t) {
    const proto::ReportTaskRequest& report = master_->reports[t];
    EXPECT_EQ(report.minibatches_done(), 4);
    EXPECT_FALSE(report.stopped());
    EXPECT_EQ(report.error(), "");
    // One push per minibatch, timed in the shared buckets. Each push is
    // answered with the values after its step: a task pulls at its start
    // only (the first one's count includes the worker's start-up pulls).
    ASSERT_EQ(report.rpc_seconds().count("push"), 1u);
    const proto::Histogram& push = report.rpc_seconds().at("push");
    EXPECT_EQ(push.count(), 4);
    EXPECT_EQ(std::vector<double>(push.bounds().begin(), push.bounds().end()), LatencyBounds());
    EXPECT_EQ(std::accumulate(push.counts().begin(), push.counts().end(), int64_t{0}), 4);
    if (t > 0) EXPECT_EQ(report.rpc_seconds().at("pull").count(), 1);
  }
}

TEST_F(WorkerTest, APipelineThatLeavesTheGlobalGeneratorAloneRunsAheadOfTheModel) {
  const std::set<std::thread::id> seen = PipelineThreadsOfThreeTasks(/*draws=*/false);
  EXPECT_FLOAT_EQ(servers_->weight(), -48);
  // Each task's first pull on the training thread (this one), the rest on
  // the pipeline's own.
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 1u);
  EXPECT_GT(seen.size(), 1u);
}

TEST_F(WorkerTest, APipelineThatDrawsFromTheGlobalGeneratorStaysOnTheTrainingThread) {
  const std::set<std::thread::id> seen = PipelineThreadsOfThreeTasks(/*draws=*/true);
  EXPECT_FLOAT_EQ(servers_->weight(), -48);
  EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_F(WorkerTest, RetriesAMasterThatIsUnreachableForAWhile) {
  AddTasks(1);
  master_->unreachable_calls = 5;  // registration and the first asks
  auto worker = MakeWorker();
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_EQ(master_->failed_calls, 5);
  EXPECT_GE(master_->reconnects.load(), 1);
  EXPECT_FLOAT_EQ(servers_->weight(), -16);
}

TEST_F(WorkerTest, GivesUpOnAMasterGoneLongerThanItsPatience) {
  AddTasks(1);
  master_->unreachable_calls = 1 << 30;
  auto worker = MakeWorker();
  const auto start = std::chrono::steady_clock::now();
  Status s = worker->Run();
  EXPECT_TRUE(rpc::IsUnreachable(s)) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST_F(WorkerTest, ARefusedPushIsComputedAgainOnTheNewModelAndAppliedOnce) {
  AddTasks(1);
  servers_->refuse_pushes = 2;
  auto worker = MakeWorker();
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_EQ(servers_->pushes.load(), 4 + 2);
  EXPECT_FLOAT_EQ(servers_->weight(), -16);
  ASSERT_EQ(master_->reports.size(), 1u);
  EXPECT_EQ(master_->reports[0].minibatches_done(), 4);
}

TEST_F(WorkerTest, ALostServerHandsTheTaskBackAndReconnects) {
  AddTasks(2);
  servers_->unreachable_pushes = 1;
  auto worker = MakeWorker();
  // The worker hands back task 0 at once, and task 1 if it holds it
  // already; the master queues them again.
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_EQ(master_->registrations, 2);  // again after the loss, for the new address
  EXPECT_EQ(connects_, 2);
  ASSERT_GE(master_->reports.size(), 1u);
  EXPECT_TRUE(master_->reports[0].stopped());
  EXPECT_EQ(master_->reports[0].minibatches_done(), 0);
  // Task 0 twice (handed back, then done) and task 1: 32 records applied.
  EXPECT_FLOAT_EQ(servers_->weight(), -32);
}

TEST_F(WorkerTest, HeartbeatsCarryTheTasksProgress) {
  AddTasks(2);
  servers_->slow_push = 30ms;
  auto worker = MakeWorker(/*lease_ms=*/100);
  ASSERT_TRUE(worker->Run().ok());
  std::lock_guard<std::mutex> lock(master_->mu);
  ASSERT_GE(master_->heartbeats.size(), 3u);
  bool saw_progress = false;
  for (const auto& h : master_->heartbeats) {
    EXPECT_EQ(h.worker_id(), 0);
    if (h.task_id() >= 0 && h.minibatches_done() > 0) saw_progress = true;
  }
  EXPECT_TRUE(saw_progress);
}

TEST_F(WorkerTest, TheNextTaskTrainsWhileTheLastOneIsReported) {
  AddTasks(3);
  servers_->slow_push = 30ms;
  master_->slow_report = 150ms;
  auto worker = MakeWorker(/*lease_ms=*/100);
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_FLOAT_EQ(servers_->weight(), -48);
  std::lock_guard<std::mutex> lock(master_->mu);
  ASSERT_EQ(master_->reports.size(), 3u);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(master_->reports[t].task_id(), t);
    EXPECT_EQ(master_->reports[t].minibatches_done(), 4);
  }
  // Heartbeats name the task on its way to the master as held, with its
  // count, while the next one trains.
  bool named = false;
  for (const auto& h : master_->heartbeats) {
    if (h.task_id() == 1 && h.has_reporting() && h.reporting().task_id() == 0) {
      EXPECT_EQ(h.reporting().minibatches_done(), 4);
      named = true;
    }
  }
  EXPECT_TRUE(named);
}

TEST_F(WorkerTest, TheTaskTrainsOnWhileTheMasterHandsOutTheNextOne) {
  // The master answers an ask ahead once its journal holds the hand-out;
  // the task's last minibatches train meanwhile. Here the answer comes
  // once the task's fourth push is made, which a training thread waiting
  // for it would not make: the master gives up after 5 s instead.
  AddTasks(2);
  master_->hold_asks_until = [this] { return servers_->pushes.load() >= 4; };
  auto worker = MakeWorker();
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_FLOAT_EQ(servers_->weight(), -32);
  std::lock_guard<std::mutex> lock(master_->mu);
  ASSERT_FALSE(master_->kept.empty());
  EXPECT_EQ(master_->kept.front(), 0) << "task 1 was not handed out ahead";
  EXPECT_EQ(master_->asks_given_up, 0) << "the ask held the task's training";
  ASSERT_EQ(master_->reports.size(), 2u);
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(master_->reports[t].task_id(), t);
    EXPECT_EQ(master_->reports[t].minibatches_done(), 4);
  }
}

TEST_F(WorkerTest, AReportFailedInTheBackgroundEndsTheRunAndLosesNoOtherReport) {
  AddTasks(3);
  servers_->slow_push = 30ms;
  master_->failed_reports = 1;
  master_->slow_report = 50ms;
  auto worker = MakeWorker();
  Status s = worker->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("journal"), std::string::npos) << s;
  // The task begun meanwhile is trained and reported before the worker
  // gives up; none after it is begun.
  std::lock_guard<std::mutex> lock(master_->mu);
  ASSERT_EQ(master_->kept, std::vector<int64_t>{0}) << "task 1 was not handed out ahead";
  ASSERT_EQ(master_->reports.size(), 2u);
  EXPECT_EQ(master_->reports[1].task_id(), 1);
  EXPECT_FLOAT_EQ(servers_->weight(), -32);
}

TEST_F(WorkerTest, StopsGracefullyAfterTheCurrentMinibatch) {
  AddTasks(4);
  servers_->slow_push = 20ms;
  auto worker = MakeWorker();
  std::thread stopper([this] {
    while (servers_->pushes.load() < 6) std::this_thread::sleep_for(1ms);
    stop_ = true;
  });
  Status s = worker->Run();
  stopper.join();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_FALSE(master_->reports.empty());
  const auto& last = master_->reports.back();
  EXPECT_TRUE(last.stopped());
  EXPECT_LT(last.minibatches_done(), 4);
  // What was reported is exactly what was applied.
  int64_t applied = 0;
  for (const auto& r : master_->reports) applied += r.minibatches_done();
  EXPECT_FLOAT_EQ(servers_->weight(), -4.0f * applied);
}

TEST_F(WorkerTest, AStopEndsTheRecomputingOfARefusedMinibatch) {
  // Every push is refused (the other workers always got there first): a
  // worker asked to stop hands the task back at once instead of
  // recomputing until it wins a race.
  AddTasks(1);
  servers_->refuse_pushes = 200;
  servers_->slow_push = 2ms;
  auto worker = MakeWorker();
  std::thread stopper([this] {
    while (servers_->pushes.load() < 3) std::this_thread::sleep_for(1ms);
    stop_ = true;
  });
  Status s = worker->Run();
  stopper.join();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(master_->reports.size(), 1u);
  EXPECT_TRUE(master_->reports[0].stopped());
  EXPECT_EQ(master_->reports[0].minibatches_done(), 0);
  EXPECT_LT(servers_->pushes.load(), 10);
  EXPECT_FLOAT_EQ(servers_->weight(), 0);
}

TEST_F(WorkerTest, LeavesWhenTheMasterAsksOrForgetsIt) {
  AddTasks(50);
  servers_->slow_push = 5ms;
  master_->ask_to_leave = true;
  auto worker = MakeWorker(/*lease_ms=*/100);
  ASSERT_TRUE(worker->Run().ok());
  EXPECT_LT(master_->reports.size(), 50u);
  EXPECT_TRUE(master_->reports.empty() || master_->reports.back().stopped() ||
              master_->reports.back().minibatches_done() == 4);

  auto* forgetting = new FakeMaster();
  forgetting->forget_worker = true;
  master_ = forgetting;
  servers_ = std::make_unique<ServerState>();
  servers_->slow_push = 5ms;
  AddTasks(50);
  auto lost = MakeWorker(/*lease_ms=*/100);
  Status s = lost->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
}

}  // namespace
}  // namespace elasticdl::worker
