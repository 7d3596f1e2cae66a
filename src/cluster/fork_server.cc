#include "cluster/fork_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/process_start.h"
#include "common/strings.h"

extern char** environ;

namespace elasticdl::cluster {
// The server's messages to the owner (named outside the anonymous namespace:
// ForkServer::Reply holds one).
namespace fork_protocol {

enum class Kind : int32_t {
  kStarted = 1,  // pid
  kFailed = 2,   // value: errno, step: where
  kNoRoom = 3,   // the command line does not fit in the server's
  kExited = 4,   // pid, value: wait(2) status
  kAdopted = 5,  // a spare serves its owner from now on; pid: the spare's
  kRefused = 6,  // a spare refuses its owner; value: a Refusal
};

enum class Step : int32_t { kRequest = 1, kFork = 2, kWorkingDir = 3, kEnvironment = 4 };

// Why a spare refuses to serve an owner.
enum class Refusal : int32_t {
  kRequest = 1,       // not an adoption request
  kProcessGroup = 2,  // cannot join the owner's process group
  kProgram = 3,       // the owner starts another program
  kEnvironment = 4,   // the owner's children have another environment
  kNoRoom = 5,        // its command line is too short to hold the children's
};

// The server's messages, fixed size.
struct Message {
  Kind kind;
  int32_t pid;
  int32_t value;
  Step step;
};

}  // namespace fork_protocol

namespace {

using fork_protocol::Kind;
using fork_protocol::Message;
using fork_protocol::Refusal;
using fork_protocol::Step;

// Requests travel as one SOCK_SEQPACKET message: NUL-terminated strings
// (argv and environment strings cannot hold a NUL) after a version.
constexpr std::string_view kProtocol = "edl-fork-1";
// An owner's first message to a spare: this, the program its children run,
// its process group, the bytes of command line its children need, then their
// environment; with their stdout and stderr (SCM_RIGHTS).
constexpr std::string_view kAdoptProtocol = "edl-fork-adopt-1";
// How long an owner waits for a spare's answer to its adoption request.
constexpr auto kAdoptTimeout = std::chrono::seconds(10);
constexpr size_t kMaxRequest = 1 << 20;
// Bytes of the server's argv reserved for its children's command lines.
constexpr size_t kRoom = 512;
// How long Fork() waits for the server's answer. The first waits for the
// server to load its libraries, seconds on a busy machine; past this the
// server is taken for hung.
constexpr auto kReplyTimeout = std::chrono::seconds(60);

struct Request {
  std::string working_dir;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

std::string EncodeRequest(const ProcessSpec& spec) {
  std::string out;
  auto add = [&out](std::string_view s) {
    out.append(s);
    out.push_back('\0');
  };
  add(kProtocol);
  add(spec.working_dir);
  add(std::to_string(spec.argv.size()));
  for (const std::string& arg : spec.argv) add(arg);
  for (const std::string& var : ChildEnvironment(spec)) add(var);
  return out;
}

// NUL-terminated fields; nullopt if the last is unterminated.
std::optional<std::vector<std::string_view>> SplitFields(std::string_view bytes) {
  std::vector<std::string_view> fields;
  while (!bytes.empty()) {
    const size_t end = bytes.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    fields.push_back(bytes.substr(0, end));
    bytes.remove_prefix(end + 1);
  }
  return fields;
}

// A decimal field; nullopt unless it is one, up to `most`.
std::optional<int64_t> Number(std::string_view field, int64_t most) {
  int64_t value = 0;
  for (char c : field) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
    if (value > most) return std::nullopt;
  }
  if (field.empty()) return std::nullopt;
  return value;
}

std::optional<Request> DecodeRequest(std::string_view bytes) {
  std::optional<std::vector<std::string_view>> split = SplitFields(bytes);
  if (!split.has_value()) return std::nullopt;
  const std::vector<std::string_view>& fields = *split;
  if (fields.size() < 3 || fields[0] != kProtocol) return std::nullopt;
  const std::optional<int64_t> count = Number(fields[2], static_cast<int64_t>(fields.size()));
  if (!count.has_value() || *count == 0) return std::nullopt;
  const size_t argc = static_cast<size_t>(*count);
  if (3 + argc > fields.size()) return std::nullopt;
  Request request;
  request.working_dir = std::string(fields[1]);
  for (size_t i = 3; i < fields.size(); ++i) {
    (i < 3 + argc ? request.argv : request.env).emplace_back(fields[i]);
  }
  return request;
}

// The bytes of this process's argv strings, which /proc/<pid>/cmdline (and
// so ps) shows: rewritten with another argv, NUL-separated, the rest zeroed.
class CommandLineArea {
 public:
  CommandLineArea(int argc, char** argv) : begin_(argv[0]) {
    char* end = argv[0] + std::strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; ++i) end += std::strlen(argv[i]) + 1;
    size_ = static_cast<size_t>(end - begin_);
  }

  bool Fits(const std::vector<std::string>& argv) const { return Bytes(argv) <= size_; }

  size_t size() const { return size_; }

  // The bytes `argv` takes here.
  static size_t Bytes(const std::vector<std::string>& argv) {
    size_t need = 0;
    for (const std::string& arg : argv) need += arg.size() + 1;
    return need;
  }

  // Requires Fits(argv).
  void Write(const std::vector<std::string>& argv) const {
    std::memset(begin_, 0, size_);
    char* at = begin_;
    for (const std::string& arg : argv) {
      std::memcpy(at, arg.c_str(), arg.size() + 1);  // with its NUL
      at += arg.size() + 1;
    }
  }

 private:
  char* const begin_;
  size_t size_;
};

size_t ThreadCount() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  size_t count = 0;
  while (const dirent* entry = ::readdir(tasks)) count += entry->d_name[0] != '.';
  ::closedir(tasks);
  return count;
}

void Send(int socket, const Message& message) {
  while (::send(socket, &message, sizeof message, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// The child between the server's fork and the program's main(): takes the
// request's working directory, environment and command line, and closes
// the server's descriptors. Reports a failure on `error_fd` and exits.
[[noreturn]] void RunChild(const Request& request, const CommandLineArea& area,
                           std::initializer_list<int> server_fds, int error_fd,
                           const std::function<int(int, char**)>& main) {
  for (int fd : server_fds) ::close(fd);
  auto fail = [error_fd](Step step) {
    Message error{Kind::kFailed, 0, errno, step};
    ssize_t ignored = ::write(error_fd, &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  };
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!request.working_dir.empty() && ::chdir(request.working_dir.c_str()) != 0) {
    fail(Step::kWorkingDir);
  }
  if (::clearenv() != 0) fail(Step::kEnvironment);
  for (const std::string& var : request.env) {
    // putenv keeps the string: a copy that lives as long as the process.
    if (::putenv(::strdup(var.c_str())) != 0) fail(Step::kEnvironment);
  }
  area.Write(request.argv);
  ::close(error_fd);  // end of file for the server: started
  std::vector<char*> argv;
  argv.reserve(request.argv.size() + 1);
  for (const std::string& arg : request.argv) argv.push_back(::strdup(arg.c_str()));
  argv.push_back(nullptr);
  const int code = main(static_cast<int>(request.argv.size()), argv.data());
  // The server's static destructors and exit handlers are not the child's
  // to run (as a fork()ed child of Python's multiprocessing ends with
  // os._exit): LibTorch's deregister every operator, writing to pages the
  // child shares with the server, and each write copies a page — 0.4 s of
  // CPU a child (bench/process_start_bench.cc).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

// Forks a child for `request`; the message for the owner.
Message ForkChild(const Request& request, const CommandLineArea& area, int socket, int signal_fd,
                  const std::function<int(int, char**)>& main) {
  if (!area.Fits(request.argv)) return Message{Kind::kNoRoom, 0, 0, Step::kRequest};
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) return Message{Kind::kFailed, 0, errno, Step::kFork};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) RunChild(request, area, {socket, signal_fd, error_pipe[0]}, error_pipe[1], main);
  const int fork_errno = errno;
  ::close(error_pipe[1]);
  if (pid < 0) {
    ::close(error_pipe[0]);
    return Message{Kind::kFailed, 0, fork_errno, Step::kFork};
  }
  // What the child reports when it fails before exec; nothing otherwise.
  Message error{Kind::kFailed, 0, 0, Step::kRequest};
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == sizeof error) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return error;
  }
  return Message{Kind::kStarted, pid, 0, Step::kRequest};
}

}  // namespace

struct ForkServer::Reply {
  fork_protocol::Message message;
};

ForkServer::ForkServer(ProcessSpec server, LogSink* sink, int spare_socket)
    : server_spec_(std::move(server)), sink_(sink), spare_socket_(spare_socket) {}

ForkServer::~ForkServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dead_ = true;
    if (socket_ >= 0) ::shutdown(socket_, SHUT_RDWR);
  }
  if (reader_.joinable()) reader_.join();
  if (socket_ >= 0) ::close(socket_);
  if (spare_socket_ >= 0) ::close(spare_socket_);
  // It exits at the end of its socket; killed if it does not.
  if (server_ != nullptr) server_->WaitFor(std::chrono::seconds(1));
}

bool ForkServer::Serves(const ProcessSpec& spec) const {
  const bool direct_output = spec.inherit_output || spec.output_fd >= 0;
  return direct_output && spec.inherit_output == server_spec_.inherit_output &&
         spec.output_fd == server_spec_.output_fd && spec.die_with_parent_signal == 0 &&
         !spec.new_process_group && spec.stdin_fd < 0 && spec.pass_fd < 0 && !spec.argv.empty() &&
         !server_spec_.argv.empty() && spec.argv[0] == server_spec_.argv[0] &&
         spec.env == server_spec_.env;
}

Status ForkServer::StartServerLocked() {
  if (started_) {
    return dead_ ? absl::UnavailableError("the fork server is not running") : absl::OkStatus();
  }
  started_ = true;
  dead_ = true;  // until it runs
  if (spare_socket_ >= 0) {
    const int spare = std::exchange(spare_socket_, -1);
    bool no_room = false;
    const Status adopted = AdoptSpareLocked(spare, &no_room);
    if (adopted.ok()) return absl::OkStatus();
    ::close(spare);
    // A short command line is the common case of a command typed by hand,
    // not worth a line of the job's output.
    if (sink_ != nullptr && !no_room) {
      sink_->Line(server_spec_.label,
                  StrCat("the client's spare server ", adopted.message(), "; starting one"));
    }
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::UnavailableError(StrCat("fork server: socketpair: ", std::strerror(errno)));
  }
  ProcessSpec spec = server_spec_;
  spec.stdin_fd = fds[1];
  // A child's argv must fit in the bytes of the server's (CommandLineArea).
  spec.argv.push_back(std::string(kRoom, ' '));
  StatusOr<std::unique_ptr<Process>> server = Process::Start(spec, sink_);
  ::close(fds[1]);
  if (!server.ok()) {
    ::close(fds[0]);
    if (sink_ != nullptr) {
      sink_->Line(server_spec_.label,
                  StrCat(server.status().message(), "; processes are exec'ed instead"));
    }
    return absl::UnavailableError(server.status().message());
  }
  server_ = *std::move(server);
  socket_ = fds[0];
  dead_ = false;
  reader_ = std::thread([this, socket = socket_] { ReadReplies(socket); });
  return absl::OkStatus();
}

Status ForkServer::AdoptSpareLocked(int socket, bool* no_room) {
  // Where the children write: the spare writes there too from now on.
  int output[2] = {server_spec_.output_fd, server_spec_.output_fd};
  if (server_spec_.output_fd < 0) {
    if (!server_spec_.inherit_output) return absl::UnavailableError("cannot write to pipes");
    output[0] = STDOUT_FILENO;
    output[1] = STDERR_FILENO;
  }
  if (server_spec_.argv.empty() || server_spec_.argv[0].empty() || server_spec_.argv[0][0] != '/') {
    return absl::UnavailableError("is given no program path");
  }
  std::string request;
  auto add = [&request](std::string_view s) {
    request.append(s);
    request.push_back('\0');
  };
  add(kAdoptProtocol);
  add(server_spec_.argv[0]);
  add(std::to_string(::getpgrp()));
  // Its children's command lines are its own with a role's flags (ids, an
  // address, CPUs) in place of "fork-server": a spare whose own is shorter
  // than that would leave them to be exec'ed one by one.
  add(std::to_string(CommandLineArea::Bytes(server_spec_.argv) + kRoom / 4));
  for (const std::string& var : ChildEnvironment(server_spec_)) add(var);
  if (request.size() > kMaxRequest)
    return absl::UnavailableError("cannot take an environment this large");
  iovec io{request.data(), request.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof output)] = {};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  cmsghdr* rights = CMSG_FIRSTHDR(&header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof output);
  std::memcpy(CMSG_DATA(rights), output, sizeof output);
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(StrCat("is gone (", std::strerror(errno), ")"));
  }
  pollfd ready{socket, POLLIN, 0};
  const int timeout_ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(kAdoptTimeout).count());
  int polled;
  do {
    polled = ::poll(&ready, 1, timeout_ms);
  } while (polled < 0 && errno == EINTR);
  Message answer{Kind::kFailed, 0, 0, Step::kRequest};
  if (polled <= 0 || ::recv(socket, &answer, sizeof answer, 0) != sizeof answer) {
    return absl::UnavailableError("did not answer");
  }
  if (answer.kind == Kind::kRefused) {
    switch (static_cast<Refusal>(answer.value)) {
      case Refusal::kProcessGroup:
        return absl::UnavailableError("cannot join this process group");
      case Refusal::kProgram:
        return absl::UnavailableError(StrCat("is not ", server_spec_.argv[0]));
      case Refusal::kEnvironment:
        return absl::UnavailableError(
            "was started in another environment than the one the job's processes get");
      case Refusal::kNoRoom:
        *no_room = true;
        return absl::UnavailableError(
            "has too short a command line to write the job's processes' over");
      case Refusal::kRequest:
        break;
    }
    return absl::UnavailableError("refused the request");
  }
  if (answer.kind != Kind::kAdopted || answer.pid <= 0) {
    return absl::UnavailableError("answered out of turn");
  }
  // Not our child: watched, and signalled if it hangs, through a pidfd.
  if (StatusOr<uint64_t> start = ProcessStartTime(answer.pid); start.ok()) {
    StatusOr<std::unique_ptr<Process>> spare =
        Process::Adopt(server_spec_.label, answer.pid, *start);
    if (spare.ok()) server_ = *std::move(spare);
  }
  socket_ = socket;
  dead_ = false;
  reader_ = std::thread([this, socket] { ReadReplies(socket); });
  return absl::OkStatus();
}

StatusOr<pid_t> ForkServer::Fork(const ProcessSpec& spec) {
  if (!Serves(spec)) return absl::UnavailableError("not a child the fork server can make");
  const std::string request = EncodeRequest(spec);
  if (request.size() > kMaxRequest) {
    return absl::UnavailableError("command line and environment too long for the fork server");
  }
  std::lock_guard<std::mutex> one_at_a_time(fork_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(StartServerLocked());
  std::optional<Reply> reply;
  pending_ = &reply;
  struct Unpend {
    std::optional<Reply>** pending;
    ~Unpend() { *pending = nullptr; }
  } unpend{&pending_};
  ssize_t sent;
  do {
    sent = ::send(socket_, request.data(), request.size(), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size())) {
    dead_ = true;
    return absl::UnavailableError(StrCat("fork server: send: ", std::strerror(errno)));
  }
  if (!changed_.wait_for(lock, kReplyTimeout, [&] { return reply.has_value() || dead_; })) {
    dead_ = true;
    ::shutdown(socket_, SHUT_RDWR);
    if (server_ != nullptr) server_->Signal(SIGKILL).IgnoreError();
    return absl::UnavailableError("the fork server did not answer");
  }
  if (!reply.has_value()) return absl::UnavailableError("the fork server exited");
  const Message& m = reply->message;
  switch (m.kind) {
    case Kind::kStarted:
      return static_cast<pid_t>(m.pid);
    case Kind::kNoRoom:
      return absl::UnavailableError("command line longer than the fork server's room");
    case Kind::kFailed:
      if (m.step == Step::kWorkingDir) {
        return ErrnoToStatus(m.value, StrCat("working directory ", spec.working_dir));
      }
      return absl::UnavailableError(StrCat("fork server: ", std::strerror(m.value)));
    case Kind::kExited:
    case Kind::kAdopted:
    case Kind::kRefused:
      break;
  }
  return absl::UnavailableError("fork server: unexpected answer");
}

std::optional<ExitStatus> ForkServer::TakeExit(pid_t pid, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return exits_.count(pid) != 0 || dead_; });
  auto it = exits_.find(pid);
  if (it == exits_.end()) return std::nullopt;
  const int status = it->second;
  exits_.erase(it);
  return ExitStatus::FromWaitStatus(status);
}

void ForkServer::ReadReplies(int socket) {
  for (;;) {
    Message message;
    const ssize_t n = ::recv(socket, &message, sizeof message, 0);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (n != sizeof message) {  // end of file: the server exited (or we shut it)
      if (!dead_ && sink_ != nullptr) {
        sink_->Line(server_spec_.label, "exited; processes are exec'ed from now on");
      }
      dead_ = true;
      changed_.notify_all();
      return;
    }
    if (message.kind == Kind::kExited) {
      exits_[message.pid] = message.value;
    } else if (pending_ != nullptr) {
      *pending_ = Reply{message};
    }
    changed_.notify_all();
  }
}

namespace {

// Serves requests on `socket` until the owner closes it; returns the exit
// code. SIGCHLD is blocked here and read through a signalfd.
int Serve(int socket, const CommandLineArea& area, const std::function<int(int, char**)>& main) {
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &child, nullptr);
  const int signal_fd = ::signalfd(-1, &child, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    std::perror("fork-server: signalfd");
    return 1;
  }
  std::vector<char> buffer(kMaxRequest);
  for (;;) {
    pollfd fds[2] = {{socket, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("fork-server: poll");
      return 1;
    }
    if (fds[1].revents != 0) {
      signalfd_siginfo info;
      while (::read(signal_fd, &info, sizeof info) == sizeof info) {
      }
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        Send(socket, Message{Kind::kExited, pid, status, Step::kRequest});
      }
    }
    if (fds[0].revents == 0) continue;
    const ssize_t n = ::recv(socket, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;  // the owner closed the socket: done
    std::optional<Request> request =
        DecodeRequest(std::string_view(buffer.data(), static_cast<size_t>(n)));
    if (!request.has_value()) {
      Send(socket, Message{Kind::kFailed, 0, EINVAL, Step::kRequest});
      continue;
    }
    Send(socket, ForkChild(*request, area, socket, signal_fd, main));
  }
}

// Makes stdin /dev/null; false (with a message) if it cannot.
bool StdinFromDevNull() {
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDIN_FILENO) != STDIN_FILENO) {
    std::perror("fork-server: stdin");
    return false;
  }
  ::close(null);
  return true;
}

// Our variables (ELASTICDL_*) are read after main() starts, never as a
// library loads: a spare's may differ from its owner children's.
bool ReadAtLoad(std::string_view var) { return var.rfind("ELASTICDL_", 0) != 0; }

// `env` without what is not ReadAtLoad, sorted.
std::vector<std::string_view> LoadTimeEnvironment(std::vector<std::string_view> env) {
  env.erase(
      std::remove_if(env.begin(), env.end(), [](std::string_view v) { return !ReadAtLoad(v); }),
      env.end());
  std::sort(env.begin(), env.end());
  return env;
}

// Whether this process runs `program`: that file, or the elasticdl-torch it
// execs (common/file.h).
bool RunsProgram(const std::string& program) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return false;
  const fs::path wanted = fs::weakly_canonical(program, ec);
  if (ec) return false;
  if (self == wanted) return true;
  if (wanted.filename() != kElasticdlBinaryName) return false;
  const fs::path torch = fs::weakly_canonical(wanted.parent_path() / kElasticdlTorchBinaryName, ec);
  return !ec && self == torch;
}

// The spare's side of an adoption request on `socket`: kAdopted (its
// output now the owner's, in the owner's process group) or kRefused.
// nullopt if the socket closed first. `area` is where its children's
// command lines go.
std::optional<Message> TakeOwner(int socket, const CommandLineArea& area) {
  std::vector<char> buffer(kMaxRequest);
  iovec io{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  auto refuse = [&fds](Refusal why) {
    for (int fd : fds) ::close(fd);
    return Message{Kind::kRefused, 0, static_cast<int32_t>(why), Step::kRequest};
  };
  std::optional<std::vector<std::string_view>> fields =
      SplitFields(std::string_view(buffer.data(), static_cast<size_t>(n)));
  if (!fields.has_value() || fields->size() < 4 || (*fields)[0] != kAdoptProtocol ||
      fds.size() != 2 || (header.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
    return refuse(Refusal::kRequest);
  }
  const std::optional<int64_t> group = Number((*fields)[2], std::numeric_limits<pid_t>::max());
  const std::optional<int64_t> room = Number((*fields)[3], kMaxRequest);
  if (!group.has_value() || *group == 0 || !room.has_value()) return refuse(Refusal::kRequest);
  // First, so that the owner's side reaps this process whatever follows.
  if (::setpgid(0, static_cast<pid_t>(*group)) != 0) return refuse(Refusal::kProcessGroup);
  if (!RunsProgram(std::string((*fields)[1]))) return refuse(Refusal::kProgram);
  if (area.size() < static_cast<size_t>(*room)) return refuse(Refusal::kNoRoom);
  std::vector<std::string_view> ours;
  for (char** var = environ; *var != nullptr; ++var) ours.emplace_back(*var);
  if (LoadTimeEnvironment(std::move(ours)) !=
      LoadTimeEnvironment({fields->begin() + 4, fields->end()})) {
    return refuse(Refusal::kEnvironment);
  }
  std::fflush(nullptr);
  if (::dup2(fds[0], STDOUT_FILENO) != STDOUT_FILENO ||
      ::dup2(fds[1], STDERR_FILENO) != STDERR_FILENO) {
    return refuse(Refusal::kRequest);
  }
  for (int fd : fds) ::close(fd);
  return Message{Kind::kAdopted, static_cast<int32_t>(::getpid()), 0, Step::kRequest};
}

// Closes the descriptors this process inherited open across an exec (an
// exec'ed server would have none of them: its starter's close on exec), but
// for `keep`.
void CloseInherited(int keep) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return;
  std::vector<int> inherited;
  while (const dirent* entry = ::readdir(fds)) {
    const std::optional<int64_t> fd = Number(entry->d_name, std::numeric_limits<int>::max());
    if (!fd.has_value() || *fd <= STDERR_FILENO || *fd == keep || *fd == ::dirfd(fds)) continue;
    const int flags = ::fcntl(static_cast<int>(*fd), F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) inherited.push_back(static_cast<int>(*fd));
  }
  ::closedir(fds);
  for (int fd : inherited) ::close(fd);
}

// The spare: waits for its owner, then serves it. Returns the exit code.
int RunSpare(int socket, int argc, char** argv, pid_t parent,
             const std::function<int(int, char**)>& main) {
  // Dies with the process that forked it (its main thread), as an exec'ed
  // server dies with its owner.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent || !StdinFromDevNull()) return 0;
  // Out of the terminal's foreground group (a Ctrl-C or Ctrl-Z is for the
  // client), until it joins its owner's.
  ::setpgid(0, 0);
  CloseInherited(socket);
  const CommandLineArea area(argc, argv);
  if (const std::vector<std::string> title = {argv[0], "fork-server"}; area.Fits(title)) {
    area.Write(title);
  }
  std::optional<Message> answer = TakeOwner(socket, area);
  if (!answer.has_value()) return 0;
  Send(socket, *answer);
  if (answer->kind != Kind::kAdopted) return 0;
  return Serve(socket, area, main);
}

struct SpareSocket {
  std::mutex mu;
  int socket = -1;
  int pidfd = -1;  // the spare, until reaped
};

SpareSocket& Spare() {
  static SpareSocket* spare = new SpareSocket();
  return *spare;
}

}  // namespace

int ServeForks(int argc, char** argv, const std::function<int(int, char**)>& main) {
  if (ThreadCount() != 1) {
    std::fprintf(stderr,
                 "fork-server: this process runs threads already; a fork would lack them\n");
    return 1;
  }
  int type = 0;
  socklen_t length = sizeof type;
  if (::getsockopt(STDIN_FILENO, SOL_SOCKET, SO_TYPE, &type, &length) != 0 ||
      type != SOCK_SEQPACKET) {
    std::fprintf(stderr, "fork-server: stdin must be a SOCK_SEQPACKET socket to the owner\n");
    return 2;
  }
  const int socket = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (socket < 0) {
    std::perror("fork-server: stdin");
    return 1;
  }
  if (!StdinFromDevNull()) return 1;
  // ps shows the server's own arguments, without the room (the last one).
  const CommandLineArea area(argc, argv);
  area.Write(std::vector<std::string>(argv, argv + std::max(argc - 1, 1)));
  return Serve(socket, area, main);
}

void StartSpareForkServer(int argc, char** argv, const std::function<int(int, char**)>& main) {
  if (argc < 1 || ThreadCount() != 1) return;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return;
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const int code = RunSpare(fds[1], argc, argv, parent, main);
    // Not this process's static destructors and exit handlers to run (they
    // are the one's it was forked from).
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return;
  }
  SpareSocket& spare = Spare();
  std::lock_guard<std::mutex> lock(spare.mu);
  if (spare.socket >= 0) ::close(spare.socket);
  spare.socket = fds[0];
  spare.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

void ReapSpareForkServer(std::chrono::milliseconds wait) {
  SpareSocket& spare = Spare();
  std::lock_guard<std::mutex> lock(spare.mu);
  if (spare.pidfd < 0) return;
  pollfd exited{spare.pidfd, POLLIN, 0};
  if (::poll(&exited, 1, static_cast<int>(wait.count())) <= 0) return;
  // P_PIDFD (Linux 5.4), which glibc 2.36's <sys/wait.h> does not name: a
  // pid the spare had, reaped already, may be another child's by now.
  constexpr auto kPidfd = static_cast<idtype_t>(3);
  siginfo_t info{};
  if (::waitid(kPidfd, static_cast<id_t>(spare.pidfd), &info, WEXITED | WNOHANG) == 0 &&
      info.si_pid == 0) {
    return;
  }
  ::close(spare.pidfd);  // reaped here, or by the owner's side (ECHILD)
  spare.pidfd = -1;
}

int TakeSpareForkServer() {
  SpareSocket& spare = Spare();
  std::lock_guard<std::mutex> lock(spare.mu);
  return std::exchange(spare.socket, -1);
}

}  // namespace elasticdl::cluster
