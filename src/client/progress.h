// The client's view of a running job: a progress bar with loss and
// throughput on a terminal (redrawn in place, kept below log lines), or a
// status line every few seconds when stderr is not a terminal.
#ifndef ELASTICDL_CLIENT_PROGRESS_H_
#define ELASTICDL_CLIENT_PROGRESS_H_

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "cluster/log_sink.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::client {

class ProgressBar : public cluster::LineObserver {
 public:
  // Draws on `sink`'s stream; registers itself as the sink's observer.
  // `enabled` false: nothing is drawn.
  ProgressBar(cluster::LogSink* sink, bool enabled);
  ~ProgressBar() override;

  void Update(const proto::GetJobStatusResponse& status);
  // Removes the bar for good.
  void Finish();

  void BeforeWrite(std::FILE* out) override;
  void AfterWrite(std::FILE* out) override;

 private:
  std::string Render(const proto::GetJobStatusResponse& status) const;

  cluster::LogSink* const sink_;
  const bool enabled_;
  const bool tty_;
  std::string line_;  // what is drawn; guarded by the sink's lock
  std::chrono::steady_clock::time_point last_print_{};
};

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_PROGRESS_H_
