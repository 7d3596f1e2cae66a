#include "common/process_tuning.h"

#include <absl/strings/str_join.h>
#include <absl/synchronization/mutex.h>
#include <malloc.h>
#include <sched.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <set>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl {

void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void SkipLockCycleDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::vector<int> AllowedCpus(pid_t tid) {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

StatusOr<std::vector<int>> ParseCpuList(std::string_view list) {
  auto bad = [list](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat("CPU list '", list, "': ", why, "; expected CPU numbers and ranges such as 0,2-3"));
  };
  auto number = [](std::string_view s, int* out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size() && *out >= 0 && *out < CPU_SETSIZE;
  };
  std::set<int> cpus;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(start, comma - start);
    size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    if (dash == std::string_view::npos) {
      if (!number(item, &first)) return bad(StrCat("'", item, "' is not a CPU number"));
      last = first;
    } else if (!number(item.substr(0, dash), &first) || !number(item.substr(dash + 1), &last) ||
               last < first) {
      return bad(StrCat("'", item, "' is not a range of CPU numbers"));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
    start = comma + 1;
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string FormatCpuList(const std::vector<int>& cpus) { return absl::StrJoin(cpus, ","); }

Status BindToCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // sched_setaffinity binds one thread: bind each one this process has.
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const pid_t tid = std::stoi(task.path().filename().string());
    // ESRCH: the thread ended meanwhile.
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
      return ErrnoToStatus(errno, StrCat("binding to CPUs ", FormatCpuList(cpus)));
    }
  }
  if (error) return ErrnoToStatus(error.value(), "/proc/self/task");
  return absl::OkStatus();
}

}  // namespace elasticdl
