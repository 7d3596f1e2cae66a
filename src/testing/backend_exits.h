// Records the exits a cluster backend reports, for tests to wait on.
#ifndef ELASTICDL_TESTING_BACKEND_EXITS_H_
#define ELASTICDL_TESTING_BACKEND_EXITS_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "cluster/cluster_backend.h"

namespace elasticdl::testing {

class BackendExits {
 public:
  // For the backend's constructor; the recorder must outlive the backend.
  cluster::ClusterBackend::ExitCallback Callback() {
    return [this](const cluster::ProcessExit& e) {
      std::lock_guard<std::mutex> lock(mu_);
      exits_.push_back(e);
      changed_.notify_all();
    };
  }
  // Waits up to `timeout` until `n` exits in all were reported; returns
  // those reported so far.
  std::vector<cluster::ProcessExit> WaitFor(
      size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, timeout, [&] { return exits_.size() >= n; });
    return exits_;
  }
  // The first exit, once there is one (within `timeout`).
  std::optional<cluster::ProcessExit> WaitForOne(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::vector<cluster::ProcessExit> exits = WaitFor(1, timeout);
    if (exits.empty()) return std::nullopt;
    return exits.front();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<cluster::ProcessExit> exits_;
};

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_BACKEND_EXITS_H_
