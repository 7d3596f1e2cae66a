#include "common/process_tuning.h"

#include <absl/synchronization/mutex.h>
#include <dirent.h>
#include <malloc.h>
#include <sched.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "common/strings.h"

namespace elasticdl {

void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void SkipLockCycleDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
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

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (int cpu : cpus) {
    if (!out.empty()) out += ',';
    out += std::to_string(cpu);
  }
  return out;
}

Status BindToCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // sched_setaffinity binds one thread: bind each one this process has.
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    return absl::InternalError(StrCat("/proc/self/task: ", std::strerror(errno)));
  }
  Status status;
  while (dirent* entry = readdir(tasks)) {
    int tid = 0;
    std::string_view name = entry->d_name;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (ec != std::errc() || end != name.data() + name.size()) continue;  // "." and ".."
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH && status.ok()) {
      status = absl::InvalidArgumentError(
          StrCat("binding to CPUs ", FormatCpuList(cpus), ": ", std::strerror(errno)));
    }
  }
  closedir(tasks);
  return status;
}

}  // namespace elasticdl
