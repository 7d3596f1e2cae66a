#include "common/clock.h"

namespace elasticdl {
namespace {

class SteadyClock final : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const Clock* Clock::Steady() {
  static const SteadyClock clock;
  return &clock;
}

}  // namespace elasticdl
