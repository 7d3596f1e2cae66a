#include "data/process_map.h"

#include <ATen/Parallel.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace elasticdl {
namespace {

// The wire between the parent and a child: frames of a uint64 length and
// that many bytes, in host byte order (both ends are the same program).
//   request:  uint64 position, uint64 record index, uint32 file name size,
//             file name, record bytes
//   response: uint8 1, example | uint8 0, int32 status code, message
//   example:  uint32 features, each (uint32 name size, name, tensor); labels
//   tensor:   uint8 defined; if so int32 scalar type, uint32 dims,
//             int64 sizes[dims], uint64 bytes, the values
template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* value) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(value, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool Bytes(uint64_t n, std::string_view* out) {
    if (in_.size() < n) return false;
    *out = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  std::string_view rest() const { return in_; }

 private:
  std::string_view in_;
};

std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

Status PutTensor(std::string* out, const std::string& what, const torch::Tensor& tensor) {
  Put<uint8_t>(out, tensor.defined() ? 1 : 0);
  if (!tensor.defined()) return Status();
  if (tensor.layout() != torch::kStrided || tensor.is_quantized()) {
    return absl::InvalidArgumentError(
        StrCat(what, " is a ", tensor.is_quantized() ? "quantized" : "sparse",
               " tensor; examples made in data loader processes hold dense tensors"));
  }
  torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  Put<int32_t>(out, static_cast<int32_t>(t.scalar_type()));
  Put<uint32_t>(out, static_cast<uint32_t>(t.dim()));
  for (int64_t size : t.sizes()) Put<int64_t>(out, size);
  const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
  Put<uint64_t>(out, bytes);
  out->append(static_cast<const char*>(t.data_ptr()), bytes);
  return Status();
}

StatusOr<torch::Tensor> GetTensor(Reader& in) {
  const Status truncated = absl::InternalError("truncated tensor from a data loader process");
  uint8_t defined = 0;
  if (!in.Get(&defined)) return truncated;
  if (defined == 0) return torch::Tensor();
  int32_t type = 0;
  uint32_t dims = 0;
  if (!in.Get(&type) || !in.Get(&dims)) return truncated;
  if (type < 0 || type >= static_cast<int32_t>(c10::ScalarType::NumOptions) || dims > 64) {
    return absl::InternalError("malformed tensor from a data loader process");
  }
  std::vector<int64_t> sizes(dims);
  for (int64_t& size : sizes) {
    if (!in.Get(&size)) return truncated;
  }
  uint64_t bytes = 0;
  std::string_view values;
  if (!in.Get(&bytes) || !in.Bytes(bytes, &values)) return truncated;
  try {
    torch::Tensor t =
        torch::empty(sizes, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(type)));
    if (static_cast<uint64_t>(t.numel()) * t.element_size() != bytes) {
      return absl::InternalError("tensor from a data loader process: size mismatch");
    }
    std::memcpy(t.data_ptr(), values.data(), bytes);
    return t;
  } catch (const std::exception& e) {
    return absl::InternalError(StrCat("tensor from a data loader process: ", e.what()));
  }
}

StatusOr<std::string> EncodeExample(const Example& example) {
  std::string out;
  Put<uint8_t>(&out, 1);
  Put<uint32_t>(&out, static_cast<uint32_t>(example.features.size()));
  for (const auto& [name, tensor] : example.features) {
    Put<uint32_t>(&out, static_cast<uint32_t>(name.size()));
    out += name;
    EDL_RETURN_IF_ERROR(PutTensor(&out, StrCat("feature '", name, "'"), tensor));
  }
  EDL_RETURN_IF_ERROR(PutTensor(&out, "the labels", example.labels));
  return out;
}

std::string EncodeStatus(const Status& status) {
  std::string out;
  Put<uint8_t>(&out, 0);
  Put<int32_t>(&out, static_cast<int32_t>(status.code()));
  out.append(status.message().data(), status.message().size());
  return out;
}

StatusOr<Example> DecodeResponse(std::string_view payload) {
  Reader in(payload);
  uint8_t ok = 0;
  if (!in.Get(&ok)) return absl::InternalError("empty response from a data loader process");
  if (ok == 0) {
    int32_t code = 0;
    if (!in.Get(&code)) return absl::InternalError("truncated error from a data loader process");
    const std::string_view message = in.rest();
    return Status(static_cast<absl::StatusCode>(code),
                  absl::string_view(message.data(), message.size()));
  }
  uint32_t count = 0;
  if (!in.Get(&count)) return absl::InternalError("truncated example from a data loader process");
  Example example;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t size = 0;
    std::string_view name;
    if (!in.Get(&size) || !in.Bytes(size, &name)) {
      return absl::InternalError("truncated example from a data loader process");
    }
    EDL_ASSIGN_OR_RETURN(example.features[std::string(name)], GetTensor(in));
  }
  EDL_ASSIGN_OR_RETURN(example.labels, GetTensor(in));
  return example;
}

// --- the child --------------------------------------------------------------

bool ReadFull(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

bool WriteFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

// Closes every descriptor but the standard streams and `keep`.
void CloseInheritedDescriptors(int keep) {
  auto close_between = [](unsigned lo, unsigned hi) {
    return lo > hi || ::close_range(lo, hi, 0) == 0;
  };
  const auto k = static_cast<unsigned>(keep);
  const bool closed =
      keep < 3 ? close_between(3, ~0U) : close_between(3, k - 1) && close_between(k + 1, ~0U);
  if (closed) return;
  // Kernels without close_range: what /proc lists.
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != keep && fd != ::dirfd(dir)) open.push_back(fd);
    }
    ::closedir(dir);
  }
  for (int fd : open) ::close(fd);
}

// What the child answers to one request.
std::string Respond(std::string_view frame, const ProcessMapFn& fn) {
  Reader in(frame);
  uint64_t position = 0;
  uint32_t file_size = 0;
  std::string_view file;
  Record record;
  if (!in.Get(&position) || !in.Get(&record.index) || !in.Get(&file_size) ||
      !in.Bytes(file_size, &file)) {
    return EncodeStatus(absl::InternalError("malformed request to a data loader process"));
  }
  if (!file.empty()) record.file = std::make_shared<const std::string>(file);
  record.data = std::string(in.rest());
  const std::vector<RecordOrigin> origins = internal::OriginsOf(record);
  StatusOr<Example> example = absl::InternalError("no result");
  try {
    example = fn(std::move(record), position);
  } catch (const std::exception& e) {
    example =
        absl::InvalidArgumentError(StrCat("element ", position, ": function threw: ", e.what()));
  } catch (...) {
    example = absl::InvalidArgumentError(
        StrCat("element ", position, ": function threw a non-standard exception"));
  }
  if (!example.ok()) return EncodeStatus(example.status());
  StatusOr<std::string> encoded = EncodeExample(*example);
  if (!encoded.ok()) {
    return EncodeStatus(Annotate(encoded.status(), internal::DescribeOrigin(origins)));
  }
  return std::move(*encoded);
}

// The child's life: requests in, responses out, until the parent closes
// the socket (or dies).
[[noreturn]] void RunChild(int fd, const ProcessMapFn& fn) {
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
  // The child ends with its parent: when the socket closes, or by the
  // parent's SIGKILL. A SIGTERM to the process group (a preempted worker
  // finishing its minibatch) must not take the examples away first.
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP}) std::signal(s, SIG_IGN);
  CloseInheritedDescriptors(fd);
  try {
    // The parent's intra-op threads do not exist here: stay on this one.
    at::set_num_threads(1);
    std::string frame;
    std::string response;
    while (true) {
      uint64_t size = 0;
      if (!ReadFull(fd, reinterpret_cast<char*>(&size), sizeof size)) break;
      frame.resize(size);
      if (!ReadFull(fd, frame.data(), size)) break;
      response.clear();
      Put<uint64_t>(&response, 0);
      response += Respond(frame, fn);
      const uint64_t payload = response.size() - sizeof(uint64_t);
      std::memcpy(response.data(), &payload, sizeof payload);
      if (!WriteFull(fd, response.data(), response.size())) break;
    }
  } catch (...) {
    ::_exit(1);
  }
  ::_exit(0);
}

// --- the parent -------------------------------------------------------------

class ProcessMapSource final : public internal::Source<Example> {
 public:
  ProcessMapSource(std::shared_ptr<internal::Source<Record>> input, ProcessMapFn fn,
                   ProcessMapOptions options)
      : input_(std::move(input)),
        fn_(std::move(fn)),
        processes_(std::max<size_t>(options.processes, 1)),
        max_queue_size_(std::max<size_t>(options.max_queue_size, 1)) {}

  ~ProcessMapSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    Wake();
    if (io_.joinable()) io_.join();
    for (Child& c : children_) {
      if (c.fd >= 0) ::close(c.fd);
      Reap(c);
    }
    for (int fd : {wake_read_, wake_write_}) {
      if (fd >= 0) ::close(fd);
    }
  }

  ProcessMapSource(const ProcessMapSource&) = delete;
  ProcessMapSource& operator=(const ProcessMapSource&) = delete;

  StatusOr<std::optional<Example>> Next() override {
    if (finished_) return std::optional<Example>();
    if (!started_) {
      started_ = true;
      Status started = Start();
      if (!started.ok()) {
        finished_ = true;
        return started;
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] {
      return done_.count(next_out_) > 0 || (input_exhausted_ && next_out_ >= next_in_);
    });
    auto it = done_.find(next_out_);
    if (it == done_.end()) {
      finished_ = true;
      return std::optional<Example>();
    }
    StatusOr<std::optional<Example>> result = std::move(it->second);
    done_.erase(it);
    ++next_out_;
    if (!result.ok()) finished_ = true;  // the stream ends at an error
    lock.unlock();
    Wake();  // the queue has room again
    return result;
  }

 private:
  struct Child {
    pid_t pid = -1;
    int fd = -1;                   // the parent's end of the socket, non-blocking
    std::string out;               // request frames not yet sent
    size_t sent = 0;               // bytes of `out` already sent
    std::string in;                // received bytes not yet a whole frame
    std::deque<uint64_t> pending;  // sequence numbers sent, unanswered, in order
    bool dead = false;
    Status death;  // how it ended, once dead
  };

  // Forks the children and starts the I/O thread.
  Status Start() {
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      return absl::ResourceExhaustedError(StrCat("data loader: pipe: ", ErrnoText(errno)));
    }
    wake_read_ = wake[0];
    wake_write_ = wake[1];
    for (size_t i = 0; i < processes_; ++i) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return absl::ResourceExhaustedError(StrCat("data loader: socketpair: ", ErrnoText(errno)));
      }
      const pid_t pid = ::fork();
      if (pid == 0) RunChild(sv[1], fn_);
      const int error = errno;
      ::close(sv[1]);
      if (pid < 0) {
        ::close(sv[0]);
        return absl::ResourceExhaustedError(StrCat("cannot start data loader process ", i + 1,
                                                   " of ", processes_,
                                                   ": fork: ", ErrnoText(error)));
      }
      ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
      Child c;
      c.pid = pid;
      c.fd = sv[0];
      children_.push_back(std::move(c));
    }
    io_ = std::thread([this] { Run(); });
    return Status();
  }

  void Run() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
      Pull();
      Exchange();
    }
  }

  // Hands records to the children while the queue bound allows.
  void Pull() {
    while (true) {
      uint64_t seq = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_ || input_exhausted_ || next_in_ - next_out_ >= max_queue_size_) return;
        seq = next_in_;
      }
      StatusOr<std::optional<Record>> record = input_->Next();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!record.ok() || !record->has_value()) {
          input_exhausted_ = true;
          if (!record.ok()) {
            done_.emplace(seq, record.status());
            next_in_ = seq + 1;
          }
          cv_.notify_all();
          return;
        }
        next_in_ = seq + 1;
      }
      Child& c = children_[seq % processes_];
      if (c.dead) {
        Fail(seq, c.death);
        return;
      }
      const Record& r = **record;
      origins_[seq] = internal::OriginsOf(r);
      const std::string_view file = r.file != nullptr ? std::string_view(*r.file) : "";
      const uint64_t size = 2 * sizeof(uint64_t) + sizeof(uint32_t) + file.size() + r.data.size();
      Put<uint64_t>(&c.out, size);
      Put<uint64_t>(&c.out, seq);
      Put<uint64_t>(&c.out, r.index);
      Put<uint32_t>(&c.out, static_cast<uint32_t>(file.size()));
      c.out.append(file.data(), file.size());
      c.out += r.data;
      c.pending.push_back(seq);
    }
  }

  // One round of poll: sends what the children can take, reads what they
  // answered, and returns when either happened or the consumer woke it.
  void Exchange() {
    std::vector<pollfd> fds;
    std::vector<Child*> polled;
    fds.push_back({wake_read_, POLLIN, 0});
    for (Child& c : children_) {
      if (c.dead) continue;
      const short events = c.sent < c.out.size() ? (POLLIN | POLLOUT) : POLLIN;
      fds.push_back({c.fd, events, 0});
      polled.push_back(&c);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) return;  // EINTR: the caller polls again
    if (fds[0].revents != 0) {
      char drain[64];
      while (::read(wake_read_, drain, sizeof drain) > 0) {
      }
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      Child& c = *polled[i];
      const short revents = fds[i + 1].revents;
      if ((revents & POLLOUT) != 0) Send(c);
      if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) Receive(c);
    }
  }

  void Send(Child& c) {
    const ssize_t w =
        ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.sent += static_cast<size_t>(w);
      if (c.sent == c.out.size()) {
        c.out.clear();
        c.sent = 0;
      }
    } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      // The child is gone: Receive sees the end of its stream.
      c.out.clear();
      c.sent = 0;
    }
  }

  void Receive(Child& c) {
    char buffer[1 << 16];
    while (true) {
      const ssize_t r = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (r > 0) {
        c.in.append(buffer, static_cast<size_t>(r));
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      Answers(c);
      Died(c);  // end of stream or an error: the child is gone
      return;
    }
    Answers(c);
  }

  // Delivers the whole frames `c` has sent.
  void Answers(Child& c) {
    size_t at = 0;
    while (c.in.size() - at >= sizeof(uint64_t)) {
      uint64_t size = 0;
      std::memcpy(&size, c.in.data() + at, sizeof size);
      if (c.in.size() - at - sizeof size < size) break;
      const std::string_view payload(c.in.data() + at + sizeof size, size);
      at += sizeof size + size;
      if (c.pending.empty()) continue;  // not asked for: ignore
      const uint64_t seq = c.pending.front();
      c.pending.pop_front();
      StatusOr<Example> example = DecodeResponse(payload);
      auto origins = origins_.find(seq);
      if (example.ok()) example->origins = std::move(origins->second);
      origins_.erase(origins);
      std::lock_guard<std::mutex> lock(mu_);
      if (example.ok()) {
        done_.emplace(seq, std::optional<Example>(std::move(*example)));
      } else {
        done_.emplace(seq, example.status());
      }
      cv_.notify_all();
    }
    c.in.erase(0, at);
  }

  // `c` is gone: its first unanswered element (or, if none, the next one of
  // the stream) is the error, and nothing more is read.
  void Died(Child& c) {
    if (c.dead) return;
    c.death = ChildDied(c);
    if (!c.pending.empty()) {
      Fail(c.pending.front(), c.death);
      return;
    }
    uint64_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (input_exhausted_) return;  // nothing more was to come
      seq = next_in_++;
    }
    Fail(seq, c.death);
  }

  // The element `seq` is `status`, and the stream ends there.
  void Fail(uint64_t seq, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    done_.emplace(seq, std::move(status));
    input_exhausted_ = true;
    cv_.notify_all();
  }

  // Marks `c` dead and reaps it: INTERNAL saying how it ended.
  Status ChildDied(Child& c) {
    c.dead = true;
    const pid_t pid = c.pid;
    const int wstatus = Reap(c);
    const size_t index = static_cast<size_t>(&c - children_.data()) + 1;
    std::string how = "ended";
    if (WIFSIGNALED(wstatus)) {
      how = StrCat("was killed by signal ", WTERMSIG(wstatus), " (", ::strsignal(WTERMSIG(wstatus)),
                   ")");
    } else if (WIFEXITED(wstatus)) {
      how = StrCat("exited with status ", WEXITSTATUS(wstatus));
    }
    return absl::InternalError(StrCat("data loader process ", pid, " (", index, " of ", processes_,
                                      ") ", how, " while preparing examples"));
  }

  // Kills `c` if still running and waits for it; its wait status.
  static int Reap(Child& c) {
    int wstatus = 0;
    if (c.pid <= 0) return wstatus;
    // A child that has ended keeps its status: the kill does not change it.
    ::kill(c.pid, SIGKILL);
    while (::waitpid(c.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    c.pid = -1;
    return wstatus;
  }

  void Wake() {
    if (wake_write_ < 0) return;
    const char byte = 1;
    // A full pipe already wakes the thread.
    [[maybe_unused]] ssize_t ignored = ::write(wake_write_, &byte, 1);
  }

  std::shared_ptr<internal::Source<Record>> input_;
  ProcessMapFn fn_;
  const size_t processes_;
  const size_t max_queue_size_;
  // Consumer's.
  bool started_ = false;
  bool finished_ = false;
  // The I/O thread's once started.
  std::vector<Child> children_;
  std::map<uint64_t, std::vector<RecordOrigin>> origins_;
  int wake_read_ = -1;  // the consumer wakes the I/O thread through this pipe
  int wake_write_ = -1;
  std::thread io_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<uint64_t, StatusOr<std::optional<Example>>> done_;
  uint64_t next_in_ = 0;   // sequence number of the next record handed out
  uint64_t next_out_ = 0;  // sequence number of the next result returned
  bool input_exhausted_ = false;
  bool stopping_ = false;
};

}  // namespace

std::shared_ptr<internal::Source<Example>> MakeProcessMapSource(
    std::shared_ptr<internal::Source<Record>> input, ProcessMapFn fn, ProcessMapOptions options) {
  return std::make_shared<ProcessMapSource>(std::move(input), std::move(fn), options);
}

}  // namespace elasticdl
