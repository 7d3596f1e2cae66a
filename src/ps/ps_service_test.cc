// The parameter server over real gRPC on loopback: the token is checked
// first, bad requests change nothing, and the server process (RunPsServer)
// restores checkpoints and outlives a short master outage but not a long one.
#include "ps/ps_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "common/file.h"
#include "common/job_dir.h"
#include "job/job_spec.h"
#include "ps/checkpoint.h"
#include "ps/ps_server.h"
#include "ps/shard_state.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"
#include "rpc/job_token.h"
#include "rpc/ps_client.h"
#include "rpc/shared_tensors.h"
#include "rpc/tensor_codec.h"
#include "testing/temp_dir.h"

namespace elasticdl::ps {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr char kToken[] = "secret-token";

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ParameterStoreOptions options;
    options.instance = 5;
    store_ = std::make_unique<ParameterStore>(options);
    service_ = std::make_unique<PsService>(store_.get(), kToken);
    auto server = rpc::StartServer("127.0.0.1", 0, {service_.get()}, &address_, {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(address_, {}));
    proto::InitRequest init;
    init.mutable_values()->set_version(0);
    ASSERT_TRUE(
        rpc::EncodeTensor("w", torch::ones({2}), init.mutable_values()->add_parameters()).ok());
    proto::InitResponse out;
    ASSERT_TRUE(Call(&proto::ParameterServer::Stub::Init, init, &out).ok());
    ASSERT_TRUE(out.accepted());
  }
  void TearDown() override { server_->Shutdown(); }

  template <typename Method, typename Request, typename Response>
  Status Call(Method method, const Request& request, Response* response,
              const std::string& token = kToken) {
    auto context = rpc::MakeContext(milliseconds(5000), token);
    return rpc::FromGrpc(((*stub_).*method)(context.get(), request, response));
  }

  proto::PushRequest Push(const torch::Tensor& g) {
    proto::PushRequest r;
    r.set_instance(5);
    r.mutable_tag()->set_task_id(1);
    r.mutable_tag()->set_minibatch(0);
    EXPECT_TRUE(rpc::EncodeTensor("w", g, r.add_gradients()).ok());
    return r;
  }

  void ExpectUnchanged() {
    EXPECT_EQ(store_->version(), 0);
    EXPECT_TRUE(store_->applied().empty());
    proto::PullResponse pulled;
    ASSERT_TRUE(Call(&proto::ParameterServer::Stub::Pull, proto::PullRequest(), &pulled).ok());
    auto values = rpc::DecodeTensors(pulled.values().parameters());
    ASSERT_TRUE(values.ok());
    EXPECT_TRUE(torch::equal(values->at("w"), torch::ones({2})));
  }

  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(PsServiceTest, CallsWithoutTheTokenAreRefused) {
  proto::PullResponse pulled;
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Pull, proto::PullRequest(), &pulled, "").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      Call(&proto::ParameterServer::Stub::Pull, proto::PullRequest(), &pulled, "wrong").code(),
      absl::StatusCode::kUnauthenticated);
  proto::PushResponse pushed;
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Push, Push(torch::ones({2})), &pushed, "").code(),
            absl::StatusCode::kUnauthenticated);
  proto::InitResponse init;
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Init, proto::InitRequest(), &init, "").code(),
            absl::StatusCode::kUnauthenticated);
  ExpectUnchanged();
  EXPECT_TRUE(Call(&proto::ParameterServer::Stub::Pull, proto::PullRequest(), &pulled).ok());
  EXPECT_EQ(pulled.instance(), 5u);
}

TEST_F(PsServiceTest, ExportWritesOnlyWhereTheJobsModelGoes) {
  // This server was given no export directory: it writes nowhere.
  proto::ExportRequest request;
  request.set_dir("/tmp");
  proto::ExportResponse exported;
  Status refused = Call(&proto::ParameterServer::Stub::Export, request, &exported);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  // One that was: there, and nowhere else (a path that climbs out included).
  ::elasticdl::testing::TempDir dir;
  const std::string allowed = dir.File("model/embeddings");
  PsService service(store_.get(), "", nullptr, allowed);
  for (const std::string& elsewhere :
       {dir.File("other"), allowed + "/../../escape", std::string("/")}) {
    grpc::ServerContext context;
    request.set_dir(elsewhere);
    EXPECT_EQ(service.Export(&context, &request, &exported).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << elsewhere;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("other")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("escape")));
  grpc::ServerContext context;
  request.set_dir(allowed);
  grpc::Status written = service.Export(&context, &request, &exported);
  EXPECT_TRUE(written.ok()) << written.error_message();
  EXPECT_TRUE(std::filesystem::exists(allowed));
}

TEST_F(PsServiceTest, BadPushesAreInvalidAndChangeNothing) {
  proto::PushResponse out;
  Status shape = Call(&proto::ParameterServer::Stub::Push, Push(torch::ones({3})), &out);
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument) << shape;
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Push, Push(torch::ones({2}, torch::kFloat64)), &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
  proto::PushRequest unknown = Push(torch::ones({2}));
  unknown.mutable_gradients(0)->set_name("nope");
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Push, unknown, &out).code(),
            absl::StatusCode::kInvalidArgument);
  proto::PushRequest malformed = Push(torch::ones({2}));
  malformed.mutable_gradients(0)->mutable_content()->resize(3);
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Push, malformed, &out).code(),
            absl::StatusCode::kInvalidArgument);
  proto::PushRequest future = Push(torch::ones({2}));
  future.set_base_version(9);
  EXPECT_EQ(Call(&proto::ParameterServer::Stub::Push, future, &out).code(),
            absl::StatusCode::kInvalidArgument);
  ExpectUnchanged();
  // And the server still serves.
  ASSERT_TRUE(Call(&proto::ParameterServer::Stub::Push, Push(torch::ones({2})), &out).ok());
  EXPECT_EQ(out.version(), 1);
}

TEST_F(PsServiceTest, StatsTellWhatTheShardHolds) {
  proto::PsStatsResponse stats;
  EXPECT_EQ(
      Call(&proto::ParameterServer::Stub::Stats, proto::PsStatsRequest(), &stats, "wrong").code(),
      absl::StatusCode::kUnauthenticated);
  proto::PushResponse out;
  ASSERT_TRUE(Call(&proto::ParameterServer::Stub::Push, Push(torch::ones({2})), &out).ok());
  ASSERT_TRUE(Call(&proto::ParameterServer::Stub::Stats, proto::PsStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.version(), 1);
  EXPECT_EQ(stats.dense_elements(), 2);
  EXPECT_EQ(stats.dense_bytes(), 8);
  EXPECT_EQ(stats.tables_size(), 0);
  EXPECT_EQ(stats.checkpoint_seconds().count(), 0);  // no writer
}

// ---------------------------------------------------------------- shared memory

// A worker on the server's machine reaches it through the job's sockets; its
// pushes then pass their tensors, and the values that answer them, through
// a region of shared memory (rpc/shared_tensors.h).
class SharedTensorsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rpc::SharedTensorRegion::DefaultDir().empty()) GTEST_SKIP() << "no /dev/shm";
    credentials_.token = kToken;
    credentials_.socket_dir = SocketsDir(dir_.path());
    ASSERT_TRUE(CreatePrivateDirectory(credentials_.socket_dir, true).ok());
    ParameterStoreOptions options;
    options.instance = 5;
    store_ = std::make_unique<ParameterStore>(options);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Serves the store, mapping regions or (`shared` false) none.
  void Serve(bool shared) {
    service_ = std::make_unique<PsService>(store_.get(), kToken, nullptr, "",
                                           shared ? rpc::SharedTensorRegion::DefaultDir() : "");
    auto server = rpc::StartServer("127.0.0.1", 0, {service_.get()}, &address_, credentials_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    client_ = std::make_unique<rpc::PsClient>(std::vector<std::string>{address_}, credentials_);
    std::vector<proto::InitRequest> init(1);
    init[0].mutable_values()->set_version(0);
    ASSERT_TRUE(
        rpc::EncodeTensor("w", torch::ones({1000}), init[0].mutable_values()->add_parameters())
            .ok());
    ASSERT_TRUE(
        rpc::EncodeTensor("n", torch::zeros({3}), init[0].mutable_values()->add_buffers()).ok());
    std::vector<proto::InitResponse> out;
    ASSERT_TRUE(client_->Init(init, &out).ok());
  }

  // Minibatch `minibatch` of task 1: gradient g everywhere, buffer update u.
  std::vector<proto::PushRequest> Push(int64_t minibatch, float g, float u) {
    std::vector<proto::PushRequest> r(1);
    r[0].set_instance(5);
    r[0].set_base_version(minibatch);
    r[0].set_want_values(true);
    r[0].mutable_tag()->set_task_id(1);
    r[0].mutable_tag()->set_minibatch(minibatch);
    EXPECT_TRUE(rpc::EncodeTensor("w", torch::full({1000}, g), r[0].add_gradients()).ok());
    EXPECT_TRUE(rpc::EncodeTensor("n", torch::full({3}, u), r[0].add_buffer_updates()).ok());
    return r;
  }

  // As Push, the tensors held here (PushFrom) instead of in the message.
  struct HeldPush {
    std::vector<proto::PushRequest> requests;
    torch::Tensor gradient, update;
    std::vector<rpc::ParameterServers::HeldBytes> held;
  };
  HeldPush PushHeld(int64_t minibatch, float g, float u) {
    HeldPush p{Push(minibatch, g, u), torch::full({1000}, g), torch::full({3}, u), {{}}};
    for (auto [t, out] : {std::pair{&p.gradient, p.requests[0].mutable_gradients(0)},
                          std::pair{&p.update, p.requests[0].mutable_buffer_updates(0)}}) {
      StatusOr<std::string_view> bytes = rpc::DescribeTensor(out->name(), *t, out);
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      p.held[0].push_back(bytes.value_or(std::string_view()));
    }
    return p;
  }

  // A sink that copies the values into `w` and `n`, counting its calls and
  // those that read them from shared memory.
  rpc::ParameterServers::ValuesSink CopyInto(torch::Tensor* w, torch::Tensor* n, int* calls,
                                             int* shared_calls) {
    return [=](int shard, const proto::ModelValues& values, std::string_view shared) {
      EXPECT_EQ(shard, 0);
      ++*calls;
      if (!shared.empty()) ++*shared_calls;
      EDL_RETURN_IF_ERROR(rpc::CopyInto(values.parameters(0), *w, shared));
      return rpc::CopyInto(values.buffers(0), *n, shared);
    };
  }

  static torch::Tensor Value(const proto::ModelValues& values, const std::string& name) {
    auto decoded = rpc::DecodeTensors(name == "n" ? values.buffers() : values.parameters());
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return decoded.ok() ? decoded->at(name) : torch::Tensor();
  }

  ::elasticdl::testing::TempDir dir_;
  rpc::JobCredentials credentials_;
  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rpc::PsClient> client_;
  std::string address_;
};

TEST_F(SharedTensorsServiceTest, PushesAndPullsOfAWorkerOnThisMachineGoThroughSharedMemory) {
  Serve(/*shared=*/true);
  // SGD with lr 0.1 (the store's default optimizer) on w = 1.
  for (int64_t minibatch = 0; minibatch < 3; ++minibatch) {
    std::vector<proto::PushRequest> requests = Push(minibatch, 1.0f, 0.5f);
    std::vector<proto::PushResponse> responses;
    Status pushed = client_->Push(&requests, &responses, {});
    ASSERT_TRUE(pushed.ok()) << pushed;
    // The first push crossed the socket, and its answer says that the next
    // ones may go through the region itself: they do (only an answer over
    // the socket says so).
    EXPECT_EQ(responses[0].region_calls(), minibatch == 0);
    // The tensors went through the region, not the message.
    EXPECT_TRUE(requests[0].has_shared());
    EXPECT_TRUE(requests[0].gradients(0).content().empty());
    ASSERT_TRUE(responses[0].accepted());
    ASSERT_TRUE(responses[0].has_values());
    EXPECT_FALSE(responses[0].has_shared_values());  // taken into the message by the client
    EXPECT_EQ(responses[0].values().version(), minibatch + 1);
    EXPECT_TRUE(torch::allclose(Value(responses[0].values(), "w"),
                                torch::full({1000}, 1.0f - 0.1f * float(minibatch + 1))));
    EXPECT_TRUE(torch::equal(Value(responses[0].values(), "n"),
                             torch::full({3}, 0.5f * float(minibatch + 1))));
  }
  EXPECT_EQ(store_->applied().at(1), 3);
  // A push made again through the region is a duplicate, applied once.
  {
    std::vector<proto::PushRequest> requests = Push(2, 1.0f, 0.5f);
    std::vector<proto::PushResponse> responses;
    ASSERT_TRUE(client_->Push(&requests, &responses, {}).ok());
    EXPECT_FALSE(responses[0].region_calls());
    EXPECT_TRUE(responses[0].duplicate());
    EXPECT_EQ(store_->version(), 3);
  }
  // A pull is answered through the region too (below, with the socket
  // closed), and reads the same values.
  std::vector<proto::PullRequest> pull(1);
  std::vector<proto::PullResponse> pulled;
  ASSERT_TRUE(client_->Pull(pull, &pulled).ok());
  EXPECT_EQ(pulled[0].values().version(), 3);
  EXPECT_FALSE(pulled[0].has_shared_values());
  EXPECT_TRUE(torch::allclose(Value(pulled[0].values(), "w"), torch::full({1000}, 0.7f)));
  // The server unlinked the region once mapped: nothing is left in /dev/shm.
  for (const auto& e : fs::directory_iterator(rpc::SharedTensorRegion::DefaultDir())) {
    EXPECT_EQ(e.path().filename().string().find(StrCat("-", ::getpid(), "-")), std::string::npos)
        << e.path();
  }
}

TEST_F(SharedTensorsServiceTest, PullsGoThroughTheRegionAndWaitThereForTheNextStep) {
  Serve(/*shared=*/true);
  // Two workers of this machine, each with its region; the first push of
  // each crosses the socket and says that the next calls may go through the
  // region.
  rpc::PsClient other(std::vector<std::string>{address_}, credentials_);
  std::vector<proto::PushResponse> responses;
  std::vector<proto::PushRequest> first = Push(0, 1.0f, 0.0f);
  ASSERT_TRUE(client_->Push(&first, &responses, {}).ok());
  ASSERT_TRUE(responses[0].region_calls());
  std::vector<proto::PushRequest> second = Push(1, 1.0f, 0.0f);
  ASSERT_TRUE(other.Push(&second, &responses, {}).ok());
  ASSERT_TRUE(responses[0].region_calls());
  ASSERT_EQ(store_->version(), 2);
  // The socket closed: what follows can only go through the regions.
  server_->Shutdown();
  server_.reset();
  // A pull of the current version waits for the next one, there.
  std::vector<proto::PullRequest> pull(1);
  pull[0].set_known_version(2);
  pull[0].set_known_instance(5);
  pull[0].set_wait_ms(5000);
  std::vector<proto::PullResponse> pulled;
  const auto start = std::chrono::steady_clock::now();
  std::future<Status> waiting =
      std::async(std::launch::async, [&] { return client_->Pull(pull, &pulled); });
  EXPECT_EQ(waiting.wait_for(milliseconds(200)), std::future_status::timeout);
  std::vector<proto::PushRequest> third = Push(2, 1.0f, 0.0f);
  Status pushed = other.Push(&third, &responses, {});
  ASSERT_TRUE(pushed.ok()) << pushed;
  ASSERT_EQ(responses[0].values().version(), 3);
  Status answered = waiting.get();
  ASSERT_TRUE(answered.ok()) << answered;
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(4000));
  EXPECT_EQ(pulled[0].values().version(), 3);
  EXPECT_EQ(pulled[0].instance(), 5u);
  EXPECT_FALSE(pulled[0].has_shared_values());  // taken into the message by the client
  EXPECT_TRUE(torch::allclose(Value(pulled[0].values(), "w"), torch::full({1000}, 0.7f)));
  // A pull of a version it has answers at once, without values.
  pull[0].set_known_version(3);
  pull[0].set_wait_ms(0);
  ASSERT_TRUE(client_->Pull(pull, &pulled).ok());
  EXPECT_EQ(pulled[0].values().version(), 3);
  EXPECT_EQ(pulled[0].values().parameters_size(), 0);
}

TEST_F(SharedTensorsServiceTest, AServerThatCannotMapRegionsGetsTheTensorsInTheMessage) {
  Serve(/*shared=*/false);
  for (int64_t minibatch = 0; minibatch < 2; ++minibatch) {
    std::vector<proto::PushRequest> requests = Push(minibatch, 1.0f, 0.0f);
    std::vector<proto::PushResponse> responses;
    Status pushed = client_->Push(&requests, &responses, {});
    ASSERT_TRUE(pushed.ok()) << pushed;
    // The first was refused unread and sent again in the message; the
    // client sends the next one in the message at once. Each applied once.
    EXPECT_FALSE(requests[0].has_shared());
    EXPECT_EQ(requests[0].gradients(0).content().size(), 4000u);
    ASSERT_TRUE(responses[0].accepted());
    EXPECT_FALSE(responses[0].duplicate());
    EXPECT_EQ(responses[0].values().version(), minibatch + 1);
  }
  EXPECT_EQ(store_->version(), 2);
  EXPECT_EQ(store_->applied().at(1), 2);
}

TEST_F(SharedTensorsServiceTest, HeldTensorsCrossTheRegionOnceEachWay) {
  Serve(/*shared=*/true);
  torch::Tensor w = torch::zeros({1000}), n = torch::zeros({3});
  int calls = 0, shared_calls = 0;
  for (int64_t minibatch = 0; minibatch < 3; ++minibatch) {
    HeldPush p = PushHeld(minibatch, 1.0f, 0.5f);
    std::vector<proto::PushResponse> responses;
    Status pushed = client_->PushFrom(&p.requests, &responses, {}, p.held,
                                      CopyInto(&w, &n, &calls, &shared_calls));
    ASSERT_TRUE(pushed.ok()) << pushed;
    // The held values went into the region, and the answer's values from
    // there into the sink's tensors, read once.
    EXPECT_TRUE(p.requests[0].has_shared());
    EXPECT_TRUE(p.requests[0].gradients(0).content().empty());
    ASSERT_TRUE(responses[0].accepted());
    ASSERT_TRUE(responses[0].has_values());
    EXPECT_FALSE(responses[0].has_shared_values());
    EXPECT_EQ(responses[0].values().version(), minibatch + 1);
    EXPECT_EQ(calls, minibatch + 1);
    EXPECT_TRUE(torch::allclose(w, torch::full({1000}, 1.0f - 0.1f * float(minibatch + 1))));
    EXPECT_TRUE(torch::equal(n, torch::full({3}, 0.5f * float(minibatch + 1))));
  }
  EXPECT_EQ(shared_calls, 3);
  EXPECT_EQ(store_->applied().at(1), 3);
  // The sink's error is the push's; the push itself was applied.
  HeldPush p = PushHeld(3, 1.0f, 0.0f);
  std::vector<proto::PushResponse> responses;
  Status failed = client_->PushFrom(
      &p.requests, &responses, {}, p.held, [](int, const proto::ModelValues&, std::string_view) {
        return absl::InvalidArgumentError("the model has no parameter named 'w'");
      });
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument) << failed;
  EXPECT_EQ(store_->version(), 4);
}

TEST_F(SharedTensorsServiceTest, ValuesOverwrittenWhileTheSinkReadThemAreDropped) {
  Serve(/*shared=*/true);
  torch::Tensor w = torch::zeros({1000}), n = torch::zeros({3});
  int calls = 0, shared_calls = 0;
  HeldPush first = PushHeld(0, 1.0f, 0.0f);
  std::vector<proto::PushResponse> responses;
  ASSERT_TRUE(client_
                  ->PushFrom(&first.requests, &responses, {}, first.held,
                             CopyInto(&w, &n, &calls, &shared_calls))
                  .ok());
  ASSERT_TRUE(responses[0].has_values());
  // While the sink reads the next answer's values, a pull naming the
  // worker's region (one it gave up on, say) is answered in the same area.
  HeldPush second = PushHeld(1, 1.0f, 0.0f);
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(address_, credentials_));
  rpc::ParameterServers::ValuesSink copy = CopyInto(&w, &n, &calls, &shared_calls);
  auto overwritten = [&](int shard, const proto::ModelValues& values, std::string_view shared) {
    Status copied = copy(shard, values, shared);
    proto::PullRequest pull;
    pull.set_known_version(-1);
    pull.mutable_shared()->set_region(second.requests[0].shared().region());
    auto context = rpc::MakeContext(milliseconds(5000), kToken);
    proto::PullResponse pulled;
    EXPECT_TRUE(rpc::FromGrpc(stub->Pull(context.get(), pull, &pulled)).ok());
    EXPECT_TRUE(pulled.has_shared_values());
    return copied;
  };
  Status pushed = client_->PushFrom(&second.requests, &responses, {}, second.held, overwritten);
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(shared_calls, 2);
  // Applied, but its values not to be trusted: the worker pulls instead.
  EXPECT_TRUE(responses[0].accepted());
  EXPECT_FALSE(responses[0].has_values());
  EXPECT_EQ(store_->version(), 2);
}

TEST_F(SharedTensorsServiceTest, HeldBytesThatDoNotNameEveryTensorSendNothing) {
  Serve(/*shared=*/true);
  HeldPush p = PushHeld(0, 1.0f, 0.0f);
  p.held[0].pop_back();
  std::vector<proto::PushResponse> responses;
  Status refused = client_->PushFrom(&p.requests, &responses, {}, p.held, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(std::string(refused.message()).find("shard 0"), std::string::npos) << refused;
  EXPECT_FALSE(p.requests[0].has_shared());  // nothing moved
  Status none = client_->PushFrom(&p.requests, &responses, {}, {}, nullptr);
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument) << none;
  EXPECT_EQ(store_->version(), 0);
}

TEST_F(SharedTensorsServiceTest, HeldTensorsGoInTheMessageToAServerThatCannotMapRegions) {
  Serve(/*shared=*/false);
  torch::Tensor w = torch::zeros({1000}), n = torch::zeros({3});
  int calls = 0, shared_calls = 0;
  for (int64_t minibatch = 0; minibatch < 2; ++minibatch) {
    HeldPush p = PushHeld(minibatch, 1.0f, 0.0f);
    std::vector<proto::PushResponse> responses;
    Status pushed = client_->PushFrom(&p.requests, &responses, {}, p.held,
                                      CopyInto(&w, &n, &calls, &shared_calls));
    ASSERT_TRUE(pushed.ok()) << pushed;
    // The first was refused unread and sent again with the values in the
    // message; the next one goes in the message at once.
    EXPECT_FALSE(p.requests[0].has_shared());
    EXPECT_EQ(p.requests[0].gradients(0).content().size(), 4000u);
    ASSERT_TRUE(responses[0].accepted());
    EXPECT_FALSE(responses[0].duplicate());
    EXPECT_EQ(responses[0].values().version(), minibatch + 1);
    EXPECT_TRUE(torch::allclose(w, torch::full({1000}, 1.0f - 0.1f * float(minibatch + 1))));
    EXPECT_TRUE(torch::equal(n, torch::zeros({3})));
  }
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(shared_calls, 0);
  EXPECT_EQ(store_->applied().at(1), 2);
}

TEST_F(SharedTensorsServiceTest, APushWhoseTensorsWereOverwrittenIsRefusedAndAppliesNothing) {
  Serve(/*shared=*/true);
  auto region = rpc::SharedTensorRegion::Create(rpc::SharedTensorRegion::DefaultDir(), 8192);
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<proto::PushRequest> stale = Push(0, 1.0f, 0.0f);
  StatusOr<uint64_t> sequence =
      (*region)->Put(rpc::SharedTensorRegion::Area::kPush,
                     {stale[0].mutable_gradients(), stale[0].mutable_buffer_updates()});
  ASSERT_TRUE(sequence.ok());
  stale[0].mutable_shared()->set_region((*region)->name());
  stale[0].mutable_shared()->set_sequence(*sequence);
  // The worker wrote again before the server read the first push.
  std::vector<proto::PushRequest> next = Push(0, 2.0f, 0.0f);
  ASSERT_TRUE((*region)
                  ->Put(rpc::SharedTensorRegion::Area::kPush,
                        {next[0].mutable_gradients(), next[0].mutable_buffer_updates()})
                  .ok());
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(address_, credentials_));
  auto context = rpc::MakeContext(milliseconds(5000), kToken);
  proto::PushResponse out;
  Status refused = rpc::FromGrpc(stub->Push(context.get(), stale[0], &out));
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  EXPECT_EQ(store_->version(), 0);
  EXPECT_TRUE(store_->applied().empty());
  // A region that is not one is no push either: the worker is told to send
  // the tensors in the message.
  stale[0].mutable_shared()->set_region("elasticdl-tensors-0-0-0-missing");
  auto again = rpc::MakeContext(milliseconds(5000), kToken);
  ASSERT_TRUE(rpc::FromGrpc(stub->Push(again.get(), stale[0], &out)).ok());
  EXPECT_TRUE(out.shared_unreadable());
  EXPECT_FALSE(out.accepted());
  EXPECT_EQ(store_->version(), 0);
}

// ---------------------------------------------------------------- RunPsServer

// A master that records registrations and answers GetJobStatus.
class FakeMaster final : public proto::Master::Service {
 public:
  grpc::Status RegisterPs(grpc::ServerContext* context, const proto::RegisterPsRequest* request,
                          proto::RegisterPsResponse*) override {
    grpc::Status auth = rpc::CheckToken(*context, token);
    if (!auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    registrations.push_back(*request);
    return grpc::Status::OK;
  }
  grpc::Status GetJobStatus(grpc::ServerContext* context, const proto::GetJobStatusRequest*,
                            proto::GetJobStatusResponse* response) override {
    grpc::Status auth = rpc::CheckToken(*context, token);
    if (!auth.ok()) return auth;
    ++status_calls;
    response->set_finished(true);  // the server keeps serving anyway
    return grpc::Status::OK;
  }

  std::atomic<int> status_calls{0};
  std::string token;
  std::mutex mu;
  std::vector<proto::RegisterPsRequest> registrations;
};

class PsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_dir_ = (fs::temp_directory_path() /
                ("edl_ps_server_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                   .string();
    fs::remove_all(job_dir_);
    fs::create_directories(job_dir_);
    auto credentials = rpc::CreateJobCredentials(job_dir_);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    credentials_ = *credentials;
    master_.token = credentials_.token;
    spec_.mutable_ps()->set_num_ps(2);
    spec_.mutable_model()->mutable_optimizer_config()->mutable_sgd()->set_lr(0.1);
    ASSERT_TRUE(WriteJobSpec(spec_, job_dir_).ok());
    StartMaster(0);
  }
  void TearDown() override {
    if (master_server_) master_server_->Shutdown();
    fs::remove_all(job_dir_);
  }

  void StartMaster(int port) {
    auto server = rpc::StartServer("127.0.0.1", port, {&master_}, &master_address_, credentials_);
    ASSERT_TRUE(server.ok()) << server.status();
    master_server_ = std::move(server).value();
  }

  // Until the server under test has registered (at most 5 s).
  void AwaitRegistration() {
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(master_.mu);
        if (!master_.registrations.empty()) return;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
  }

  // The master goes away for good: the server under test (`done`) gives up
  // within its patience, naming the master's address.
  void ExpectGivesUpOnTheMaster(std::future<Status>* done) {
    master_server_->Shutdown();
    master_server_.reset();
    ASSERT_EQ(done->wait_for(milliseconds(10000)), std::future_status::ready);
    Status s = done->get();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(std::string(s.message()).find("the master at " + master_address_), std::string::npos)
        << s;
  }

  PsServerOptions Options() {
    PsServerOptions o;
    o.job_dir = job_dir_;
    o.ps_id = 1;
    o.master_address = master_address_;
    o.master_patience = milliseconds(3000);
    o.master_check_interval = milliseconds(100);
    o.cancel = &cancel_;
    return o;
  }

  std::string job_dir_;
  rpc::JobCredentials credentials_;
  proto::JobSpec spec_;
  FakeMaster master_;
  std::unique_ptr<grpc::Server> master_server_;
  std::string master_address_;
  StopFlag cancel_;
};

TEST_F(PsServerTest, RestoreWithoutCheckpointIsAnError) {
  PsServerOptions o = Options();
  o.restore = true;
  Status s = RunPsServer(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(
      std::string(s.message())
          .find("parameter server 1: no checkpoint to restore in " + job_dir_ + "/checkpoints"),
      std::string::npos)
      << s;
}

TEST_F(PsServerTest, RestoresAndRegistersWhatItHolds) {
  proto::ShardCheckpoint checkpoint;
  checkpoint.set_version(40);
  checkpoint.set_ps_id(1);
  checkpoint.set_num_ps(2);
  ASSERT_TRUE(
      rpc::EncodeTensor("w", torch::ones({2}), checkpoint.add_parameters()->mutable_value()).ok());
  auto* progress = checkpoint.add_applied();
  progress->set_task_id(12);
  progress->set_minibatches(3);
  ASSERT_TRUE(WriteCheckpoint(job_dir_ + "/checkpoints", &checkpoint).ok());

  PsServerOptions o = Options();
  o.restore = true;
  auto done = std::async(std::launch::async, [o] { return RunPsServer(o); });
  AwaitRegistration();
  // Serves past a finished job and a short silence of the master.
  std::this_thread::sleep_for(milliseconds(300));
  cancel_.Set();
  Status s = done.get();
  EXPECT_TRUE(s.ok()) << s;
  std::lock_guard<std::mutex> lock(master_.mu);
  ASSERT_EQ(master_.registrations.size(), 1u);
  const proto::RegisterPsRequest& r = master_.registrations[0];
  EXPECT_EQ(r.ps_id(), 1);
  EXPECT_TRUE(r.restored());
  EXPECT_EQ(r.restored_version(), 40);
  ASSERT_EQ(r.applied_size(), 1);
  EXPECT_EQ(r.applied(0).task_id(), 12);
  EXPECT_EQ(r.applied(0).minibatches(), 3);
}

TEST_F(PsServerTest, ExitsWhenTheMasterStaysAway) {
  auto done = std::async(std::launch::async, [o = Options()] { return RunPsServer(o); });
  AwaitRegistration();
  // A short outage (the master restarting at the same address) is fine.
  const int port = std::stoi(master_address_.substr(master_address_.rfind(':') + 1));
  master_server_->Shutdown();
  master_server_.reset();
  EXPECT_EQ(done.wait_for(milliseconds(700)), std::future_status::timeout);
  StartMaster(port);
  EXPECT_EQ(done.wait_for(milliseconds(2000)), std::future_status::timeout);
  // A long one is not.
  ExpectGivesUpOnTheMaster(&done);
}

TEST_F(PsServerTest, FollowsAMasterStartedElsewhereThroughTheJobDirectory) {
  auto done = std::async(std::launch::async, [o = Options()] { return RunPsServer(o); });
  AwaitRegistration();
  // The master's node is lost; a new master serves at another address and
  // says so in the job directory.
  const std::string before = master_address_;
  master_server_->Shutdown();
  master_server_.reset();
  StartMaster(0);
  ASSERT_NE(master_address_, before);
  ASSERT_TRUE(WriteFileAtomically(MasterAddressFile(job_dir_), master_address_).ok());
  const int calls = master_.status_calls.load();
  // Longer than the patience with the old address (3 s).
  EXPECT_EQ(done.wait_for(milliseconds(4000)), std::future_status::timeout);
  EXPECT_GT(master_.status_calls.load(), calls + 10);
  // The new master goes away too: the error names it.
  ExpectGivesUpOnTheMaster(&done);
}

TEST_F(PsServerTest, WritesTheInitialCheckpointWhenInitialized) {
  spec_.mutable_ps()->set_checkpoint_steps(2);
  ASSERT_TRUE(WriteJobSpec(spec_, job_dir_).ok());
  auto done = std::async(std::launch::async, [o = Options()] { return RunPsServer(o); });
  std::string ps_address;
  for (int i = 0; i < 100 && ps_address.empty(); ++i) {
    {
      std::lock_guard<std::mutex> lock(master_.mu);
      if (!master_.registrations.empty()) ps_address = master_.registrations[0].address();
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_FALSE(ps_address.empty());
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(ps_address, credentials_));
  proto::InitRequest init;
  ASSERT_TRUE(
      rpc::EncodeTensor("w", torch::ones({2}), init.mutable_values()->add_parameters()).ok());
  proto::InitResponse out;
  auto context = rpc::MakeContext(milliseconds(5000), master_.token);
  ASSERT_TRUE(stub->Init(context.get(), init, &out).ok());
  const std::string path = CheckpointPath(job_dir_ + "/checkpoints", 0, 1, 2);
  for (int i = 0; i < 100 && !fs::exists(path); ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(fs::exists(path));
  // The server's Stats report the checkpoint, timed in the shared buckets.
  proto::PsStatsResponse stats;
  for (int i = 0; i < 100 && stats.checkpoint_seconds().count() == 0; ++i) {
    auto stats_context = rpc::MakeContext(milliseconds(5000), master_.token);
    ASSERT_TRUE(stub->Stats(stats_context.get(), proto::PsStatsRequest(), &stats).ok());
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(stats.checkpoint_seconds().count(), 1);
  EXPECT_EQ(stats.checkpoint_seconds().bounds_size(), static_cast<int>(LatencyBounds().size()));
  EXPECT_EQ(stats.dense_elements(), 2);
  cancel_.Set();
  EXPECT_TRUE(done.get().ok());
}

}  // namespace
}  // namespace elasticdl::ps

namespace elasticdl::ps {
namespace {

TEST(StoreOptionsOfTest, TheUpdateRuleDecidesTheMode) {
  proto::PsSpec spec;
  spec.set_num_ps(2);
  spec.set_checkpoint_steps(5);
  proto::OptimizerConfig sgd;
  sgd.mutable_sgd()->set_lr(0.1);

  spec.mutable_update()->set_max_version_lag(2);
  auto o = StoreOptionsOf(spec, sgd, 1);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->use_async);
  EXPECT_EQ(o->grads_to_wait, 0);  // one gradient of every worker of the group
  EXPECT_EQ(o->staleness_tolerance, 2);
  EXPECT_EQ(o->ps_id, 1);
  EXPECT_EQ(o->num_ps, 2);
  EXPECT_EQ(o->snapshot_every, 5);

  spec.mutable_update()->set_mode(proto::UpdateRule::SYNC_FIXED);
  spec.mutable_update()->set_grads_to_wait(3);
  o = StoreOptionsOf(spec, sgd, 0);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->use_async);
  EXPECT_EQ(o->grads_to_wait, 3);

  spec.mutable_update()->set_mode(proto::UpdateRule::ASYNC);
  spec.mutable_update()->set_max_version_lag(-1);
  spec.mutable_update()->set_lr_staleness_modulation(true);
  o = StoreOptionsOf(spec, sgd, 0);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->use_async);
  EXPECT_EQ(o->max_staleness, -1);
  EXPECT_TRUE(o->lr_staleness_modulation);

  EXPECT_EQ(StoreOptionsOf(spec, sgd, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace elasticdl::ps
