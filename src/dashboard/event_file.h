// TensorBoard event files: `events.out.tfevents.<seconds>.<host>` in a
// directory, TFRecord-framed tensorflow.Event records (data/tfrecord.h)
// beginning with the file version, then scalar summaries. Each record is
// written at once, so TensorBoard (and a reader after a crash) sees every
// point added so far.
//
// Thread-safe. A failure to write is logged once; the job goes on.
#ifndef ELASTICDL_DASHBOARD_EVENT_FILE_H_
#define ELASTICDL_DASHBOARD_EVENT_FILE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::dashboard {

class EventFile {
 public:
  // Creates the directory if needed and a new file in it.
  static StatusOr<std::unique_ptr<EventFile>> Create(const std::string& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // One scalar point of the curve `tag` at `step`; `wall_time` in seconds
  // since the epoch (0: now).
  void AddScalar(const std::string& tag, int64_t step, double value, double wall_time = 0);

  const std::string& path() const { return path_; }

 private:
  EventFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Append(const std::string& event_bytes);

  std::mutex mu_;
  int fd_;
  const std::string path_;
  bool warned_ = false;
};

}  // namespace elasticdl::dashboard

#endif  // ELASTICDL_DASHBOARD_EVENT_FILE_H_
