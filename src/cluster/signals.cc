#include "cluster/signals.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

// Ends the process the way `sig` would have, had it not been blocked.
[[noreturn]] void DieBy(int sig) {
  std::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // for a signal whose default action is not to terminate
}

}  // namespace

StatusOr<std::unique_ptr<ShutdownSignals>> ShutdownSignals::Install(
    ShutdownSignalsOptions options) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : options.signals) {
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP) {
      return absl::InvalidArgumentError(StrCat("cannot wait for signal ", sig));
    }
    sigaddset(&set, sig);
  }
  int error = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (error != 0) return absl::InternalError(StrCat("pthread_sigmask: ", std::strerror(error)));
  int signal_fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) return absl::InternalError(StrCat("signalfd: ", std::strerror(errno)));
  int stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    error = errno;
    ::close(signal_fd);
    return absl::InternalError(StrCat("eventfd: ", std::strerror(error)));
  }
  std::unique_ptr<ShutdownSignals> signals(
      new ShutdownSignals(std::move(options), signal_fd, stop_fd));
  signals->thread_ = std::thread(&ShutdownSignals::Run, signals.get());
  return signals;
}

ShutdownSignals::ShutdownSignals(ShutdownSignalsOptions options, int signal_fd, int stop_fd)
    : options_(std::move(options)), signal_fd_(signal_fd), stop_fd_(stop_fd) {}

ShutdownSignals::~ShutdownSignals() {
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
  ::close(signal_fd_);
  ::close(stop_fd_);
}

bool ShutdownSignals::requested() const { return signal() != 0; }

int ShutdownSignals::signal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_signal_;
}

void ShutdownSignals::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait(lock, [this] { return first_signal_ != 0; });
}

bool ShutdownSignals::WaitFor(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return arrived_.wait_for(lock, timeout, [this] { return first_signal_ != 0; });
}

void ShutdownSignals::Run() {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    signalfd_siginfo info;
    if (fds[0].revents != 0 && ::read(signal_fd_, &info, sizeof info) == sizeof info) {
      Deliver(static_cast<int>(info.ssi_signo));
    }
  }
}

void ShutdownSignals::Deliver(int sig) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = count_++ == 0;
    if (first) first_signal_ = sig;
  }
  if (first) {
    arrived_.notify_all();
    if (options_.on_shutdown) options_.on_shutdown(sig);
  } else if (options_.on_force) {
    options_.on_force(sig);
  } else {
    DieBy(sig);
  }
}

}  // namespace elasticdl::cluster
