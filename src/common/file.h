// Files as the data layer sees them: positional reads and appending writes,
// with every failure a Status that names the path.
#ifndef ELASTICDL_COMMON_FILE_H_
#define ELASTICDL_COMMON_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl {

// A read-only file for positional reads: a file on disk, or bytes in memory
// (for tests and fuzzers). Thread-safe: Read() may be called from several
// threads at once.
class RandomAccessFile {
 public:
  // Opens a file on disk.
  static StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  // Serves `contents` as if it were a file called `name`.
  static std::unique_ptr<RandomAccessFile> FromString(std::string name, std::string contents);

  virtual ~RandomAccessFile() = default;

  // Reads up to `n` bytes at `offset` into `scratch`; `*bytes_read` may be
  // less than `n` only at the end of the file.
  virtual Status Read(uint64_t offset, size_t n, char* scratch, size_t* bytes_read) const = 0;
  // Reads exactly `n` bytes at `offset`, or fails with DATA_LOSS naming what
  // the caller was reading (`what`) when the file ends first.
  Status ReadExactly(uint64_t offset, size_t n, char* scratch, std::string_view what) const;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 protected:
  RandomAccessFile(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {}

 private:
  std::string path_;
  uint64_t size_;
};

// Sequential reads over a RandomAccessFile through a buffer, for formats
// whose framing is only known by walking it (TFRecord, IDX, CSV).
// Not thread-safe.
class SequentialReader {
 public:
  explicit SequentialReader(const RandomAccessFile* file, uint64_t offset = 0,
                            size_t buffer_size = 1 << 20);

  // Makes the next `n` bytes available as `*out` (valid until the next call)
  // and advances past them. Fails with DATA_LOSS naming `what` if the file
  // ends first.
  Status Read(size_t n, std::string_view* out, std::string_view what);
  // Advances `n` bytes without returning them.
  Status Skip(uint64_t n, std::string_view what);
  // Position of the next byte to be read.
  uint64_t offset() const { return offset_; }
  bool AtEnd() const { return offset_ >= file_->size(); }
  uint64_t remaining() const { return AtEnd() ? 0 : file_->size() - offset_; }

 private:
  const RandomAccessFile* file_;
  std::string buffer_;
  uint64_t buffer_start_ = 0;  // file offset of buffer_[0]
  size_t buffer_len_ = 0;      // valid bytes in buffer_
  uint64_t offset_;
};

// A file opened for writing from its start (truncating). Buffered; Close()
// flushes and reports any deferred error. Not thread-safe.
class WritableFile {
 public:
  static StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path);
  ~WritableFile();
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  Status Append(std::string_view data);
  Status Close();
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  WritableFile(std::string path, int fd);
  Status FlushBuffer();
  std::string path_;
  int fd_;
  std::string buffer_;
  uint64_t bytes_written_ = 0;
};

// Reads a whole (small) file into memory.
StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates `path` and any missing parents; OK if it already exists.
Status CreateDirectories(const std::string& path);

// Creates directory `path` for this user alone (mode 0700; its missing
// parents as CreateDirectories does). An existing one is refused when
// `exclusive` (ALREADY_EXISTS), and otherwise accepted only if it is a
// directory of this user's, not a symbolic link (PERMISSION_DENIED naming its
// owner): a job's secrets never go where another user can read or swap them.
Status CreatePrivateDirectory(const std::string& path, bool exclusive);

// OK if `path` is a directory of this user's that no other user may write
// into: owned by this user, without write permission for its group or
// others, and (unless `follow_link`) not a symbolic link. Else
// PERMISSION_DENIED naming the directory, its owner and mode, and what is
// expected; NOT_FOUND if it does not exist. What is found in such a
// directory was put there by this user (or root).
Status CheckPrivateDirectory(const std::string& path, bool follow_link = false);

// `root` and each directory of `below` (a relative path, "zoo/objects")
// under it, as CheckPrivateDirectory accepts them, each created (mode 0700)
// where it is missing: the root's missing parents as CreateDirectories
// makes them; the root may be a link to such a directory, the directories
// below it may not.
Status UsePrivateDirectories(const std::string& root, const std::string& below = "");

// Publishes `contents` at `path`, atomically and durably: written to a
// temporary file of this call's own beside it, fsynced, renamed over `path`,
// and the directory fsynced. Readers see the old contents or the new, never
// a part, also after a crash or a power cut; concurrent writers of one path
// (a task handed out twice) each publish whole contents, the last rename
// winning. The temporary file is removed when anything fails.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Writes all of `data` to `fd`, through short writes and EINTR; errors name
// `path`.
Status WriteAll(int fd, std::string_view data, const std::string& path);

// Makes the contents of file `path` durable.
Status SyncFile(const std::string& path);

// Makes the entries of directory `dir` (a file created or renamed in it)
// durable.
Status SyncDirectory(const std::string& dir);

// Makes every file and directory under `dir` (and dir itself) durable.
Status SyncTree(const std::string& dir);

// Puts directory `from` in the place of `to` in one step: renamed there
// when `to` does not exist; else the two are exchanged (renameat2
// RENAME_EXCHANGE) and what was `to` is removed from `from`'s name. `to`'s
// parent is synced after. A crash leaves `to` old or new, never a mix.
Status ReplaceDirectory(const std::string& from, const std::string& to);

// `path` made absolute against the working directory and normalised; an
// empty path stays empty.
std::string AbsolutePath(const std::string& path);

// <directory of the running binary>/../share/elasticdl/<name>: where files
// installed beside the binary lie, in the build tree and installed alike.
// Empty when the binary's path cannot be read.
std::string InstalledShareDir(std::string_view name);

// The executables. `elasticdl` does itself what needs no LibTorch (a job's
// master, data and job-control commands, the dashboard) and execs
// `elasticdl-torch`, installed beside it, for the commands that run models:
// a process that links LibTorch spends half a second of CPU loading it.
inline constexpr char kElasticdlBinaryName[] = "elasticdl";
inline constexpr char kElasticdlTorchBinaryName[] = "elasticdl-torch";

// The `elasticdl` to start a job's processes with: the running executable,
// or the `elasticdl` beside it when the running one is elasticdl-torch.
// Empty when the running executable's path cannot be read.
std::string ElasticdlBinary();

// A status for a failed system call: "context: strerror(err)", with the code
// that matches `err` (NOT_FOUND for ENOENT, PERMISSION_DENIED for EACCES,
// RESOURCE_EXHAUSTED for ENOSPC or EMFILE, ...; INTERNAL otherwise).
Status ErrnoToStatus(int err, std::string_view context);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_FILE_H_
