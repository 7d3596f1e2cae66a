// A child process of this one, with its output going to a LogSink under a
// label ("[worker-1] ..."). The building block of the `local` cluster
// backend: the client starts the master this way, the master its parameter
// servers and workers.
#ifndef ELASTICDL_CLUSTER_PROCESS_H_
#define ELASTICDL_CLUSTER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/log_sink.h"
#include "common/process_start.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

class ForkServer;

// How a child ended: it exited with `code`, or a signal killed it.
struct ExitStatus {
  bool exited = true;  // false: killed by `signal`
  int code = 0;        // exit code when `exited`; -1 when the status was lost (see Process)
  int signal = 0;      // the signal when !exited
  bool core_dumped = false;

  static ExitStatus Exited(int code) { return {true, code, 0, false}; }
  static ExitStatus Killed(int signal, bool core_dumped = false) {
    return {false, 0, signal, core_dumped};
  }
  // From a wait(2) status.
  static ExitStatus FromWaitStatus(int wstatus);

  bool ok() const { return exited && code == 0; }
  // "exit code 3", "killed by SIGKILL", "killed by SIGSEGV (core dumped)".
  std::string ToString() const;
};

// What to run. The child's stdin is /dev/null; its stdout and stderr go to
// the LogSink, both labelled `label`.
struct ProcessSpec {
  // Names the child in log lines and messages, e.g. "worker-1".
  std::string label;
  // argv[0] is the program: a path, or a name looked up in PATH (the
  // child's PATH if `env` sets one, else ours).
  std::vector<std::string> argv;
  // Environment variables set on top of ours (replacing ones of the same name).
  std::vector<std::pair<std::string, std::string>> env;
  // The child's working directory; empty: ours.
  std::string working_dir;
  // Prefix the child's output lines with `[label]`. False for a child whose
  // output is labelled already (the master, which labels its children's).
  bool label_output = true;
  // Puts the child in a process group of its own, so that a terminal's
  // Ctrl-C does not reach it directly and Signal() reaches its descendants
  // too. Default false: the child stays in our group.
  bool new_process_group = false;
  // Signal the child gets when the thread that started it dies (whatever
  // the cause, SIGKILL included), so no child outlives its parent. 0: none.
  int die_with_parent_signal = SIGKILL;
  // The child writes to our stdout and stderr directly instead of through
  // pipes to us (label_output then does not apply): for a child that must
  // outlive us and labels its own lines.
  bool inherit_output = false;
  // When >= 0, the child's stdout and stderr go to this descriptor (not
  // owned; see OutputRelay) instead of through pipes to us (label_output
  // then does not apply).
  int output_fd = -1;
  // When >= 0, the child's stdin is this descriptor (not owned) instead of
  // /dev/null.
  int stdin_fd = -1;
  // When >= 3, a descriptor (not owned) the exec'ed child keeps, under the
  // same number (see StartSpareForkServer in cluster/fork_server.h).
  int pass_fd = -1;
  // When set and the server serves this spec (ForkServer::Serves), the
  // child is forked by it instead of exec'ed here: the same program, without
  // loading its libraries again. Falls back to exec when the server cannot.
  std::shared_ptr<ForkServer> fork_server;
};

// Our environment with `spec.env` applied, as "NAME=value" strings: the
// child's environment.
std::vector<std::string> ChildEnvironment(const ProcessSpec& spec);

// A running (or finished) child process and the thread that reads its output.
//
// The child starts with default signal dispositions and an empty signal mask
// (whatever ShutdownSignals blocked here), stdin on /dev/null, and none of our
// file descriptors but 0-2.
//
// Thread-safe. Only this object reaps the child: the process must not reap
// children behind its back (SIGCHLD set to SIG_IGN, waitpid(-1, ...));
// if it does, the exit status is lost and reported as exit code -1.
class Process {
 public:
  // Forks and execs `spec.argv` (or has spec.fork_server fork it), and
  // returns once the exec has succeeded (the forked child is set up).
  // Fails (without leaving a child behind) if the program cannot be found or
  // executed or the working directory is unusable, with a message naming the
  // label, the program and the cause. `sink` is not owned and must outlive
  // the Process. Reads our environment (environ): no setenv() meanwhile.
  //
  // `die_with_parent_signal` is tied to the calling *thread* (prctl(2)
  // PR_SET_PDEATHSIG): call this from a thread that lives as long as the
  // child should (ProcessGroup does).
  static StatusOr<std::unique_ptr<Process>> Start(const ProcessSpec& spec, LogSink* sink);

  // Watches process `pid`, which is not our child (one that a previous
  // incarnation of us started and that outlived it), provided its start time
  // is `start_time` (see ProcessStartTime). NOT_FOUND when that process is
  // gone. Its exit is seen through a pidfd; its exit status is unknown
  // (reported as lost, code -1). Signals go through the pidfd, so they never
  // reach a later process with the same pid. Needs pidfd_open(2).
  static StatusOr<std::unique_ptr<Process>> Adopt(const std::string& label, pid_t pid,
                                                  uint64_t start_time);

  // If the child is still running, kills it (its process group with
  // `new_process_group`) with SIGKILL and reaps it. Blocks until then and
  // until its output is written to the sink.
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& label() const { return label_; }
  pid_t pid() const { return pid_; }
  // A descriptor that polls readable once the child has exited, for event
  // loops that watch many children; -1 where the kernel lacks pidfd_open(2)
  // (then poll TryWait() instead). Owned by this object.
  int exit_fd() const { return pidfd_; }

  // Sends `sig` to the child (to its process group with
  // `new_process_group`). Sending to a child that has already exited is a
  // no-op, not an error.
  Status Signal(int sig);

  // The exit status if the child has exited, without blocking. The first
  // call to see the exit reaps the child and writes the rest of its output
  // to the sink before returning, so its last lines precede any report of
  // its exit. (Output of descendants that outlive it is cut off there.)
  std::optional<ExitStatus> TryWait();
  // Blocks until the child exits.
  ExitStatus Wait();
  // Blocks until the child exits (true, and `*status` set if not null) or
  // `timeout` passes (false).
  bool WaitFor(std::chrono::milliseconds timeout, ExitStatus* status = nullptr);

 private:
  Process(LogSink* sink, std::string label, bool label_output, pid_t pid, bool group_leader,
          int pidfd, int stop_fd, bool adopted = false,
          std::shared_ptr<ForkServer> fork_server = nullptr);
  // The exit of a child that fork_server_ forked (it reaps it and reports
  // the status), if it has exited. Holds mu_.
  std::optional<ExitStatus> TryWaitServedLocked();

  // Body of the reader thread: copies stdout and stderr to the sink until
  // both reach end of file or stop_fd_ is signalled (then drains what is
  // buffered and quits). Owns and closes both descriptors.
  void ReadOutput(int stdout_fd, int stderr_fd);
  // Stops and joins the reader thread (idempotent).
  void FinishOutput();

  LogSink* const sink_;
  const std::string label_;
  const bool label_output_;
  const pid_t pid_;
  const bool group_leader_;
  const int pidfd_;     // -1 if unavailable
  const int stop_fd_;   // eventfd telling the reader to drain and stop
  const bool adopted_;  // not our child: no reaping, exit seen on the pidfd
  // Set for a child the fork server forked: its child, not ours.
  const std::shared_ptr<ForkServer> fork_server_;

  std::mutex mu_;                   // guards exit_, and reaping
  std::optional<ExitStatus> exit_;  // set once the child is reaped
  std::mutex reader_mu_;            // serializes FinishOutput()
  std::thread reader_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_PROCESS_H_
