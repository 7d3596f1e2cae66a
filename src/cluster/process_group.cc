#include "cluster/process_group.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <csignal>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

// How often the watcher looks for exits it cannot be woken for (children
// without a pidfd, or no eventfd).
constexpr int kPollIntervalMs = 20;

}  // namespace

// A Start() call from another thread, answered by the watcher.
struct ProcessGroup::StartRequest {
  const ProcessSpec* spec;
  std::optional<StatusOr<pid_t>> result;  // set under mu_ by the watcher
};

ProcessGroup::ProcessGroup(LogSink* sink, ExitCallback on_exit)
    : sink_(sink),
      on_exit_(std::move(on_exit)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      watcher_([this] { Watch(); }) {}

ProcessGroup::~ProcessGroup() {
  StopAll(std::chrono::milliseconds(0));
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  Wake();
  watcher_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

StatusOr<pid_t> ProcessGroup::Start(const ProcessSpec& spec) {
  if (OnWatcher()) return StartHere(spec);
  StartRequest request{&spec, std::nullopt};
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    return absl::FailedPreconditionError(
        StrCat("cannot start ", spec.label, ": the process group is stopping"));
  }
  requests_.push_back(&request);
  Wake();
  changed_.wait(lock, [&request] { return request.result.has_value(); });
  return *request.result;
}

StatusOr<pid_t> ProcessGroup::StartHere(const ProcessSpec& spec) {
  // Holding the lock across the fork keeps StopAll() from missing a child.
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    return absl::FailedPreconditionError(
        StrCat("cannot start ", spec.label, ": the process group is stopping"));
  }
  if (children_.count(spec.label) != 0) {
    return absl::AlreadyExistsError(
        StrCat("cannot start ", spec.label, ": a process of that label is running"));
  }
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<Process> process, Process::Start(spec, sink_));
  const pid_t pid = process->pid();
  children_.emplace(spec.label, std::move(process));
  return pid;
}

Status ProcessGroup::Adopt(const std::string& label, pid_t pid, uint64_t start_time) {
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<Process> process, Process::Adopt(label, pid, start_time));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(
          StrCat("cannot watch ", label, ": the process group is stopping"));
    }
    if (children_.count(label) != 0) {
      return absl::AlreadyExistsError(
          StrCat("cannot watch ", label, ": a process of that label is running"));
    }
    children_.emplace(label, std::move(process));
  }
  Wake();
  return absl::OkStatus();
}

Status ProcessGroup::Signal(const std::string& label, int sig) {
  std::shared_ptr<Process> process;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(label);
    if (it == children_.end()) return absl::NotFoundError(StrCat("no running process ", label));
    process = it->second;
  }
  return process->Signal(sig);
}

void ProcessGroup::StopAll(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<Process>> children;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (const auto& entry : children_) children.push_back(entry.second);
  }
  for (const auto& child : children) child->Signal(SIGTERM).IgnoreError();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (const auto& child : children) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    child->WaitFor(std::max(left, std::chrono::milliseconds(0)));
  }
  for (const auto& child : children) {
    if (!child->TryWait()) child->Signal(SIGKILL).IgnoreError();
  }
  for (const auto& child : children) child->Wait();
  Wake();
  if (OnWatcher()) return;
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return children_.empty() && !reporting_; });
}

size_t ProcessGroup::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.size();
}

std::optional<pid_t> ProcessGroup::pid(const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(label);
  if (it == children_.end()) return std::nullopt;
  return it->second->pid();
}

void ProcessGroup::Watch() {
  std::vector<pollfd> fds;
  for (;;) {
    std::deque<StartRequest*> requests;
    bool quit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests.swap(requests_);
      quit = quit_;
    }
    for (StartRequest* request : requests) {
      StatusOr<pid_t> status = StartHere(*request->spec);
      std::lock_guard<std::mutex> lock(mu_);
      request->result = std::move(status);
    }
    if (!requests.empty()) changed_.notify_all();
    ReportExits();
    if (quit) return;

    // Only this thread removes children, so their pidfds stay open while
    // we poll them.
    int timeout = wake_fd_ < 0 ? kPollIntervalMs : -1;
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& entry : children_) {
        int exit_fd = entry.second->exit_fd();
        if (exit_fd < 0) timeout = kPollIntervalMs;
        fds.push_back(pollfd{exit_fd, POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), timeout);
    uint64_t wakeups;
    ssize_t ignored = ::read(wake_fd_, &wakeups, sizeof wakeups);
    (void)ignored;
  }
}

void ProcessGroup::ReportExits() {
  std::vector<std::pair<std::string, std::shared_ptr<Process>>> children;
  {
    std::lock_guard<std::mutex> lock(mu_);
    children.assign(children_.begin(), children_.end());
  }
  for (const auto& [label, process] : children) {
    std::optional<ExitStatus> status = process->TryWait();
    if (!status.has_value()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = children_.find(label);
      if (it != children_.end() && it->second == process) children_.erase(it);
      reporting_ = true;
    }
    if (on_exit_) on_exit_(label, process->pid(), *status);
    {
      std::lock_guard<std::mutex> lock(mu_);
      reporting_ = false;
    }
    changed_.notify_all();
  }
}

void ProcessGroup::Wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

}  // namespace elasticdl::cluster
