// The children of one owner (the master's parameter servers and workers),
// watched together: an exit is reported at once, so the owner can relaunch.
#ifndef ELASTICDL_CLUSTER_PROCESS_GROUP_H_
#define ELASTICDL_CLUSTER_PROCESS_GROUP_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/log_sink.h"
#include "cluster/process.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

// Processes keyed by label, with one watcher thread that
//   - forks them all, so their die-with-parent signal is tied to the
//     group's lifetime rather than to whichever thread called Start(), and
//   - waits for all of them at once (pidfd + poll; a 20 ms poll where
//     pidfd_open(2) is missing) and reports each exit as soon as it happens,
//     after the child's last output lines reached the sink.
//
// Thread-safe. The exit callback runs on the watcher thread, one call at a
// time; it may call Start() (to relaunch: the exited label is free again by
// then), Signal(), running() and StopAll(), but must not block for long (it
// holds up other reports) nor destroy the group.
class ProcessGroup {
 public:
  using ExitCallback = std::function<void(const std::string& label, pid_t pid, ExitStatus status)>;

  // `sink` is not owned and must outlive the group. `on_exit` may be empty.
  ProcessGroup(LogSink* sink, ExitCallback on_exit);
  // StopAll() with no grace (SIGTERM, then at once SIGKILL), then stops the
  // watcher. Blocks until every child is reaped.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts a child (see Process::Start). Fails with ALREADY_EXISTS while a
  // child with the same label runs, FAILED_PRECONDITION once StopAll() has
  // begun, or with the start error. Blocks until the exec succeeded.
  // Returns the child's pid (it may have ended already: a short-lived
  // child is no longer in pid()).
  StatusOr<pid_t> Start(const ProcessSpec& spec);

  // Watches a process that is not our child under `label` (see
  // Process::Adopt); its exit is reported like a child's, with the status
  // lost. NOT_FOUND when it is gone.
  Status Adopt(const std::string& label, pid_t pid, uint64_t start_time);

  // Sends `sig` to the child `label` (NOT_FOUND if none runs).
  Status Signal(const std::string& label, int sig);

  // Stops the group for good: sends SIGTERM to every child, waits up to
  // `grace` for them to exit, sends SIGKILL to the rest and reaps them.
  // Returns when every exit has been reported to the callback (or, when
  // called from the callback, once every child is reaped; the reports follow
  // when the callback returns). Later Start() calls fail.
  void StopAll(std::chrono::milliseconds grace);

  // Children started and not yet reported as exited.
  size_t running() const;
  // The pid of the running child `label`.
  std::optional<pid_t> pid(const std::string& label) const;

 private:
  struct StartRequest;

  // The watcher thread: starts the requested children and reports exits
  // until quit_.
  void Watch();
  // Starts one child on the watcher thread.
  StatusOr<pid_t> StartHere(const ProcessSpec& spec);
  // Reports every exited child to the callback and forgets it.
  void ReportExits();
  void Wake();
  bool OnWatcher() const { return std::this_thread::get_id() == watcher_.get_id(); }

  LogSink* const sink_;
  const ExitCallback on_exit_;
  const int wake_fd_;  // eventfd: start requests, StopAll() or quit

  mutable std::mutex mu_;
  std::condition_variable changed_;  // a child was reported, or a request answered
  std::map<std::string, std::shared_ptr<Process>> children_;  // not yet reported
  std::deque<StartRequest*> requests_;                        // waiting for the watcher
  bool reporting_ = false;  // the callback runs for a child no longer in children_
  bool stopping_ = false;
  bool quit_ = false;

  std::thread watcher_;  // last: starts after everything above exists
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_PROCESS_GROUP_H_
