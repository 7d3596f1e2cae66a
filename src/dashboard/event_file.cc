#include "dashboard/event_file.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/strings.h"
#include "common/wall_time.h"
#include "data/tfrecord.h"
#include "elasticdl/proto/tensorboard.pb.h"

namespace elasticdl::dashboard {

StatusOr<std::unique_ptr<EventFile>> EventFile::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(StrCat(dir, ": cannot create: ", ec.message()));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  const double now = WallSeconds();
  // TensorBoard orders a directory's files by name; the pid keeps the
  // names of two masters apart within a second.
  const std::string path =
      StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(now), ".", host, ".", getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(StrCat(path, ": cannot create: ", std::strerror(errno)));
  std::unique_ptr<EventFile> file(new EventFile(fd, path));
  proto::Event first;
  first.set_wall_time(now);
  first.set_file_version("brain.Event:2");
  file->Append(first.SerializeAsString());
  return file;
}

EventFile::~EventFile() { ::close(fd_); }

void EventFile::AddScalar(const std::string& tag, int64_t step, double value, double wall_time) {
  proto::Event event;
  event.set_wall_time(wall_time > 0 ? wall_time : WallSeconds());
  event.set_step(step);
  proto::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  Append(event.SerializeAsString());
}

void EventFile::Append(const std::string& event_bytes) {
  std::string record;
  tfrecord::EncodeRecord(event_bytes, &record);
  std::lock_guard<std::mutex> lock(mu_);
  if (::write(fd_, record.data(), record.size()) != static_cast<ssize_t>(record.size()) &&
      !warned_) {
    warned_ = true;
    spdlog::warn("{}: cannot write TensorBoard events: {}", path_, std::strerror(errno));
  }
}

}  // namespace elasticdl::dashboard
