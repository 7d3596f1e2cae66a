// A worker's thread for running its tasks' pipelines ahead of the model: given
// a task's pipeline (Start), it keeps the next `depth` elements ready (or in
// the making) while the training thread computes and pushes the current
// one. Same elements, same order, the pipeline's errors in their place.
//
// One thread for every task of the worker: LibTorch initializes a thread's
// intra-op settings on its first parallel operation, and doing so clears
// oneDNN's cache of convolution primitives, which the model would then
// build again. Thread-safe; one pipeline at a time, from one training thread.
//
// The thread may run at a lower priority than the thread that made it (a
// higher nice value), so that on cores busy computing it takes the time the
// computing threads leave rather than theirs. Making an element is a call
// into the model's code (ModelCalls), where one is given.
#ifndef ELASTICDL_WORKER_PIPELINE_AHEAD_H_
#define ELASTICDL_WORKER_PIPELINE_AHEAD_H_

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "elasticdl/data/dataset.h"
#include "worker/model_calls.h"

namespace elasticdl::worker {

template <typename T>
class PipelineAhead {
 public:
  // `niceness` is added to the thread's nice value (and so to that of the
  // threads its pipelines start). `calls` (may be null) is told of each
  // element in the making.
  explicit PipelineAhead(size_t depth, int niceness = 0, ModelCalls* calls = nullptr)
      : depth_(depth > 0 ? depth : 1), niceness_(niceness), calls_(calls) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PipelineAhead() {
    Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  PipelineAhead(const PipelineAhead&) = delete;
  PipelineAhead& operator=(const PipelineAhead&) = delete;

  // Runs `pipeline` ahead from now on, in place of any earlier one (Stop).
  // Nothing else iterates it afterwards. For ModelCalls: the pipeline is
  // `task`'s, and its next element that task's minibatch `first`.
  void Start(Dataset<T> pipeline, int64_t task = -1, int64_t first = 0) {
    Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      pipeline_.emplace(std::move(pipeline));
      active_ = true;
      task_ = task;
      made_ = first;
    }
    cv_.notify_all();
  }

  // The running pipeline's next element, as Dataset::Next would give it;
  // waits for it to be made. After the end or an error, the end.
  StatusOr<std::optional<T>> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (ready_.empty() && active_ && !ended_) ++waits_;
    cv_.wait(lock, [this] { return !ready_.empty() || ended_ || !active_; });
    if (ready_.empty()) return std::optional<T>();
    StatusOr<std::optional<T>> next = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return next;
  }

  // Every element made and not taken yet, without waiting for more; the
  // pipeline's end (or error) is last among them once made. The thread
  // goes on making the next ones.
  std::deque<StatusOr<std::optional<T>>> TakeReady() {
    std::deque<StatusOr<std::optional<T>>> taken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      taken.swap(ready_);
    }
    cv_.notify_all();
    return taken;
  }

  // How many times Next found no element made and waited for one, since
  // the last call: a pipeline that makes the model wait is behind it.
  size_t TakeWaits() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(waits_, 0);
  }

  // Whether the running pipeline's end is made and not taken yet: the
  // elements before it can be taken without waiting. (Not after an error,
  // whose elements before it are taken one by one as they are needed.)
  bool EndMade() {
    std::lock_guard<std::mutex> lock(mu_);
    return active_ && ended_ && !ready_.empty() && ready_.back().ok() &&
           !ready_.back()->has_value();
  }

  // Drops the running pipeline (after the element in the making) and what
  // it made that was not taken. The pipeline is destroyed on this thread.
  void Stop() {
    std::optional<Dataset<T>> dropped;
    {
      std::unique_lock<std::mutex> lock(mu_);
      active_ = false;
      cv_.wait(lock, [this] { return !busy_; });
      ready_.clear();
      ended_ = false;
      dropped = std::exchange(pipeline_, std::nullopt);
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    pthread_setname_np(pthread_self(), "edl-pipeline");
    if (niceness_ > 0) {
      // Linux gives each thread its own nice value; a raise needs no privilege.
      const auto tid = static_cast<id_t>(syscall(SYS_gettid));
      const int now = getpriority(PRIO_PROCESS, tid);
      setpriority(PRIO_PROCESS, tid, std::min(19, now + niceness_));
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return quit_ || (active_ && !ended_ && ready_.size() < depth_); });
      if (quit_) return;
      // pipeline_ is this thread's while busy_: Start and Stop wait for it.
      busy_ = true;
      const int64_t task = task_;
      const int64_t index = made_++;
      lock.unlock();
      StatusOr<std::optional<T>> next = NextOfPipeline(task, index);
      lock.lock();
      busy_ = false;
      ready_.push_back(std::move(next));
      ended_ = !ready_.back().ok() || !ready_.back()->has_value();
      cv_.notify_all();
    }
  }

  StatusOr<std::optional<T>> NextOfPipeline(int64_t task, int64_t index) {
    std::optional<ModelCalls::Scope> call;
    if (calls_ != nullptr) call.emplace(calls_->Enter(ModelCalls::kPipeline, task, index));
    try {
      return pipeline_->Next();
    } catch (const std::exception& e) {  // the stages turn user code's throws into errors
      return absl::InternalError(e.what());
    }
  }

  const size_t depth_;
  const int niceness_;
  ModelCalls* const calls_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Dataset<T>> pipeline_;
  std::deque<StatusOr<std::optional<T>>> ready_;  // made, not yet taken
  bool active_ = false;                           // pipeline_ is to be run
  bool busy_ = false;                             // the thread is making an element of pipeline_
  bool ended_ = false;  // the pipeline's end or error is in ready_ (or was taken)
  bool quit_ = false;
  size_t waits_ = 0;   // Next waited for an element, since TakeWaits
  int64_t task_ = -1;  // of pipeline_
  int64_t made_ = 0;   // the index of the element of pipeline_ to make next
  std::thread thread_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_PIPELINE_AHEAD_H_
