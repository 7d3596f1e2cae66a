// When a process started, as the kernel recorded it.
#ifndef ELASTICDL_COMMON_PROCESS_START_H_
#define ELASTICDL_COMMON_PROCESS_START_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "elasticdl/status.h"

namespace elasticdl {

// The start time of process `pid` (clock ticks after boot, field 22 of
// /proc/<pid>/stat): with the pid, it names one process for good, since a
// later process reusing the pid starts later. NOT_FOUND if there is none.
StatusOr<uint64_t> ProcessStartTime(pid_t pid);

// Whether the process that started at `start_time` (ProcessStartTime) with
// pid `pid` is still running: false once it has ended, also while it is a
// zombie its parent has not reaped.
bool ProcessRunning(pid_t pid, uint64_t start_time);

// "<pid>:<start time>": one process named for good to another (in an
// environment variable), and back; nullopt when `token` is not one.
std::string ProcessToken(pid_t pid, uint64_t start_time);
std::optional<std::pair<pid_t, uint64_t>> ParseProcessToken(std::string_view token);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_PROCESS_START_H_
