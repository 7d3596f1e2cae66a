// Monotonic time, passed in where behaviour depends on it (the master's
// leases, its patience with unreachable servers, how often it journals), so
// that tests move time forward instead of sleeping through it.
#ifndef ELASTICDL_COMMON_CLOCK_H_
#define ELASTICDL_COMMON_CLOCK_H_

#include <chrono>

namespace elasticdl {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Thread-safe.
  virtual time_point Now() const = 0;

  // std::chrono::steady_clock; lives as long as the program.
  static const Clock* Steady();
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_CLOCK_H_
