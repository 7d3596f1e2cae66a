// One thread kept to run work aside from its owner, one piece at a time: a
// thread made once in place of one started and joined for every piece. It
// is named, and starts at the first Start, taking that caller's CPU affinity
// and niceness.
//
// One owner thread calls Start and Wait; a piece must not call them.
#ifndef ELASTICDL_COMMON_ASIDE_THREAD_H_
#define ELASTICDL_COMMON_ASIDE_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace elasticdl {

class AsideThread {
 public:
  // `name`: the thread's name (the kernel keeps its first 15 characters).
  explicit AsideThread(std::string name);
  // Waits for the piece running, if any, then joins the thread.
  ~AsideThread();
  AsideThread(const AsideThread&) = delete;
  AsideThread& operator=(const AsideThread&) = delete;

  // Runs `work` (not empty; it must not throw) on the thread. Waits first
  // for the piece before it.
  void Start(std::function<void()> work);
  // Returns once the last piece started has run (at once if none).
  void Wait();

 private:
  void Loop();

  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> work_;  // the piece to run; empty once taken
  bool busy_ = false;           // a piece is given and has not yet run
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_ASIDE_THREAD_H_
