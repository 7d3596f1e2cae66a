// The job's event log: one JSON object per line in <job_dir>/events.jsonl,
// appended by the master as things happen (processes started and lost,
// tasks handed out and finished, scaling, restarts), for people and tools
// that follow a job. Every object has "t" (wall-clock seconds since the
// epoch) and "event"; the other fields depend on the event.
//
// Thread-safe. Appends are written at once, whole lines or nothing (an
// append cut short by a full disk is taken back), so the log survives the
// master dying; failing to write is logged, never fatal.
#ifndef ELASTICDL_MASTER_EVENT_LOG_H_
#define ELASTICDL_MASTER_EVENT_LOG_H_

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace elasticdl::master {

class EventLog {
 public:
  // Appends to `path` (created if missing). An empty path logs nothing.
  explicit EventLog(std::string path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Appends {"t": now, "event": event, ...fields}.
  void Append(const std::string& event, const nlohmann::json& fields = nlohmann::json::object());

  // How many events named `event` the log holds, an earlier master's
  // included.
  size_t Count(const std::string& event);

  // `replayed`: the event was in the log before Follow was called.
  using Listener = std::function<void(const nlohmann::json& event, bool replayed)>;
  // Hands `listener` every event already in the log (an earlier master's,
  // when this one resumed the job), then every event appended from now on,
  // in order, under the log's lock (so it must not append). Lines that do
  // not parse are skipped. Follow(nullptr) stops.
  void Follow(Listener listener);

 private:
  const std::string path_;
  Listener listener_;
  std::mutex mu_;
  int fd_ = -1;
  // The last append failed (logged once per failing spell).
  bool failing_ = false;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_EVENT_LOG_H_
