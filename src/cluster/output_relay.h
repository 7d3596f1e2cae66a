// A pipe whose write end any number of processes share as their stdout and
// stderr, and a thread copying what they write, line by line, to a LogSink.
// Unlike a child's own pipes (Process), it lives as long as the relay, not
// as long as one process: the client gives it to every master it starts,
// and the job's processes inherit it, so their output keeps flowing (and
// they get no SIGPIPE) when a master dies and another takes over.
#ifndef ELASTICDL_CLUSTER_OUTPUT_RELAY_H_
#define ELASTICDL_CLUSTER_OUTPUT_RELAY_H_

#include <chrono>
#include <memory>
#include <thread>

#include "cluster/log_sink.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

class OutputRelay {
 public:
  // `sink` is not owned and must outlive the relay. Lines are written
  // unlabelled (the writers label their own).
  static StatusOr<std::unique_ptr<OutputRelay>> Create(LogSink* sink);
  // Stop(std::chrono::milliseconds(0)) if not stopped yet.
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // The write end, for ProcessSpec::output_fd (close-on-exec here; the
  // child gets its own copy).
  int write_fd() const { return write_fd_; }

  // Closes our write end and copies what is left until every writer has
  // closed its copy or `linger` passes, then stops. Idempotent.
  void Stop(std::chrono::milliseconds linger);

 private:
  OutputRelay(LogSink* sink, int read_fd, int write_fd, int stop_fd);
  void Pump();

  LogSink* const sink_;
  const int read_fd_;
  int write_fd_;
  const int stop_fd_;
  std::thread thread_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_OUTPUT_RELAY_H_
