// Orderly shutdown on SIGINT/SIGTERM/SIGHUP for the client and the roles: the
// first signal starts a shutdown, a second one forces it.
#ifndef ELASTICDL_CLUSTER_SIGNALS_H_
#define ELASTICDL_CLUSTER_SIGNALS_H_

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::cluster {

struct ShutdownSignalsOptions {
  // The signals that ask for shutdown: Ctrl-C, kill(1) and Kubernetes,
  // a closed terminal.
  std::vector<int> signals = {SIGINT, SIGTERM, SIGHUP};
  // Called on the signal thread with the first signal. May be empty: then
  // poll requested() or block in Wait().
  std::function<void(int sig)> on_shutdown;
  // Called on the signal thread with each later signal. Empty (the
  // default): the second signal ends the process at once, killed by that
  // signal as if it had not been caught; children started with a
  // die-with-parent signal follow it.
  std::function<void(int sig)> on_force;
};

// Turns shutdown signals into events. Install() blocks the signals in the
// calling thread and reads them on a thread of its own (signalfd), so they
// never interrupt other code and no handler runs in signal context.
//
// Contract:
//  - Install it in main() before starting any other thread: threads inherit
//    the signal mask when they are created, and a thread that has the
//    signals unblocked would take one with its default action, ending the
//    process. (Process resets the mask in children it starts.)
//  - One per process: signal dispositions and pending signals are
//    process-wide.
//  - Only process-directed signals are seen (kill(2), the terminal's
//    Ctrl-C); one sent to a single thread (raise(3), pthread_kill(3)) stays
//    pending on that thread.
//  - Destroying it stops the signal thread but leaves the signals blocked;
//    keep it alive to the end of main().
//
// Thread-safe.
class ShutdownSignals {
 public:
  static StatusOr<std::unique_ptr<ShutdownSignals>> Install(ShutdownSignalsOptions options = {});
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Whether a shutdown signal has arrived.
  bool requested() const;
  // The first shutdown signal, or 0 if none has arrived.
  int signal() const;
  // Blocks until a shutdown signal arrives.
  void Wait() const;
  // Blocks until a shutdown signal arrives (true) or `timeout` passes (false).
  bool WaitFor(std::chrono::milliseconds timeout) const;

 private:
  ShutdownSignals(ShutdownSignalsOptions options, int signal_fd, int stop_fd);
  // The signal thread: reads signal_fd_ until stop_fd_ is signalled.
  void Run();
  void Deliver(int sig);

  const ShutdownSignalsOptions options_;
  const int signal_fd_;  // signalfd of options_.signals
  const int stop_fd_;    // eventfd: the destructor wakes Run() with it

  mutable std::mutex mu_;
  mutable std::condition_variable arrived_;
  int first_signal_ = 0;  // guarded by mu_
  int count_ = 0;         // signals received; guarded by mu_

  std::thread thread_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_SIGNALS_H_
