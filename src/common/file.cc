#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>  // renameat2, RENAME_EXCHANGE
#include <cstring>
#include <filesystem>

#include "common/strings.h"

namespace elasticdl {
namespace {

Status ErrnoStatus(const std::string& path, std::string_view action, int err) {
  return ErrnoToStatus(err, StrCat(path, ": ", action));
}

constexpr size_t kWriteBufferSize = 1 << 20;

// Opens `path` read-only with `flags` and fsyncs it.
Status Fsync(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return ErrnoStatus(path, "cannot open for fsync", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(path, "fsync failed", err);
  return absl::OkStatus();
}

}  // namespace

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : RandomAccessFile(std::move(path), size), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status Read(uint64_t offset, size_t n, char* scratch, size_t* bytes_read) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path(), StrCat("read at offset ", offset + done), errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    *bytes_read = done;
    return absl::OkStatus();
  }

 private:
  int fd_;
};

class StringRandomAccessFile final : public RandomAccessFile {
 public:
  StringRandomAccessFile(std::string name, std::string contents)
      : RandomAccessFile(std::move(name), contents.size()), contents_(std::move(contents)) {}

  Status Read(uint64_t offset, size_t n, char* scratch, size_t* bytes_read) const override {
    if (offset >= contents_.size()) {
      *bytes_read = 0;
      return absl::OkStatus();
    }
    size_t take = std::min<uint64_t>(n, contents_.size() - offset);
    std::memcpy(scratch, contents_.data() + offset, take);
    *bytes_read = take;
    return absl::OkStatus();
  }

 private:
  std::string contents_;
};

StatusOr<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "cannot open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "cannot stat", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(StrCat(path, ": is a directory, expected a file"));
  }
  return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
}

std::unique_ptr<RandomAccessFile> RandomAccessFile::FromString(std::string name,
                                                               std::string contents) {
  return std::make_unique<StringRandomAccessFile>(std::move(name), std::move(contents));
}

Status RandomAccessFile::ReadExactly(uint64_t offset, size_t n, char* scratch,
                                     std::string_view what) const {
  size_t got = 0;
  EDL_RETURN_IF_ERROR(Read(offset, n, scratch, &got));
  if (got < n) {
    return absl::DataLossError(StrCat(path(), ": offset ", offset, ": truncated ", what, ": needs ",
                                      n, " bytes, file has ", got));
  }
  return absl::OkStatus();
}

SequentialReader::SequentialReader(const RandomAccessFile* file, uint64_t offset,
                                   size_t buffer_size)
    : file_(file),
      // No bigger than what is left of the file: small files get small buffers.
      buffer_(offset < file->size() ? std::min<uint64_t>(buffer_size, file->size() - offset) : 0,
              '\0'),
      buffer_start_(offset),
      offset_(offset) {}

Status SequentialReader::Read(size_t n, std::string_view* out, std::string_view what) {
  if (n > remaining()) {
    return absl::DataLossError(StrCat(file_->path(), ": offset ", offset_, ": truncated ", what,
                                      ": needs ", n, " bytes, file has ", remaining()));
  }
  uint64_t in_buffer_pos = offset_ - buffer_start_;
  if (offset_ < buffer_start_ || in_buffer_pos + n > buffer_len_) {
    // Refill so that [offset_, offset_ + n) is in the buffer.
    if (n > buffer_.size()) buffer_.resize(n);
    size_t got = 0;
    EDL_RETURN_IF_ERROR(file_->Read(offset_, buffer_.size(), buffer_.data(), &got));
    buffer_start_ = offset_;
    buffer_len_ = got;
    in_buffer_pos = 0;
    if (got < n) {
      return absl::DataLossError(
          StrCat(file_->path(), ": offset ", offset_, ": file shrank while reading ", what));
    }
  }
  *out = std::string_view(buffer_.data() + in_buffer_pos, n);
  offset_ += n;
  return absl::OkStatus();
}

Status SequentialReader::Skip(uint64_t n, std::string_view what) {
  if (n > remaining()) {
    return absl::DataLossError(StrCat(file_->path(), ": offset ", offset_, ": truncated ", what,
                                      ": needs ", n, " bytes, file has ", remaining()));
  }
  offset_ += n;
  return absl::OkStatus();
}

WritableFile::WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  buffer_.reserve(kWriteBufferSize);
}

WritableFile::~WritableFile() {
  if (fd_ >= 0) Close().IgnoreError();
}

StatusOr<std::unique_ptr<WritableFile>> WritableFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(path, "cannot create", errno);
  return std::unique_ptr<WritableFile>(new WritableFile(path, fd));
}

Status WritableFile::FlushBuffer() {
  EDL_RETURN_IF_ERROR(WriteAll(fd_, buffer_, path_));
  buffer_.clear();
  return absl::OkStatus();
}

Status WritableFile::Append(std::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(StrCat(path_, ": write after close"));
  bytes_written_ += data.size();
  if (buffer_.size() + data.size() > kWriteBufferSize) {
    EDL_RETURN_IF_ERROR(FlushBuffer());
    if (data.size() > kWriteBufferSize) {
      buffer_.assign(data.data(), data.size());
      Status s = FlushBuffer();
      buffer_.reserve(kWriteBufferSize);
      return s;
    }
  }
  buffer_.append(data.data(), data.size());
  return absl::OkStatus();
}

Status WritableFile::Close() {
  if (fd_ < 0) return absl::OkStatus();
  Status s = FlushBuffer();
  if (::close(fd_) != 0 && s.ok()) s = ErrnoStatus(path_, "close", errno);
  fd_ = -1;
  return s;
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  std::string data(file->size(), '\0');
  EDL_RETURN_IF_ERROR(file->ReadExactly(0, data.size(), data.data(), "file"));
  return data;
}

Status ErrnoToStatus(int err, std::string_view context) {
  std::string message = StrCat(context, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    case ENOSPC:
    case EDQUOT:
    case EAGAIN:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, "write failed", errno);
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

Status SyncFile(const std::string& path) { return Fsync(path, 0); }

Status SyncDirectory(const std::string& dir) { return Fsync(dir, O_DIRECTORY); }

Status SyncTree(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_regular_file(st)) EDL_RETURN_IF_ERROR(SyncFile(it->path().string()));
    if (fs::is_directory(st)) EDL_RETURN_IF_ERROR(SyncDirectory(it->path().string()));
  }
  if (ec) return absl::InternalError(StrCat(dir, ": ", ec.message()));
  return SyncDirectory(dir);
}

Status ReplaceDirectory(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(to, ec);
  if (!exists) {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus(errno, StrCat("renaming ", from, " to ", to));
    }
  } else {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
      return ErrnoToStatus(errno, StrCat("exchanging ", from, " and ", to));
    }
  }
  const std::string parent = fs::path(to).parent_path().string();
  EDL_RETURN_IF_ERROR(SyncDirectory(parent.empty() ? "." : parent));
  if (exists) {
    fs::remove_all(from, ec);  // the old contents, now under `from`
    if (ec) return absl::InternalError(StrCat("removing ", from, ": ", ec.message()));
  }
  return absl::OkStatus();
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  // A name no other writer uses: this process's, numbered; O_EXCL turns a
  // clash (another host's process on shared storage) into another try.
  static std::atomic<uint64_t> serial{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = StrCat(path, ".tmp.", ::getpid(), ".", serial++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) {
      return ErrnoStatus(tmp, "cannot create", errno);
    }
  }
  Status written = WriteAll(fd, contents, tmp);
  if (written.ok() && ::fsync(fd) != 0) written = ErrnoStatus(tmp, "fsync failed", errno);
  if (::close(fd) != 0 && written.ok()) written = ErrnoStatus(tmp, "close failed", errno);
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    written = ErrnoStatus(path, StrCat("rename from ", tmp, " failed"), errno);
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncDirectory(dir.empty() ? "." : dir);
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

Status CreateDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::InternalError(StrCat(path, ": cannot create directory: ", ec.message()));
  }
  return absl::OkStatus();
}

Status CreatePrivateDirectory(const std::string& path, bool exclusive) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (!parent.empty()) EDL_RETURN_IF_ERROR(CreateDirectories(parent));
  if (::mkdir(path.c_str(), 0700) == 0) {
    // The mode, whatever the umask.
    if (::chmod(path.c_str(), 0700) != 0) return ErrnoStatus(path, "chmod", errno);
    return absl::OkStatus();
  }
  if (errno != EEXIST) return ErrnoStatus(path, "cannot create directory", errno);
  if (exclusive) return absl::AlreadyExistsError(StrCat(path, ": exists already"));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(path, "stat", errno);
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(
        StrCat(path, ": not a directory", S_ISLNK(st.st_mode) ? " (a symbolic link)" : ""));
  }
  if (st.st_uid != ::getuid()) {
    return absl::PermissionDeniedError(
        StrCat(path, ": owned by uid ", st.st_uid, ", not by this user (uid ", ::getuid(), ")"));
  }
  return absl::OkStatus();
}

Status CheckPrivateDirectory(const std::string& path, bool follow_link) {
  struct stat st {};
  if ((follow_link ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(StrCat(path, ": no such directory"));
    return ErrnoStatus(path, "stat", err);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(StrCat(path, ": not a directory",
                                              S_ISLNK(st.st_mode) ? " (a symbolic link)" : "",
                                              "; expected a directory of this user's"));
  }
  const unsigned mode = st.st_mode & 07777;
  const bool theirs = st.st_uid != ::getuid();
  if (theirs || (mode & (S_IWGRP | S_IWOTH)) != 0) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    return absl::PermissionDeniedError(StrCat(
        path, ": owned by uid ", st.st_uid,
        theirs ? ", not by this user (uid " : " (this user, uid ", ::getuid(), "), mode ", octal,
        "; expected a directory of this user's that its group and others cannot write "
        "(chmod go-w), so that no other user can put files in it"));
  }
  return absl::OkStatus();
}

Status UsePrivateDirectories(const std::string& root, const std::string& below) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    EDL_RETURN_IF_ERROR(CreatePrivateDirectory(root, /*exclusive=*/false));
  }
  EDL_RETURN_IF_ERROR(CheckPrivateDirectory(root, /*follow_link=*/true));
  std::filesystem::path dir = root;
  for (const std::filesystem::path& name : std::filesystem::path(below)) {
    if (name.empty() || name == ".") continue;
    if (name == "..") return absl::InvalidArgumentError(StrCat(below, ": leaves ", root));
    dir /= name;
    EDL_RETURN_IF_ERROR(CreatePrivateDirectory(dir.string(), /*exclusive=*/false));
    EDL_RETURN_IF_ERROR(CheckPrivateDirectory(dir.string()));
  }
  return absl::OkStatus();
}

std::string ElasticdlBinary() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  if (exe.filename() == kElasticdlTorchBinaryName) {
    std::filesystem::path front = exe.parent_path() / kElasticdlBinaryName;
    if (std::filesystem::exists(front, ec)) return front.string();
  }
  return exe.string();
}

std::string InstalledShareDir(std::string_view name) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (exe.parent_path().parent_path() / "share" / "elasticdl" / name).string();
}

}  // namespace elasticdl
