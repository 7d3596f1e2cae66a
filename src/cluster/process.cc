#include "cluster/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include "cluster/fork_server.h"
#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Moves a new close-on-exec descriptor above 0-2 (which are closed when we
// run as a daemon), so that installing the child's stdio cannot clobber it.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

Status MakePipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  read_end->reset(AboveStdio(fds[0]));
  write_end->reset(AboveStdio(fds[1]));
  if (read_end->get() < 0 || write_end->get() < 0) return ErrnoToStatus(errno, "pipe");
  return absl::OkStatus();
}

// argv[0] as a path: itself if it has a slash, else the first executable
// file of that name in PATH.
StatusOr<std::string> ResolveProgram(const ProcessSpec& spec) {
  const std::string& program = spec.argv[0];
  if (program.find('/') != std::string::npos) return program;
  const char* ours = std::getenv("PATH");
  std::string path = ours != nullptr ? ours : "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [name, value] : spec.env) {
    if (name == "PATH") path = value;
  }
  if (!program.empty()) {
    for (size_t start = 0; start <= path.size();) {
      size_t end = std::min(path.find(':', start), path.size());
      std::string dir = path.substr(start, end - start);
      std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
      struct stat st;
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
      start = end + 1;
    }
  }
  return absl::NotFoundError(StrCat("program '", program, "' not found in PATH (", path, ")"));
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// What the child needs between fork and exec, prepared before the fork so
// the child allocates nothing.
struct ChildPlan {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* working_dir;  // null: stay
  bool new_process_group;
  int die_with_parent_signal;
  pid_t parent;
  int stdin_fd, stdout_fd, stderr_fd;
  int pass_fd;   // >= 3: kept open across the exec
  int error_fd;  // close-on-exec; gets a ChildError if setup or exec fails
};

enum class ChildStep : int { kProcessGroup, kStdio, kWorkingDir, kExec };

struct ChildError {
  ChildStep step;
  int err;
};

// Installs `fd` as `target`, without close-on-exec.
bool InstallFd(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

// The child side of Start(). Runs between fork and exec of a multithreaded
// process, so it makes only async-signal-safe calls. All signals are
// blocked on entry.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  auto fail = [&plan](ChildStep step) {
    ChildError error{step, errno};
    ssize_t ignored = ::write(plan.error_fd, &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  };
  if (plan.new_process_group && ::setpgid(0, 0) != 0) fail(ChildStep::kProcessGroup);
  if (plan.die_with_parent_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, plan.die_with_parent_signal);
    // The parent may have died before prctl(): then no signal will come.
    if (::getppid() != plan.parent) ::_exit(127);
  }
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
  }
  if (!InstallFd(plan.stdin_fd, STDIN_FILENO) || !InstallFd(plan.stdout_fd, STDOUT_FILENO) ||
      !InstallFd(plan.stderr_fd, STDERR_FILENO)) {
    fail(ChildStep::kStdio);
  }
  // Descriptors another thread opened without O_CLOEXEC must not leak into
  // the child (older kernels lack the flag; ours are close-on-exec anyway).
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (plan.pass_fd >= 3 && ::fcntl(plan.pass_fd, F_SETFD, 0) != 0) fail(ChildStep::kStdio);
  if (plan.working_dir != nullptr && ::chdir(plan.working_dir) != 0) fail(ChildStep::kWorkingDir);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(plan.program, plan.argv, plan.envp);
  fail(ChildStep::kExec);
  ::_exit(127);  // not reached
}

std::string DescribeFailure(const ChildError& error, const ProcessSpec& spec,
                            const std::string& program) {
  switch (error.step) {
    case ChildStep::kProcessGroup:
      return "setpgid";
    case ChildStep::kStdio:
      return "redirecting stdio";
    case ChildStep::kWorkingDir:
      return StrCat("working directory ", spec.working_dir);
    case ChildStep::kExec:
      break;
  }
  return StrCat("cannot execute ", program);
}

}  // namespace

std::vector<std::string> ChildEnvironment(const ProcessSpec& spec) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view var(*entry);
    std::string_view name = var.substr(0, var.find('='));
    bool replaced = false;
    for (const auto& set : spec.env) replaced = replaced || set.first == name;
    if (!replaced) env.emplace_back(var);
  }
  for (const auto& [name, value] : spec.env) env.push_back(StrCat(name, "=", value));
  return env;
}

ExitStatus ExitStatus::FromWaitStatus(int wstatus) {
  if (WIFSIGNALED(wstatus)) return Killed(WTERMSIG(wstatus), WCOREDUMP(wstatus));
  return Exited(WEXITSTATUS(wstatus));
}

std::string ExitStatus::ToString() const {
  if (exited) return code < 0 ? "exit status lost" : StrCat("exit code ", code);
  const char* abbrev = ::sigabbrev_np(signal);
  return StrCat("killed by ", abbrev != nullptr ? StrCat("SIG", abbrev) : StrCat("signal ", signal),
                core_dumped ? " (core dumped)" : "");
}

StatusOr<std::unique_ptr<Process>> Process::Start(const ProcessSpec& spec, LogSink* sink) {
  const std::string context = StrCat("cannot start ", spec.label);
  if (spec.label.empty()) return absl::InvalidArgumentError("process spec without a label");
  if (spec.argv.empty()) return absl::InvalidArgumentError(StrCat(context, ": empty argv"));
  if (spec.die_with_parent_signal < 0 || spec.die_with_parent_signal >= NSIG) {
    return absl::InvalidArgumentError(
        StrCat(context, ": bad die_with_parent_signal ", spec.die_with_parent_signal));
  }
  if (spec.pass_fd >= 0 && spec.pass_fd < 3) {
    return absl::InvalidArgumentError(StrCat(context, ": pass_fd ", spec.pass_fd, " is stdio"));
  }
  if (spec.fork_server != nullptr && spec.fork_server->Serves(spec)) {
    StatusOr<pid_t> forked = spec.fork_server->Fork(spec);
    if (forked.ok()) {
      const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, *forked, 0));
      UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
      if (stop.get() < 0) return ErrnoToStatus(errno, context);
      return std::unique_ptr<Process>(new Process(sink, spec.label, spec.label_output, *forked,
                                                  false, pidfd, stop.release(), false,
                                                  spec.fork_server));
    }
    // UNAVAILABLE: the server cannot; exec instead.
    if (!absl::IsUnavailable(forked.status())) return Annotate(forked.status(), context);
  }
  StatusOr<std::string> resolved = ResolveProgram(spec);
  if (!resolved.ok()) return Annotate(resolved.status(), context);
  const std::string program = *std::move(resolved);
  std::vector<std::string> argv = spec.argv;
  std::vector<std::string> env = ChildEnvironment(spec);
  std::vector<char*> argv_pointers = NullTerminated(argv);
  std::vector<char*> env_pointers = NullTerminated(env);

  UniqueFd stdout_read, stdout_write, stderr_read, stderr_write, error_read, error_write;
  const bool own_pipes = !spec.inherit_output && spec.output_fd < 0;
  if (own_pipes) {
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(MakePipe(&stdout_read, &stdout_write), context);
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(MakePipe(&stderr_read, &stderr_write), context);
  }
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(MakePipe(&error_read, &error_write), context);
  UniqueFd child_stdin(spec.stdin_fd >= 0 ? AboveStdio(::fcntl(spec.stdin_fd, F_DUPFD_CLOEXEC, 0))
                                          : AboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  if (child_stdin.get() < 0 || stop.get() < 0) return ErrnoToStatus(errno, context);

  ChildPlan plan{program.c_str(),
                 argv_pointers.data(),
                 env_pointers.data(),
                 spec.working_dir.empty() ? nullptr : spec.working_dir.c_str(),
                 spec.new_process_group,
                 spec.die_with_parent_signal,
                 ::getpid(),
                 child_stdin.get(),
                 own_pipes             ? stdout_write.get()
                 : spec.output_fd >= 0 ? spec.output_fd
                                       : STDOUT_FILENO,
                 own_pipes             ? stderr_write.get()
                 : spec.output_fd >= 0 ? spec.output_fd
                                       : STDERR_FILENO,
                 spec.pass_fd,
                 error_write.get()};
  // No signal handler of ours may run in the child before exec.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::fork();
  if (pid == 0) RunChild(plan);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return ErrnoToStatus(fork_errno, StrCat(context, ": fork"));

  stdout_write.reset();
  stderr_write.reset();
  error_write.reset();
  child_stdin.reset();
  ChildError error;
  ssize_t n;
  do {
    n = ::read(error_read.get(), &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof error) {  // the child has _exit()ed or is about to
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return ErrnoToStatus(error.err, StrCat(context, ": ", DescribeFailure(error, spec, program)));
  }
  // Exec succeeded (the error pipe closed on exec).
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  std::unique_ptr<Process> process(new Process(sink, spec.label, spec.label_output, pid,
                                               spec.new_process_group, pidfd, stop.release()));
  if (own_pipes) {
    process->reader_ = std::thread(&Process::ReadOutput, process.get(), stdout_read.release(),
                                   stderr_read.release());
  }
  return process;
}

StatusOr<std::unique_ptr<Process>> Process::Adopt(const std::string& label, pid_t pid,
                                                  uint64_t start_time) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return absl::NotFoundError(StrCat(label, " (pid ", pid, ") is gone"));
    return ErrnoToStatus(errno, StrCat("cannot watch ", label, " (pid ", pid, ")"));
  }
  // Checked after opening the pidfd: if the start time matches now, the
  // pidfd refers to that very process.
  StatusOr<uint64_t> started = ProcessStartTime(pid);
  if (!started.ok() || *started != start_time) {
    ::close(pidfd);
    return absl::NotFoundError(StrCat(label, " (pid ", pid, ") is gone"));
  }
  int stop = ::eventfd(0, EFD_CLOEXEC);
  if (stop < 0) {
    int err = errno;
    ::close(pidfd);
    return ErrnoToStatus(err, "eventfd");
  }
  return std::unique_ptr<Process>(
      new Process(nullptr, label, false, pid, false, pidfd, stop, /*adopted=*/true));
}

Process::Process(LogSink* sink, std::string label, bool label_output, pid_t pid, bool group_leader,
                 int pidfd, int stop_fd, bool adopted, std::shared_ptr<ForkServer> fork_server)
    : sink_(sink),
      label_(std::move(label)),
      label_output_(label_output),
      pid_(pid),
      group_leader_(group_leader),
      pidfd_(pidfd),
      stop_fd_(stop_fd),
      adopted_(adopted),
      fork_server_(std::move(fork_server)) {}

Process::~Process() {
  if (!TryWait()) {
    Signal(SIGKILL).IgnoreError();
    Wait();
  }
  if (pidfd_ >= 0) ::close(pidfd_);
  ::close(stop_fd_);
}

Status Process::Signal(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  // While unreaped, the pid (and group id) cannot be reused, so this cannot
  // hit a stranger.
  if (exit_.has_value()) return absl::OkStatus();
  if (adopted_ || (fork_server_ != nullptr && pidfd_ >= 0)) {
    if (::syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0) == 0 || errno == ESRCH) {
      return absl::OkStatus();
    }
    return ErrnoToStatus(errno, StrCat("cannot signal ", label_, " (pid ", pid_, ")"));
  }
  if (::kill(group_leader_ ? -pid_ : pid_, sig) == 0 || errno == ESRCH) return absl::OkStatus();
  return ErrnoToStatus(errno, StrCat("cannot signal ", label_, " (pid ", pid_, ")"));
}

std::optional<ExitStatus> Process::TryWait() {
  std::optional<ExitStatus> status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!exit_.has_value() && fork_server_ != nullptr) {
      exit_ = TryWaitServedLocked();
    } else if (!exit_.has_value() && adopted_) {
      pollfd exit_event{pidfd_, POLLIN, 0};
      if (::poll(&exit_event, 1, 0) > 0) exit_ = ExitStatus::Exited(-1);
    } else if (!exit_.has_value()) {
      int wstatus = 0;
      pid_t reaped;
      do {
        reaped = ::waitpid(pid_, &wstatus, WNOHANG);
      } while (reaped < 0 && errno == EINTR);
      if (reaped == pid_) {
        exit_ = ExitStatus::FromWaitStatus(wstatus);
      } else if (reaped < 0) {  // ECHILD: reaped behind our back
        exit_ = ExitStatus::Exited(-1);
      }
    }
    status = exit_;
  }
  if (status.has_value()) FinishOutput();
  return status;
}

std::optional<ExitStatus> Process::TryWaitServedLocked() {
  // The pidfd polls readable once the child has ended; the server's report
  // of its status follows within milliseconds.
  bool ended = false;
  if (pidfd_ >= 0) {
    pollfd exit_event{pidfd_, POLLIN, 0};
    ended = ::poll(&exit_event, 1, 0) > 0;
  } else {
    ended = ::kill(pid_, 0) != 0 && errno == ESRCH;
  }
  constexpr auto kReportTimeout = std::chrono::seconds(2);
  std::optional<ExitStatus> reported = fork_server_->TakeExit(
      pid_, ended ? std::chrono::milliseconds(kReportTimeout) : std::chrono::milliseconds(0));
  if (reported.has_value()) return reported;
  // Ended without a report: the server is gone, and the status with it.
  if (ended) return ExitStatus::Exited(-1);
  return std::nullopt;
}

bool Process::WaitFor(std::chrono::milliseconds timeout, ExitStatus* status) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    if (std::optional<ExitStatus> exited = TryWait()) {
      if (status != nullptr) *status = *exited;
      return true;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (pidfd_ >= 0) {
      pollfd exit_event{pidfd_, POLLIN, 0};
      ::poll(&exit_event, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(10)));
    }
  }
}

ExitStatus Process::Wait() {
  ExitStatus status;
  while (!WaitFor(std::chrono::hours(24), &status)) {
  }
  return status;
}

void Process::ReadOutput(int stdout_fd, int stderr_fd) {
  const std::string prefix = label_output_ ? label_ : std::string();
  LineWriter writers[2] = {LineWriter(sink_, prefix), LineWriter(sink_, prefix)};
  pollfd fds[3] = {{stdout_fd, POLLIN, 0}, {stderr_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  char buffer[64 * 1024];
  // Reads once from stream `i`; at end of file or error, closes it and
  // returns false. With O_NONBLOCK set, "nothing buffered" also ends it.
  auto pump = [&](int i) {
    ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
    if (n > 0) {
      writers[i].Append(std::string_view(buffer, static_cast<size_t>(n)));
      return true;
    }
    if (n < 0 && errno == EINTR) return true;
    ::close(fds[i].fd);
    fds[i].fd = -1;
    writers[i].Flush();
    return false;
  };
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) {
      // The child is gone, so all it wrote is in the pipes: take that, but
      // do not wait for descendants that still hold the pipes open. The
      // bound keeps a descendant that writes without pause from holding us.
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0) continue;
        ::fcntl(fds[i].fd, F_SETFL, ::fcntl(fds[i].fd, F_GETFL) | O_NONBLOCK);
        for (int reads = 0; reads < 64 && pump(i); ++reads) {
        }
      }
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0) pump(i);
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd >= 0) ::close(fds[i].fd);
    writers[i].Flush();
  }
}

void Process::FinishOutput() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  if (!reader_.joinable()) return;
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
  (void)ignored;
  reader_.join();
}

}  // namespace elasticdl::cluster
