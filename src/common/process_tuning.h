// Settings a process applies to itself at start.
#ifndef ELASTICDL_COMMON_PROCESS_TUNING_H_
#define ELASTICDL_COMMON_PROCESS_TUNING_H_

namespace elasticdl {

// Keeps freed memory in the process instead of returning it to the kernel.
// A training step allocates and frees the same multi-megabyte activation
// and message buffers every minibatch; with glibc's defaults they go back
// to the kernel (munmap, heap trimming) and come back as fresh pages that
// fault and are zeroed again — 15-20 % of a worker's time on the seed CNN
// (docs/benchmarks.md). Allocations up to 32 MiB come from the heap and
// the heap is trimmed only past 1 GiB free. Call once, early in main().
void KeepFreedMemory();

// Turns off abseil's lock-cycle (deadlock) detection, which Debian's
// abseil leaves on: every absl::Mutex taken while another is held records
// the pair and a stack trace in a global graph. gRPC's locks are
// absl::Mutexes, taken nested on every call, so each RPC paid for it: a
// nested lock costs 3.5-6 times as much with it (bench/lock_bench.cc,
// docs/benchmarks.md). Call once, early in main(), before any thread starts.
void SkipLockCycleDetection();

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_PROCESS_TUNING_H_
