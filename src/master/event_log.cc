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

namespace {

// Appends `text` whole or not at all: a write cut short (a full disk) is
// taken back, so that readers never meet half a line, and the next event
// starts a line of its own once there is room again. The error, or 0.
int AppendWhole(int fd, const std::string& text) {
  const off_t before = ::lseek(fd, 0, SEEK_END);
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (written > 0 && before >= 0) (void)!::ftruncate(fd, before);
      return err;
    }
    written += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

void EventLog::Append(const std::string& event, const nlohmann::json& fields) {
  nlohmann::json line = {{"t", WallSeconds()}, {"event", event}};
  line.update(fields);
  const std::string text = line.dump() + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) {
    const int err = AppendWhole(fd_, text);
    if (err != 0 && !failing_) {
      spdlog::warn("cannot write the event log {}: {}; events are missing from it until it can",
                   path_, std::strerror(err));
    } else if (err == 0 && failing_) {
      spdlog::info("writing the event log {} again", path_);
    }
    failing_ = err != 0;
  }
  if (listener_) listener_(line, /*replayed=*/false);
}

size_t EventLog::Count(const std::string& event) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t count = 0;
  if (path_.empty()) return count;
  dashboard::LogTail(path_).Poll([&](const nlohmann::json& e) {
    const auto it = e.find("event");
    if (it != e.end() && it->is_string() && it->get<std::string>() == event) ++count;
  });
  return count;
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
