// A cluster backend that starts nothing: it records what it was asked, and
// a test reports the processes' exits (Exit, or the supervisor's queue).
// The recorded fields are guarded by `mu` while a master runs.
#ifndef ELASTICDL_TESTING_FAKE_BACKEND_H_
#define ELASTICDL_TESTING_FAKE_BACKEND_H_

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_backend.h"
#include "testing/ids.h"

namespace elasticdl::testing {

class FakeBackend : public cluster::ClusterBackend {
 public:
  explicit FakeBackend(bool starts_workers = true, ExitCallback on_exit = nullptr)
      : starts_workers_(starts_workers), on_exit_(std::move(on_exit)) {}

  bool starts_workers() const override { return starts_workers_; }
  StatusOr<cluster::ProcessHandle> StartMaster() override {
    return absl::FailedPreconditionError("the master is not started by a master");
  }
  StatusOr<cluster::ProcessHandle> StartPs(PsId ps, const cluster::PsLaunch& launch) override {
    std::lock_guard<std::mutex> lock(mu);
    ps_started.push_back({ps, launch.restore});
    return Handle();
  }
  StatusOr<cluster::ProcessHandle> StartWorker(WorkerId worker) override {
    std::lock_guard<std::mutex> lock(mu);
    if (refuse_workers) return absl::UnavailableError("no capacity");
    workers_started.push_back(worker);
    return Handle();
  }
  Status Adopt(const cluster::ProcessName& process, const cluster::ProcessHandle& handle) override {
    std::lock_guard<std::mutex> lock(mu);
    if (gone.count(handle.backend_id) != 0) return absl::NotFoundError("gone");
    adopted.push_back(process.label());
    return absl::OkStatus();
  }
  Status Signal(const cluster::ProcessName& process, int signal) override {
    std::lock_guard<std::mutex> lock(mu);
    signals.push_back({process.label(), signal});
    return absl::OkStatus();
  }
  void StopAll(std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu);
    ++stops;
  }

  // Reports that a process ended, as a real backend's watcher would.
  void Exit(const cluster::ProcessName& process, bool ok, const std::string& description) {
    on_exit_(cluster::ProcessExit{process, ok, description});
  }

  std::mutex mu;
  // (server, whether it restores a checkpoint), in the order asked.
  std::vector<std::pair<PsId, bool>> ps_started;
  std::vector<WorkerId> workers_started;
  // Labels ("ps-0", "worker-3").
  std::vector<std::string> adopted;
  std::vector<std::pair<std::string, int>> signals;
  std::set<std::string> gone;
  bool refuse_workers = false;
  int stops = 0;

 private:
  cluster::ProcessHandle Handle() {
    cluster::ProcessHandle h;
    h.backend_id = std::to_string(++next_id_);
    return h;
  }
  const bool starts_workers_;
  const ExitCallback on_exit_;
  int next_id_ = 0;
};

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_FAKE_BACKEND_H_
