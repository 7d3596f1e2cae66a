// Wakes a loop that otherwise looks around on a timer: whoever changes what
// the loop looks at rings, and the loop's wait ends at once instead of at
// the next tick. Rings between two waits count once; a ring before a wait
// ends that wait at once, so none is lost.
#ifndef ELASTICDL_COMMON_DOORBELL_H_
#define ELASTICDL_COMMON_DOORBELL_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace elasticdl {

class Doorbell {
 public:
  // From any thread.
  void Ring() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      rung_ = true;
    }
    cv_.notify_one();
  }

  // Returns once rung since the last wait returned (at once if it was
  // meanwhile), or after `timeout`: whether it was rung. One waiter.
  bool WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool rung = cv_.wait_for(lock, timeout, [this] { return rung_; });
    rung_ = false;
    return rung;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool rung_ = false;  // guarded by mu_
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_DOORBELL_H_
