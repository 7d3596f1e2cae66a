// Settings a process applies to itself at start.
#ifndef ELASTICDL_COMMON_PROCESS_TUNING_H_
#define ELASTICDL_COMMON_PROCESS_TUNING_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

// Keeps freed memory in the process instead of returning it to the kernel.
// A training step allocates and frees the same multi-megabyte activation
// and message buffers every minibatch; with glibc's defaults they go back
// to the kernel (munmap, heap trimming) and come back as fresh pages that
// fault and are zeroed again — 15-20 % of a worker's time on the seed CNN
// (docs/benchmark-notes.md, Training). Allocations up to 32 MiB come from
// the heap and the heap is trimmed only past 1 GiB free. Call once, early
// in main().
void KeepFreedMemory();

// Turns off abseil's lock-cycle (deadlock) detection, which Debian's
// abseil leaves on: every absl::Mutex taken while another is held records
// the pair and a stack trace in a global graph. gRPC's locks are
// absl::Mutexes, taken nested on every call, so each RPC paid for it: a
// nested lock costs 3.5-6 times as much with it (bench/lock_bench.cc,
// docs/benchmarks.md). Call once, early in main(), before any thread starts.
void SkipLockCycleDetection();

// The CPUs thread `tid` may run on (sched_getaffinity; 0: the calling
// thread, whose set a process's threads start with), in ascending order;
// empty when it cannot be read.
std::vector<int> AllowedCpus(pid_t tid = 0);

// "0,2-3" -> {0, 2, 3}; an error names what was expected.
StatusOr<std::vector<int>> ParseCpuList(std::string_view list);
// {0, 2, 3} -> "0,2,3" (ParseCpuList's input).
std::string FormatCpuList(const std::vector<int>& cpus);

// Binds every thread of this process, and so every thread it starts later,
// to `cpus`. Call early in main(), before threads start: a thread that
// starts while this runs may keep the affinity it was born with.
Status BindToCpus(const std::vector<int>& cpus);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_PROCESS_TUNING_H_
