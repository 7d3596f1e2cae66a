// The Kubernetes backend against an API in memory: what it creates, the
// exits it reports (once, whenever the pod ended), and how it recovers from
// an expired watch, a name still taken and a service it could not create.
#include "cluster/kubernetes/kubernetes_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "cluster/kubernetes/pod_manifests.h"
#include "common/strings.h"
#include "testing/backend_exits.h"

namespace elasticdl::cluster {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kPods[] = "/api/v1/namespaces/ns/pods";
constexpr char kServices[] = "/api/v1/namespaces/ns/services";

// Objects by path, scripted watch events, and a log of what was asked.
class FakeKubeClient : public KubeClient {
 public:
  StatusOr<json> Get(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t query = path.find('?');
    if (query != std::string::npos) {
      ++lists_;
      const bool masters = path.find("replica-type%3Dmaster") != std::string::npos;
      json items = json::array();
      for (const auto& [p, object] : objects_) {
        if (p.rfind(path.substr(0, query) + "/", 0) != 0) continue;
        const bool master = object["metadata"]["labels"]["elasticdl-replica-type"] == "master";
        if (master == masters) items.push_back(object);
      }
      return json{{"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", items}};
    }
    auto it = objects_.find(path);
    if (it == objects_.end()) return absl::NotFoundError(path);
    return it->second;
  }

  StatusOr<json> Post(const std::string& path, const json& body) override {
    std::unique_lock<std::mutex> lock(mu_);
    log_.push_back("POST " + path);
    if (path == kServices && !service_error_.ok()) return service_error_;
    const std::string at = path + "/" + body["metadata"]["name"].get<std::string>();
    if (objects_.count(at) != 0) return absl::AlreadyExistsError(at);
    json object = body;
    object["metadata"]["uid"] = StrCat("uid-", ++uids_);
    object["metadata"]["resourceVersion"] = std::to_string(++rv_);
    objects_[at] = object;
    if (fail_pods_at_once_ && path == kPods) {
      // The pod crashes before the creator hears back.
      json failed = object;
      failed["status"] = Failed(1);
      events_.push_back({{"type", "MODIFIED"}, {"object", failed}});
      changed_.notify_all();
      changed_.wait_for(lock, 2s, [this] { return events_.empty(); });
      lock.unlock();
      std::this_thread::sleep_for(50ms);
    }
    return object;
  }

  StatusOr<json> Delete(const std::string& path, const json& body) override {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(StrCat("DELETE ", path, " grace=", body.value("gracePeriodSeconds", -1)));
    auto it = objects_.find(path);
    if (it == objects_.end()) return absl::NotFoundError(path);
    json object = it->second;
    objects_.erase(it);
    if (path.rfind(kPods, 0) == 0) {
      object["status"] = Failed(137);
      events_.push_back({{"type", "DELETED"}, {"object", object}});
      changed_.notify_all();
    }
    return object;
  }

  Status Watch(const std::string& path, const EventCallback& on_event) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++watches_;
    changed_.notify_all();
    while (true) {
      changed_.wait(lock, [this] { return cancelled_ || !events_.empty(); });
      if (cancelled_) return absl::CancelledError("cancelled");
      json event = events_.front();
      events_.pop_front();
      changed_.notify_all();
      lock.unlock();
      const bool go = on_event(event);
      lock.lock();
      if (!go) return absl::OkStatus();
    }
  }

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    changed_.notify_all();
  }

  static json Failed(int exit_code) {
    return {{"phase", "Failed"},
            {"containerStatuses",
             json::array({{{"name", "elasticdl"},
                           {"state", {{"terminated", {{"exitCode", exit_code}}}}}}})}};
  }

  // Test controls.
  void Put(const std::string& path, json object) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[path] = std::move(object);
  }
  void Remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(path);
  }
  void Push(json event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    changed_.notify_all();
  }
  json Object(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_.count(path) ? objects_[path] : json();
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  int Lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return lists_;
  }
  void FailServices(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    service_error_ = std::move(s);
  }
  // Waits until the backend watches (its first list is done).
  void WaitWatching() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, 5s, [this] { return watches_ > 0; });
  }
  void FailPodsAtOnce() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_pods_at_once_ = true;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, json> objects_;
  std::deque<json> events_;
  std::vector<std::string> log_;
  Status service_error_;
  bool fail_pods_at_once_ = false;
  bool cancelled_ = false;
  int rv_ = 100;
  int uids_ = 0;
  int lists_ = 0;
  int watches_ = 0;
};

class KubernetesBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = std::make_unique<FakeKubeClient>();
    api_ = client.get();
    client_ = std::move(client);
  }

  // The master's backend (its own pod exists) or the client's.
  std::unique_ptr<KubernetesBackend> Make(bool master) {
    KubernetesBackendOptions options;
    options.spec.set_namespace_("ns");
    options.spec.set_image("zoo:1");
    options.job_name = "j";
    options.job_dir = "/data/j";
    options.retry = 10ms;
    if (master) {
      options.master_address = "10.0.0.1:50001";
      api_->Put(StrCat(kPods, "/elasticdl-j-master"),
                {{"metadata",
                  {{"name", "elasticdl-j-master"},
                   {"uid", "master-uid"},
                   {"labels", {{"elasticdl-replica-type", "master"}}}}}});
    }
    auto backend =
        KubernetesBackend::Create(std::move(options), std::move(client_), exits_.Callback());
    EXPECT_TRUE(backend.ok()) << backend.status();
    api_->WaitWatching();
    return std::move(*backend);
  }

  FakeKubeClient* api_ = nullptr;
  std::unique_ptr<KubeClient> client_;
  testing::BackendExits exits_;
};

TEST_F(KubernetesBackendTest, PodsOwnedByTheMasterAndTheirExits) {
  auto backend = Make(/*master=*/true);
  auto ps = backend->StartPs(PsId(0), PsLaunch{});
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(backend->Describe(*ps), "pod elasticdl-j-ps-0");
  json pod = api_->Object(StrCat(kPods, "/elasticdl-j-ps-0"));
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "master-uid");
  json service = api_->Object(StrCat(kServices, "/elasticdl-j-ps-0"));
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["uid"], "master-uid");
  ASSERT_TRUE(backend->StartWorker(WorkerId(4)).ok());

  json failed = api_->Object(StrCat(kPods, "/elasticdl-j-worker-4"));
  failed["status"] = FakeKubeClient::Failed(2);
  api_->Push({{"type", "MODIFIED"}, {"object", failed}});
  // Deleted afterwards: reported once.
  api_->Push({{"type", "DELETED"}, {"object", failed}});
  ASSERT_EQ(exits_.WaitFor(1).size(), 1u);
  ASSERT_TRUE(backend->Signal(ProcessName::Ps(PsId(0)), SIGKILL).ok());
  exits_.WaitFor(2);
  std::this_thread::sleep_for(100ms);
  std::vector<ProcessExit> exits = exits_.WaitFor(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].process, ProcessName::Worker(WorkerId(4)));
  EXPECT_FALSE(exits[0].ok);
  EXPECT_EQ(exits[0].description, "pod elasticdl-j-worker-4 exit code 2");
  EXPECT_EQ(exits[1].process, ProcessName::Ps(PsId(0)));
  EXPECT_EQ(exits[1].description, "pod elasticdl-j-ps-0 deleted, exit code 137");
  // SIGKILL waits for the kubelet: grace 1, not a force delete.
  EXPECT_EQ(api_->Log().back(), StrCat("DELETE ", kPods, "/elasticdl-j-ps-0 grace=1"));
}

TEST_F(KubernetesBackendTest, APodThatEndedBeforeItWasWatchedIsReported) {
  api_->FailPodsAtOnce();
  auto backend = Make(/*master=*/true);
  ASSERT_TRUE(backend->StartWorker(WorkerId(0)).ok());
  std::vector<ProcessExit> exits = exits_.WaitFor(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].process, ProcessName::Worker(WorkerId(0)));
  EXPECT_EQ(exits[0].description, "pod elasticdl-j-worker-0 exit code 1");
}

TEST_F(KubernetesBackendTest, AnExpiredWatchListsAgainAndFindsWhatWentMeanwhile) {
  auto backend = Make(/*master=*/true);
  ASSERT_TRUE(backend->StartWorker(WorkerId(0)).ok());
  ASSERT_TRUE(backend->StartWorker(WorkerId(1)).ok());
  const int lists = api_->Lists();
  // Worker 0 vanished while the watch was down; the server says 410.
  api_->Remove(StrCat(kPods, "/elasticdl-j-worker-0"));
  api_->Push({{"type", "ERROR"}, {"object", {{"kind", "Status"}, {"code", 410}}}});
  std::vector<ProcessExit> exits = exits_.WaitFor(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].process, ProcessName::Worker(WorkerId(0)));
  EXPECT_FALSE(exits[0].ok);
  EXPECT_EQ(exits[0].description, "pod elasticdl-j-worker-0 deleted, its container never ended");
  EXPECT_GT(api_->Lists(), lists);
}

TEST_F(KubernetesBackendTest, AFinishedMasterOfAnEarlierRunIsReplaced) {
  auto backend = Make(/*master=*/false);
  const std::string master = StrCat(kPods, "/elasticdl-j-master");
  json old = {{"metadata",
               {{"name", "elasticdl-j-master"},
                {"uid", "old"},
                {"labels", {{"elasticdl-replica-type", "master"}}}}},
              {"status", {{"phase", "Succeeded"}}}};
  api_->Put(master, old);
  // A finished master of an earlier run goes at once.
  ASSERT_TRUE(backend->StartMaster().ok());
  EXPECT_NE(api_->Object(master)["metadata"]["uid"], "old");
  std::vector<std::string> log = api_->Log();
  EXPECT_NE(std::find(log.begin(), log.end(), StrCat("DELETE ", master, " grace=0")), log.end());
}

TEST_F(KubernetesBackendTest, ARunningMasterOfTheSameNameIsRefused) {
  api_->Put(StrCat(kPods, "/elasticdl-j-master"),
            {{"metadata",
              {{"name", "elasticdl-j-master"},
               {"uid", "other"},
               {"labels", {{"elasticdl-replica-type", "master"}}}}},
             {"status", {{"phase", "Running"}}}});
  auto backend = Make(/*master=*/false);
  auto started = backend->StartMaster();
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      std::string(started.status().message()).find("is running: is another job named 'j' running?"),
      std::string::npos)
      << started.status();
}

TEST_F(KubernetesBackendTest, AServiceThatCannotBeCreatedTakesItsPodAlong) {
  api_->FailServices(absl::PermissionDeniedError("services is forbidden"));
  auto backend = Make(/*master=*/true);
  auto ps = backend->StartPs(PsId(1), PsLaunch{});
  EXPECT_EQ(ps.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(api_->Object(StrCat(kPods, "/elasticdl-j-ps-1")).is_null());
}

TEST_F(KubernetesBackendTest, APodThatCannotRunIsLostAndDeleted) {
  auto backend = Make(/*master=*/true);
  ASSERT_TRUE(backend->StartWorker(WorkerId(2)).ok());
  json pod = api_->Object(StrCat(kPods, "/elasticdl-j-worker-2"));
  pod["status"] = json::parse(R"({"phase": "Pending", "containerStatuses": [{"name": "elasticdl",
      "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]})");
  api_->Push({{"type", "MODIFIED"}, {"object", pod}});
  std::vector<ProcessExit> exits = exits_.WaitFor(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].description,
            "pod elasticdl-j-worker-2 cannot run: ImagePullBackOff: no such image");
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(api_->Object(StrCat(kPods, "/elasticdl-j-worker-2")).is_null());
}

}  // namespace
}  // namespace elasticdl::cluster
