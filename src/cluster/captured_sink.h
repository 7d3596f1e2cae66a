// Tests: a LogSink over a temporary file, and what has been written to it.
#ifndef ELASTICDL_CLUSTER_CAPTURED_SINK_H_
#define ELASTICDL_CLUSTER_CAPTURED_SINK_H_

#include <unistd.h>

#include <cstdio>
#include <string>

#include "cluster/log_sink.h"

namespace elasticdl::cluster {

class CapturedSink {
 public:
  CapturedSink() : file_(std::tmpfile()), sink_(file_) {}
  ~CapturedSink() { std::fclose(file_); }
  CapturedSink(const CapturedSink&) = delete;
  CapturedSink& operator=(const CapturedSink&) = delete;

  LogSink* sink() { return &sink_; }
  std::string Text() const {
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::pread(fileno(file_), buffer, sizeof buffer, text.size())) > 0;) {
      text.append(buffer, n);
    }
    return text;
  }

 private:
  std::FILE* file_;
  LogSink sink_;
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_CAPTURED_SINK_H_
