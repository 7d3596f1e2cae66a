#include "rpc/shared_tensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/strings.h"
#include "rpc/tensor_bytes.h"

namespace elasticdl::rpc {
namespace {

// "elasticdl-tensors-<uid>-<pid>-<serial>-<random>": the creator's pid lets a
// later worker remove what a dead one left; the random part keeps names of
// one pid apart across reboots and containers.
constexpr char kPrefix[] = "elasticdl-tensors-";
constexpr uint64_t kMagic = 0x53524f534e455445;  // "ETENSORS"
constexpr size_t kHeaderBytes = 512;
constexpr size_t kAlignment = 64;
// The call area: the request's bytes, then the answer's.
constexpr size_t kCallAreaBytes = 2 * SharedTensorRegion::kCallBytes;
// Header::calls: the number of calls taken (modulo 2^31), and whether calls
// are refused (no thread serves them).
constexpr uint32_t kCallCount = 0x7fffffff;
constexpr uint32_t kCallsRefused = 0x80000000;
// How often a caller waiting for an answer looks whether the server's
// process is still there.
constexpr std::chrono::milliseconds kServerCheck(50);

size_t Aligned(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

std::string Errno(const std::string& what) { return StrCat(what, ": ", std::strerror(errno)); }

bool IsRegionName(const std::string& name) {
  if (name.size() <= sizeof kPrefix - 1 || name.size() > 128 || name.rfind(kPrefix, 0) != 0) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// The futex word of `word` (shared: the region is mapped by two processes).
long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, std::chrono::nanoseconds timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  timespec t{};
  t.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  t.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                   op == FUTEX_WAIT ? &t : nullptr, nullptr, 0);
}
void Wake(std::atomic<uint32_t>* word) { Futex(word, FUTEX_WAKE, 1, {}); }
// Returns when `word` may no longer hold `seen`, or after `timeout`.
void WaitWhile(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds timeout) {
  Futex(word, FUTEX_WAIT, seen, timeout);
}

// The pid namespace this process sees pids in (0 when unknown): a server's
// pid is looked up only from the same one.
uint64_t PidNamespace() {
  static const uint64_t ns = [] {
    struct stat st {};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }();
  return ns;
}

// Removes the regions in `dir` that this user's processes which are gone
// made (a worker killed before its server mapped its region).
void RemoveOrphans(const std::string& dir) {
  const std::string mine = StrCat(kPrefix, ::getuid(), "-");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(mine, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + mine.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      ::unlink(StrCat(dir, "/", name).c_str());
    }
  }
  ::closedir(d);
}

}  // namespace

struct SharedTensorRegion::Header {
  uint64_t magic;
  uint64_t area_bytes;
  alignas(64) std::atomic<uint64_t> push_sequence;
  alignas(64) std::atomic<uint64_t> values_sequence;
  // Calls through the region: the caller's word (kCallCount, kCallsRefused)
  // and the server's (the last call answered).
  alignas(64) std::atomic<uint32_t> calls;
  alignas(64) std::atomic<uint32_t> answered;
  std::atomic<int32_t> server_pid;  // the process that serves the calls; 0: none yet
  uint64_t server_pid_namespace;    // where server_pid names it
  uint32_t request_bytes;
  uint32_t answer_bytes;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

std::string SharedTensorRegion::DefaultDir() {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) return "/dev/shm";
  return "";
}

SharedTensorRegion::SharedTensorRegion(std::string path, std::string name, void* base, size_t size,
                                       bool owner)
    : path_(std::move(path)),
      name_(std::move(name)),
      base_(base),
      size_(size),
      area_bytes_((size - kHeaderBytes - kCallAreaBytes) / 2),
      owner_(owner) {}

SharedTensorRegion::~SharedTensorRegion() {
  ::munmap(base_, size_);
  if (owner_) ::unlink(path_.c_str());  // the server unlinked it, unless it never mapped it
}

StatusOr<std::unique_ptr<SharedTensorRegion>> SharedTensorRegion::Create(const std::string& dir,
                                                                         size_t area_bytes) {
  if (dir.empty()) return absl::FailedPreconditionError("no directory for shared tensors");
  RemoveOrphans(dir);
  static std::atomic<uint64_t> serial{0};
  std::random_device random;
  const std::string name = StrCat(kPrefix, ::getuid(), "-", ::getpid(), "-", serial++, "-",
                                  fmt::format("{:08x}{:08x}", random(), random()));
  const std::string path = StrCat(dir, "/", name);
  area_bytes = (area_bytes + 4095) / 4096 * 4096;
  const size_t size = kHeaderBytes + 2 * area_bytes + kCallAreaBytes;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::FailedPreconditionError(Errno(StrCat("creating ", path)));
  // Reserved now: a full file system fails here, not as SIGBUS on a write.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (reserved != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return absl::ResourceExhaustedError(
        StrCat("reserving ", size, " bytes for ", path, ": ", std::strerror(reserved)));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::unlink(path.c_str());
    return absl::ResourceExhaustedError(Errno(StrCat("mapping ", path)));
  }
  auto region = std::unique_ptr<SharedTensorRegion>(
      new SharedTensorRegion(path, name, base, size, /*owner=*/true));
  Header* h = region->header();
  h->area_bytes = area_bytes;
  h->push_sequence.store(0, std::memory_order_relaxed);
  h->values_sequence.store(0, std::memory_order_relaxed);
  h->calls.store(kCallsRefused, std::memory_order_relaxed);
  h->answered.store(0, std::memory_order_relaxed);
  h->server_pid.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return region;
}

StatusOr<std::unique_ptr<SharedTensorRegion>> SharedTensorRegion::Open(const std::string& dir,
                                                                       const std::string& name) {
  if (dir.empty()) return absl::FailedPreconditionError("this server maps no shared tensors");
  if (!IsRegionName(name)) {
    return absl::FailedPreconditionError(StrCat("'", name, "' does not name a tensor region"));
  }
  const std::string path = StrCat(dir, "/", name);
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError(Errno(StrCat("opening ", path)));
  struct stat st {};
  struct statfs fs {};
  std::string wrong;
  if (::fstat(fd, &st) != 0 || ::fstatfs(fd, &fs) != 0) {
    wrong = Errno("examining it");
  } else if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
    wrong = "not a plain file of this user's alone";
  } else if (fs.f_type != TMPFS_MAGIC) {
    wrong = "not on a memory file system";
  } else if (static_cast<size_t>(st.st_size) < kHeaderBytes + 2 * 4096 + kCallAreaBytes) {
    wrong = StrCat("too small for a region (", st.st_size, " bytes)");
  }
  if (!wrong.empty()) {
    ::close(fd);
    return absl::FailedPreconditionError(StrCat(path, ": ", wrong));
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return absl::FailedPreconditionError(Errno(StrCat("mapping ", path)));
  auto region = std::unique_ptr<SharedTensorRegion>(
      new SharedTensorRegion(path, name, base, size, /*owner=*/false));
  const Header* h = region->header();
  if (h->magic != kMagic || kHeaderBytes + 2 * h->area_bytes + kCallAreaBytes != size) {
    return absl::FailedPreconditionError(StrCat(path, ": not laid out as a tensor region"));
  }
  // Mapped: the file is no longer needed, and none is left behind.
  ::unlink(path.c_str());
  return region;
}

SharedTensorRegion::Header* SharedTensorRegion::header() const {
  static_assert(sizeof(Header) <= kHeaderBytes);
  return static_cast<Header*>(base_);
}

char* SharedTensorRegion::area_of(Area a) const {
  return static_cast<char*>(base_) + kHeaderBytes + (a == Area::kPush ? 0 : area_bytes_);
}

std::atomic<uint64_t>& SharedTensorRegion::sequence_of(Area a) const {
  return a == Area::kPush ? header()->push_sequence : header()->values_sequence;
}

namespace {

// Where the values of tensor `t`, the `k`th written, are: in `held` when it
// names them there, in its content otherwise.
std::string_view ValuesOf(const proto::Tensor& t, size_t k,
                          const SharedTensorRegion::HeldBytes* held) {
  if (held != nullptr && k < held->size() && !(*held)[k].empty()) return (*held)[k];
  return t.content();
}

}  // namespace

size_t SharedTensorRegion::BytesFor(std::initializer_list<const TensorField*> fields,
                                    const HeldBytes* held) {
  size_t n = 0;
  size_t k = 0;
  for (const TensorField* f : fields) {
    for (const proto::Tensor& t : *f) n += Aligned(ValuesOf(t, k++, held).size());
  }
  return n;
}

StatusOr<uint64_t> SharedTensorRegion::Put(Area a, std::initializer_list<TensorField*> fields,
                                           const HeldBytes* held) {
  std::vector<std::pair<const TensorField*, TensorField*>> in_place;
  for (TensorField* f : fields) in_place.emplace_back(f, f);
  return Write(a, in_place, held);
}

StatusOr<uint64_t> SharedTensorRegion::PutCopies(
    Area a, std::initializer_list<std::pair<const TensorField*, TensorField*>> fields) {
  return Write(a, std::vector<std::pair<const TensorField*, TensorField*>>(fields), nullptr);
}

StatusOr<uint64_t> SharedTensorRegion::Write(
    Area a, const std::vector<std::pair<const TensorField*, TensorField*>>& fields,
    const HeldBytes* held) {
  size_t need = 0;
  size_t tensors = 0;
  for (const auto& [from, to] : fields) {
    for (const proto::Tensor& t : *from) need += Aligned(ValuesOf(t, tensors++, held).size());
  }
  if (held != nullptr && held->size() != tensors) {
    return absl::InvalidArgumentError(
        StrCat(held->size(), " views of held bytes for ", tensors, " tensors"));
  }
  if (need > area_bytes_) {
    return absl::ResourceExhaustedError(
        StrCat(need, " bytes of tensors; region ", name_, " holds ", area_bytes_));
  }
  // A seqlock's writer: odd while writing, the next even number after.
  std::atomic<uint64_t>& sequence = sequence_of(a);
  uint64_t s = sequence.load(std::memory_order_relaxed);
  s += s & 1;  // even, whatever a writer that died halfway left
  sequence.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  char* dst = area_of(a);
  size_t offset = 0;
  size_t k = 0;
  for (const auto& [from, to] : fields) {
    const int count = from->size();  // `to` may be `from`
    for (int i = 0; i < count; ++i, ++k) {
      const proto::Tensor& t = from->Get(i);
      const std::string_view bytes = ValuesOf(t, k, held);
      if (!bytes.empty()) std::memcpy(dst + offset, bytes.data(), bytes.size());
      proto::Tensor* described = nullptr;
      if (to == from) {
        described = to->Mutable(i);
        described->clear_content();
      } else {
        described = to->Add();
        described->set_name(t.name());
        described->set_dtype(t.dtype());
        *described->mutable_shape() = t.shape();
      }
      described->set_shared_offset(offset);
      offset += Aligned(bytes.size());
    }
  }
  sequence.store(s + 2, std::memory_order_release);
  return s + 2;
}

Status SharedTensorRegion::Check(Area a, uint64_t expected) const {
  std::atomic_thread_fence(std::memory_order_acquire);
  if (expected % 2 == 0 && sequence_of(a).load(std::memory_order_acquire) == expected) {
    return absl::OkStatus();
  }
  return absl::AbortedError(StrCat("the tensors in region ", name_,
                                   " were overwritten before they were read; send again"));
}

Status SharedTensorRegion::Take(Area a, uint64_t expected,
                                std::initializer_list<TensorField*> fields) const {
  // Every tensor is checked before any is copied.
  std::vector<std::pair<proto::Tensor*, size_t>> shared;
  for (TensorField* f : fields) {
    for (proto::Tensor& t : *f) {
      if (!t.has_shared_offset()) continue;
      const int64_t bytes = ValueBytes(t);
      if (bytes < 0 || !t.content().empty() || t.shared_offset() > area_bytes_ ||
          static_cast<uint64_t>(bytes) > area_bytes_ - t.shared_offset()) {
        return absl::InvalidArgumentError(
            StrCat("tensor '", t.name(), "' does not lie within region ", name_, " (offset ",
                   t.shared_offset(), ", ", bytes, " bytes, ", area_bytes_, " in the area)"));
      }
      shared.emplace_back(&t, static_cast<size_t>(bytes));
    }
  }
  Status at = Check(a, expected);
  const char* src = area_of(a);
  if (at.ok()) {
    for (auto& [t, bytes] : shared) t->mutable_content()->assign(src + t->shared_offset(), bytes);
    at = Check(a, expected);
  }
  for (auto& [t, bytes] : shared) {
    if (at.ok()) {
      t->clear_shared_offset();
    } else {
      t->clear_content();  // torn: dropped
    }
  }
  return at;
}

char* SharedTensorRegion::call_area(bool answer) const {
  return static_cast<char*>(base_) + kHeaderBytes + 2 * area_bytes_ + (answer ? kCallBytes : 0);
}

StatusOr<uint32_t> SharedTensorRegion::SendCall(std::string_view request) {
  Header* h = header();
  if (request.size() > kCallBytes) {
    return absl::FailedPreconditionError(
        StrCat("a call of ", request.size(), " bytes; region ", name_, " takes ", kCallBytes));
  }
  uint32_t taken = h->calls.load(std::memory_order_acquire);
  if ((taken & kCallsRefused) == 0) {
    std::memcpy(call_area(false), request.data(), request.size());
    h->request_bytes = static_cast<uint32_t>(request.size());
    const uint32_t call = (taken + 1) & kCallCount;
    // Taken unless the server began refusing calls meanwhile.
    if (h->calls.compare_exchange_strong(taken, call, std::memory_order_release,
                                         std::memory_order_acquire)) {
      Wake(&h->calls);
      return call;
    }
  }
  return absl::FailedPreconditionError(StrCat("no server answers calls through region ", name_));
}

StatusOr<std::string> SharedTensorRegion::AwaitAnswer(
    uint32_t call, std::chrono::steady_clock::time_point deadline) const {
  Header* h = header();
  for (;;) {
    const uint32_t answered = h->answered.load(std::memory_order_acquire);
    if (answered == call) {
      return std::string(call_area(true), std::min<size_t>(h->answer_bytes, kCallBytes));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          StrCat("no answer through region ", name_, " within the call's deadline"));
    }
    const pid_t server = h->server_pid.load(std::memory_order_acquire);
    if (server > 0 && h->server_pid_namespace == PidNamespace() && ::kill(server, 0) != 0 &&
        errno == ESRCH) {
      return absl::UnavailableError(
          StrCat("the process ", server, " that answers calls through region ", name_, " is gone"));
    }
    WaitWhile(&h->answered, answered,
              std::min<std::chrono::nanoseconds>(deadline - now, kServerCheck));
  }
}

void SharedTensorRegion::OpenCalls() {
  Header* h = header();
  h->server_pid_namespace = PidNamespace();
  h->server_pid.store(::getpid(), std::memory_order_release);
  h->calls.fetch_and(kCallCount, std::memory_order_acq_rel);  // taken from now on
}

void SharedTensorRegion::ServeCalls(const std::function<std::string(std::string_view)>& handle,
                                    const std::function<bool()>& stop,
                                    std::chrono::milliseconds poll) {
  Header* h = header();
  OpenCalls();
  uint32_t handled = h->answered.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t taken = h->calls.load(std::memory_order_acquire);
    if (taken != handled) {
      handled = taken;
      const std::string answer = handle(
          std::string_view(call_area(false), std::min<size_t>(h->request_bytes, kCallBytes)));
      const size_t bytes = std::min(answer.size(), kCallBytes);
      std::memcpy(call_area(true), answer.data(), bytes);
      h->answer_bytes = static_cast<uint32_t>(bytes);
      h->answered.store(handled, std::memory_order_release);
      Wake(&h->answered);
      continue;
    }
    if (stop()) {
      // Refuse the calls that follow, unless one was taken meanwhile: that
      // one is answered first.
      uint32_t expected = handled;
      if (h->calls.compare_exchange_strong(expected, handled | kCallsRefused,
                                           std::memory_order_acq_rel)) {
        return;
      }
      continue;
    }
    WaitWhile(&h->calls, taken, poll);
  }
}

StatusOr<std::shared_ptr<SharedTensorRegions::Entry>> SharedTensorRegions::Get(
    const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == name) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().second;
    }
  }
  auto entry = std::make_shared<Entry>();
  EDL_ASSIGN_OR_RETURN(entry->region, SharedTensorRegion::Open(dir_, name));
  entries_.emplace_front(name, entry);
  while (entries_.size() > capacity_) {
    entries_.back().second->dropped = true;
    entries_.pop_back();
  }
  return entry;
}

}  // namespace elasticdl::rpc
