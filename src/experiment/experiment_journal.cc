#include "experiment/experiment_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::experiment {

std::string ExperimentJournalPath(const std::string& dir) { return dir + "/journal.jsonl"; }

StatusOr<std::vector<nlohmann::json>> ReadExperimentJournal(const std::string& dir) {
  const std::string path = ExperimentJournalPath(dir);
  if (::access(path.c_str(), F_OK) != 0) return std::vector<nlohmann::json>{};
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<nlohmann::json> events;
  size_t start = 0;
  int line = 0;
  while (start < text.size()) {
    ++line;
    const size_t end = text.find('\n', start);
    const bool last = end == std::string::npos;
    const std::string_view body(text.data() + start, (last ? text.size() : end) - start);
    nlohmann::json event = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded() || !event.is_object()) {
      if (last) {
        // A write the crash cut short: it never happened.
        if (::truncate(path.c_str(), static_cast<off_t>(start)) != 0) {
          return absl::InternalError(StrCat("cannot truncate ", path, ": ", std::strerror(errno)));
        }
        break;
      }
      return absl::DataLossError(StrCat(path, ":", line, ": not a JSON object: ", body));
    }
    events.push_back(std::move(event));
    if (last) break;
    start = end + 1;
  }
  return events;
}

StatusOr<ExperimentJournal> ExperimentJournal::Open(const std::string& dir) {
  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  const std::string path = ExperimentJournalPath(dir);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  return ExperimentJournal(path, fd);
}

ExperimentJournal::ExperimentJournal(ExperimentJournal&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

ExperimentJournal::~ExperimentJournal() {
  if (fd_ >= 0) ::close(fd_);
}

Status ExperimentJournal::Append(const std::string& event, const nlohmann::json& fields) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json line = {{"t", now}, {"event", event}};
  line.update(fields);
  const std::string text = line.dump() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(StrCat("cannot write ", path_, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) {
    return absl::InternalError(StrCat("cannot sync ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::experiment
