#include "worker/collective.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "master/collective_group.h"

namespace elasticdl::worker {
namespace {

using std::chrono::milliseconds;

// The master's side of the rendezvous, in process.
class RendezvousMaster : public MasterClient {
 public:
  Status RegisterWorker(const proto::RegisterWorkerRequest&, proto::RegisterWorkerResponse*,
                        milliseconds) override {
    return absl::UnimplementedError("RegisterWorker");
  }
  Status GetTask(const proto::GetTaskRequest&, proto::GetTaskResponse*, milliseconds) override {
    return absl::UnimplementedError("GetTask");
  }
  Status ReportTask(const proto::ReportTaskRequest&, proto::ReportTaskResponse*,
                    milliseconds) override {
    return absl::UnimplementedError("ReportTask");
  }
  Status Heartbeat(const proto::HeartbeatRequest&, proto::HeartbeatResponse*,
                   milliseconds) override {
    return absl::UnimplementedError("Heartbeat");
  }
  Status GroupStore(const proto::GroupStoreRequest& request, proto::GroupStoreResponse* response,
                    milliseconds) override {
    return group.Store(WorkerId(request.worker_id()), request, response);
  }

  proto::RendezvousResponse Place(int worker) {
    proto::RendezvousResponse place;
    EXPECT_TRUE(group.Join(WorkerId(worker), 0, &place).ok());
    return place;
  }

  master::CollectiveGroup group{1};
};

CollectiveGroup::Options LocalOptions(std::function<bool()> abandoned = {}) {
  CollectiveGroup::Options options;
  options.host = "127.0.0.1";
  options.timeout = milliseconds(20000);
  options.abandoned = std::move(abandoned);
  return options;
}

// Runs `body(rank, group)` on `n` members at once, each on its own thread.
void OnMembers(int n, const std::function<void(int, CollectiveGroup&)>& body) {
  RendezvousMaster master;
  std::vector<proto::RendezvousResponse> places;
  for (int w = 0; w < n; ++w) master.Place(w);
  for (int w = 0; w < n; ++w) places.push_back(master.Place(w));  // the newest version
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      StatusOr<std::unique_ptr<CollectiveGroup>> group = CollectiveGroup::Connect(
          std::make_shared<MasterLink>(&master), w, places[w], LocalOptions());
      ASSERT_TRUE(group.ok()) << group.status();
      EXPECT_EQ((*group)->rank(), w);
      EXPECT_EQ((*group)->world_size(), n);
      body(w, **group);
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(CollectiveGroupTest, MembersConnectThroughTheMasterAndReduce) {
  OnMembers(3, [](int rank, CollectiveGroup& group) {
    at::Tensor t = at::full({5}, float(rank + 1));
    ASSERT_TRUE(group.AllReduce(t).ok());
    EXPECT_TRUE(at::equal(t, at::full({5}, 6.0f)));
    StatusOr<std::vector<std::vector<int64_t>>> all = group.AllGather({rank, 10 * rank});
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(*all, (std::vector<std::vector<int64_t>>{{0, 0}, {1, 10}, {2, 20}}));
    std::string bytes = rank == 2 ? std::string("the state of rank 2\0!", 21) : "";
    ASSERT_TRUE(group.Broadcast(&bytes, 2).ok());
    EXPECT_EQ(bytes, std::string("the state of rank 2\0!", 21));
  });
}

TEST(CollectiveGroupTest, AConnectionFromOutsideTheGroupIsRefused) {
  RendezvousMaster master;
  master.Place(0);
  proto::RendezvousResponse first = master.Place(1);
  proto::RendezvousResponse impostor = master.Place(0);
  // Worker 1 was told the version and its place, but not its secret.
  first.set_secret("guessed");
  std::vector<Status> results(2);
  std::thread a([&] {
    results[0] =
        CollectiveGroup::Connect(std::make_shared<MasterLink>(&master), 0, impostor, LocalOptions())
            .status();
  });
  std::thread b([&] {
    results[1] =
        CollectiveGroup::Connect(std::make_shared<MasterLink>(&master), 1, first, LocalOptions())
            .status();
  });
  a.join();
  b.join();
  for (const Status& s : results) {
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_NE(std::string(s.message()).find("does not come from a member"), std::string::npos);
  }
}

TEST(CollectiveGroupTest, WaitingForAMemberThatNeverComesEndsWhenAbandoned) {
  RendezvousMaster master;
  master.Place(0);
  proto::RendezvousResponse place = master.Place(1);
  std::atomic<bool> abandoned{false};
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    abandoned = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto link = std::make_shared<MasterLink>(&master);
  StatusOr<std::unique_ptr<CollectiveGroup>> group =
      CollectiveGroup::Connect(link, 1, place, LocalOptions([&] { return abandoned.load(); }));
  later.join();
  EXPECT_TRUE(absl::IsUnavailable(group.status())) << group.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The connection given up may still be under way: once the link is
  // drained, nothing reaches `master`, which goes with this test.
  link->Drain();
  proto::GroupStoreResponse response;
  EXPECT_TRUE(absl::IsCancelled(
      link->GroupStore(proto::GroupStoreRequest(), &response, milliseconds(100))));
}

TEST(GradientBucketsTest, EachGradientIsTheMeanOverTheMembersMinibatches) {
  // Three members, the third without a minibatch; buckets of 64 bytes, so the
  // model's parameters fill several.
  torch::manual_seed(7);
  torch::nn::Sequential reference(torch::nn::Linear(4, 8), torch::nn::Linear(8, 3));
  std::vector<at::Tensor> inputs = {torch::randn({2, 4}), torch::randn({2, 4})};
  std::vector<at::Tensor> expected;
  for (const at::Tensor& x : inputs) {
    reference->zero_grad();
    reference->forward(x).pow(2).sum().backward();
    for (size_t i = 0; i < reference->parameters().size(); ++i) {
      at::Tensor g = reference->parameters()[i].grad().clone() / 2;
      if (expected.size() <= i) {
        expected.push_back(g);
      } else {
        expected[i] += g;
      }
    }
  }
  OnMembers(3, [&](int rank, CollectiveGroup& group) {
    torch::nn::Sequential model(torch::nn::Linear(4, 8), torch::nn::Linear(8, 3));
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < model->parameters().size(); ++i) {
        model->parameters()[i].copy_(reference->parameters()[i]);
      }
    }
    GradientBuckets buckets(model->parameters(), 64);
    EXPECT_GT(buckets.num_buckets(), 2);
    for (int step = 0; step < 2; ++step) {
      const bool present = rank < 2;
      buckets.Begin(&group, present);
      if (present) model->forward(inputs[rank]).pow(2).sum().backward();
      ASSERT_TRUE(buckets.Finish(2).ok());
      EXPECT_TRUE(buckets.AllFinite());
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(at::allclose(model->parameters()[i].grad(), expected[i]))
            << "step " << step << " rank " << rank << " parameter " << i;
      }
    }
  });
}

// A hook on a parameter as Python's Tensor.register_hook adds it: in the
// tensor's own list, which a C++ register_hook on the same tensor clears.
struct DoublingHook : torch::autograd::FunctionPreHook {
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    return {grads[0] * 2};
  }
};

TEST(GradientBucketsTest, TheModelsHooksApplyAndAParameterNoMemberReachedKeepsNoGradient) {
  // out = layer(x) = 0.5 + 0.5 + 0.5 = 1.5; member 0's loss is head(out) = 3 * out,
  // member 1's out itself; `unused` is in no member's forward.
  OnMembers(2, [&](int rank, CollectiveGroup& group) {
    torch::nn::Linear layer(2, 1), head(torch::nn::LinearOptions(1, 1).bias(false)), unused(1, 1);
    {
      torch::NoGradGuard no_grad;
      layer->weight.copy_(torch::tensor({{0.5, 0.25}}));
      layer->bias.fill_(0.5);
      head->weight.fill_(3);
    }
    torch::autograd::impl::add_hook(layer->weight, std::make_shared<DoublingHook>());
    std::vector<at::Tensor> parameters = {layer->weight, layer->bias, head->weight, unused->weight,
                                          unused->bias};
    GradientBuckets buckets(parameters, 1 << 20);
    const at::Tensor x = torch::tensor({{1.0, 2.0}});
    for (int step = 0; step < 2; ++step) {
      buckets.Begin(&group, true);
      at::Tensor out = layer->forward(x);
      if (rank == 0) out = head->forward(out);
      out.sum().backward();
      ASSERT_TRUE(buckets.Finish(2).ok());
      // d/dW: [3, 6] and [1, 2], each doubled by the hook, then their mean.
      EXPECT_TRUE(at::allclose(layer->weight.grad(), torch::tensor({{4.0, 8.0}})))
          << layer->weight.grad();
      EXPECT_TRUE(at::allclose(layer->bias.grad(), torch::tensor({2.0}))) << layer->bias.grad();
      // Reached on member 0 only: its gradient there (out) and member 1's zero.
      EXPECT_TRUE(at::allclose(head->weight.grad(), torch::tensor({{0.75}})))
          << head->weight.grad();
      EXPECT_FALSE(unused->weight.grad().defined()) << "step " << step;
      EXPECT_FALSE(unused->bias.grad().defined());
    }
  });
}

}  // namespace
}  // namespace elasticdl::worker
