// Where the log lines of a job's processes meet: every child's output and the
// owner's own messages become `[label] text` lines on one stream, whole lines
// never interleaved.
#ifndef ELASTICDL_CLUSTER_LOG_SINK_H_
#define ELASTICDL_CLUSTER_LOG_SINK_H_

#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace elasticdl::cluster {

// Keeps a terminal status display (the client's progress bar) out of the way
// of log lines: the sink calls BeforeWrite() just before it writes a batch of
// lines and AfterWrite() just after, both with the sink's lock held, so they
// must not call back into the sink.
class LineObserver {
 public:
  virtual ~LineObserver() = default;
  virtual void BeforeWrite(std::FILE* out) = 0;  // e.g. erase the status line
  virtual void AfterWrite(std::FILE* out) = 0;   // e.g. redraw it
};

// A thread-safe sink of labelled lines on a stdio stream. Each call writes its
// lines with one fwrite and flushes, under a lock, so lines from different
// threads (or processes' reader threads) never mix. Write errors are ignored:
// logging must not fail the job.
class LogSink {
 public:
  // Lines longer than this are written as several lines, cut at UTF-8
  // character boundaries.
  static constexpr size_t kMaxLineBytes = 16 * 1024;

  // `out` is not owned and must outlive the sink.
  explicit LogSink(std::FILE* out) : out_(out) {}
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Writes `text` as `[label] text` (as `text` with an empty label, for
  // output that is labelled already). A `text` with newlines becomes one
  // labelled line per line (a single trailing newline adds no empty line);
  // a trailing '\r' on a line is dropped.
  void Line(std::string_view label, std::string_view text);

  // Runs `fn(out)` with the lock held, for output that is not a log line,
  // such as redrawing a progress bar between log lines.
  void Exclusive(const std::function<void(std::FILE*)>& fn);

  // Sets (or, with nullptr, clears) the observer; not owned, must stay alive
  // until cleared or the sink is destroyed.
  void SetObserver(LineObserver* observer);

 private:
  std::mutex mu_;
  std::FILE* const out_;
  LineObserver* observer_ = nullptr;  // guarded by mu_
};

// Assembles a byte stream (a child's stdout) into lines for a LogSink under
// one label: whole lines go out as they complete, a line that reaches
// LogSink::kMaxLineBytes without a newline goes out in pieces, and Flush()
// writes what is left at end of stream. Not thread-safe: one per stream.
class LineWriter {
 public:
  // `sink` is not owned and must outlive the writer.
  LineWriter(LogSink* sink, std::string label) : sink_(sink), label_(std::move(label)) {}
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  void Append(std::string_view bytes);
  // Writes a final line without newline, if any.
  void Flush();

 private:
  LogSink* const sink_;
  const std::string label_;
  std::string pending_;  // bytes of the current, unfinished line
};

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_LOG_SINK_H_
