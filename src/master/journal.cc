#include "master/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::master {
namespace {

// Writes all of `data` to a new file `path` and syncs it.
Status WriteSynced(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, StrCat(path, ": cannot create"));
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoToStatus(err, StrCat(path, ": write failed"));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, StrCat(path, ": fsync failed"));
  }
  if (::close(fd) != 0) return ErrnoToStatus(errno, StrCat(path, ": close failed"));
  return absl::OkStatus();
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, StrCat(dir, ": cannot open directory"));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoToStatus(err, StrCat(dir, ": fsync failed"));
  return absl::OkStatus();
}

}  // namespace

std::string JournalPath(const std::string& job_dir) { return job_dir + "/journal.pb"; }

Status WriteJournal(const std::string& job_dir, const proto::MasterJournal& journal) {
  const std::string path = JournalPath(job_dir);
  std::string bytes;
  if (!journal.SerializeToString(&bytes)) {
    return absl::InternalError(StrCat(path, ": cannot serialize the master journal"));
  }
  const std::string tmp = path + ".tmp";
  EDL_RETURN_IF_ERROR(WriteSynced(tmp, bytes));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoToStatus(errno, StrCat(path, ": rename from ", tmp, " failed"));
  }
  return SyncDirectory(job_dir);
}

StatusOr<std::optional<proto::MasterJournal>> ReadJournal(const std::string& job_dir) {
  const std::string path = JournalPath(job_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<proto::MasterJournal>();
    return ErrnoToStatus(errno, path);
  }
  EDL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  proto::MasterJournal journal;
  if (!journal.ParseFromString(bytes)) {
    return absl::DataLossError(
        StrCat(path, ": not a valid master journal (", bytes.size(), " bytes)"));
  }
  return std::optional<proto::MasterJournal>(std::move(journal));
}

}  // namespace elasticdl::master
