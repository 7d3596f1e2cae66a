// What abseil's lock-cycle detection costs a process: absl::Mutex (gRPC's
// lock on every call) taken nested, as gRPC takes it, and created and
// destroyed, as gRPC does per call, with the detection Debian's abseil
// leaves on and with it off (SkipLockCycleDetection, which every process of
// a job calls). Prints nanoseconds per operation and the ratio.
//
//   ninja -C build lock_bench && build/bin/lock_bench
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "common/process_tuning.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Figures {
  double nested_ns;
  double create_ns;
};

// Two threads, each taking an outer and an inner lock of its own `rounds`
// times; then `rounds` mutexes created, locked and destroyed.
Figures Measure(int rounds) {
  Figures f{};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([rounds] {
      absl::Mutex outer, inner;
      for (int i = 0; i < rounds; ++i) {
        absl::MutexLock a(&outer);
        absl::MutexLock b(&inner);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  f.nested_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / rounds;
  start = Clock::now();
  absl::Mutex held;
  for (int i = 0; i < rounds; ++i) {
    absl::MutexLock a(&held);
    auto m = std::make_unique<absl::Mutex>();
    absl::MutexLock b(m.get());
  }
  f.create_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / rounds;
  return f;
}

}  // namespace

int main() {
  constexpr int kRounds = 1000000;
  // Detection on (abseil's default here) first: it cannot be turned on again.
  const Figures on = Measure(kRounds);
  elasticdl::SkipLockCycleDetection();
  const Figures off = Measure(kRounds);
  std::printf(
      "nested lock pair, 2 threads:      %7.1f ns with detection, %7.1f ns without: %.2fx\n",
      on.nested_ns, off.nested_ns, on.nested_ns / off.nested_ns);
  std::printf(
      "mutex made, locked under another: %7.1f ns with detection, %7.1f ns without: %.2fx\n",
      on.create_ns, off.create_ns, on.create_ns / off.create_ns);
  return 0;
}
