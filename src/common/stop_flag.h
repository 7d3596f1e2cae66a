// A flag that asks something to stop, which the thing can wait on instead of
// looking at it on a timer: set from any thread (a signal's, a watchdog's),
// as often as it likes; once set, it stays set.
#ifndef ELASTICDL_COMMON_STOP_FLAG_H_
#define ELASTICDL_COMMON_STOP_FLAG_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace elasticdl {

class StopFlag {
 public:
  // From any thread; wakes every waiter.
  void Set() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      set_ = true;
    }
    cv_.notify_all();
  }

  bool is_set() const {
    std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }

  // Returns once set (true, at once if it is), or after `timeout` (false).
  bool WaitFor(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return set_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool set_ = false;  // guarded by mu_
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_STOP_FLAG_H_
