#include "cluster/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "common/file.h"

namespace elasticdl::cluster {

StatusOr<std::unique_ptr<OutputRelay>> OutputRelay::Create(LogSink* sink) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "output relay pipe");
  int stop = ::eventfd(0, EFD_CLOEXEC);
  if (stop < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoToStatus(err, "output relay eventfd");
  }
  std::unique_ptr<OutputRelay> relay(new OutputRelay(sink, fds[0], fds[1], stop));
  relay->thread_ = std::thread(&OutputRelay::Pump, relay.get());
  return relay;
}

OutputRelay::OutputRelay(LogSink* sink, int read_fd, int write_fd, int stop_fd)
    : sink_(sink), read_fd_(read_fd), write_fd_(write_fd), stop_fd_(stop_fd) {}

OutputRelay::~OutputRelay() {
  Stop(std::chrono::milliseconds(0));
  ::close(read_fd_);
  ::close(stop_fd_);
}

void OutputRelay::Pump() {
  LineWriter writer(sink_, "");
  pollfd fds[2] = {{read_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  char buffer[64 * 1024];
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) {
      ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
      if (n > 0) {
        writer.Append(std::string_view(buffer, static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // every writer has closed
    }
    if (fds[1].revents != 0) break;
  }
  writer.Flush();
}

void OutputRelay::Stop(std::chrono::milliseconds linger) {
  if (!thread_.joinable()) return;
  if (write_fd_ >= 0) {
    ::close(write_fd_);
    write_fd_ = -1;
  }
  // Wait for end of file (every writer gone) up to `linger`.
  const auto deadline = std::chrono::steady_clock::now() + linger;
  pollfd eof{read_fd_, POLLHUP, 0};
  while (std::chrono::steady_clock::now() < deadline) {
    if (::poll(&eof, 1, 10) > 0 && (eof.revents & POLLHUP) != 0 && (eof.revents & POLLIN) == 0) {
      break;
    }
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
}

}  // namespace elasticdl::cluster
