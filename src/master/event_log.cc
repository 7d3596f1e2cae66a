#include "master/event_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/wall_time.h"
#include "dashboard/log_tail.h"

namespace elasticdl::master {

EventLog::EventLog(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) spdlog::warn("cannot write the event log {}: {}", path_, std::strerror(errno));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::Append(const std::string& event, const nlohmann::json& fields) {
  nlohmann::json line = {{"t", WallSeconds()}, {"event", event}};
  line.update(fields);
  const std::string text = line.dump() + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0 && ::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()) &&
      !warned_) {
    warned_ = true;
    spdlog::warn("writing the event log: {}", std::strerror(errno));
  }
  if (listener_) listener_(line, /*replayed=*/false);
}

void EventLog::Follow(Listener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  if (listener && !path_.empty()) {
    dashboard::LogTail(path_).Poll(
        [&](const nlohmann::json& event) { listener(event, /*replayed=*/true); });
  }
  listener_ = std::move(listener);
}

}  // namespace elasticdl::master
