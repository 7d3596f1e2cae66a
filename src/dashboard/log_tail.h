// Reads the event log (JOB_DIR/events.jsonl) as it grows: each call hands
// over the complete lines appended since the last one, parsed; a partial
// last line waits for its end, and lines that do not parse, or whose fields
// have types their reader does not expect, are skipped (with a warning):
// a damaged log costs its damaged lines, never the process reading it.
#ifndef ELASTICDL_DASHBOARD_LOG_TAIL_H_
#define ELASTICDL_DASHBOARD_LOG_TAIL_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace elasticdl::dashboard {

class LogTail {
 public:
  explicit LogTail(std::string path) : path_(std::move(path)) {}

  // Calls `apply` with each new event (a JSON object), in order. A missing
  // file has no events yet.
  void Poll(const std::function<void(const nlohmann::json&)>& apply);

 private:
  const std::string path_;
  uint64_t offset_ = 0;
};

}  // namespace elasticdl::dashboard

#endif  // ELASTICDL_DASHBOARD_LOG_TAIL_H_
