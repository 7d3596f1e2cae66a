// A Clock that moves only when a test advances it.
#ifndef ELASTICDL_TESTING_MANUAL_CLOCK_H_
#define ELASTICDL_TESTING_MANUAL_CLOCK_H_

#include <atomic>
#include <chrono>

#include "common/clock.h"

namespace elasticdl::testing {

class ManualClock final : public Clock {
 public:
  using duration = std::chrono::steady_clock::duration;

  time_point Now() const override { return time_point(duration(ticks_.load())); }
  void Advance(duration d) { ticks_ += d.count(); }

 private:
  // Starts where the steady clock is, so that times from both compare.
  std::atomic<duration::rep> ticks_{std::chrono::steady_clock::now().time_since_epoch().count()};
};

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_MANUAL_CLOCK_H_
