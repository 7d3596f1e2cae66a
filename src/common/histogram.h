// A histogram of durations with fixed bucket bounds, as Prometheus keeps
// them: a count per bucket (not cumulative; the last bucket is above every
// bound), the sum and the count of the observations.
//
// Workers, parameter servers and the dashboard share LatencyBounds(), so
// that their histograms add up. Not thread-safe.
#ifndef ELASTICDL_COMMON_HISTOGRAM_H_
#define ELASTICDL_COMMON_HISTOGRAM_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace elasticdl {

// Upper bounds in seconds: 1 ms to 10 s. A change of these changes what the
// event log's histograms mean.
inline const std::vector<double>& LatencyBounds() {
  static const std::vector<double> bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10};
  return bounds;
}

struct Histogram {
  explicit Histogram(const std::vector<double>& upper_bounds = LatencyBounds())
      : bounds(upper_bounds), counts(upper_bounds.size() + 1, 0) {}

  void Observe(double value) {
    const size_t bucket =
        static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
    ++counts[bucket];
    sum += value;
    ++count;
  }
  // Adds `other`'s observations; false (and nothing added) when its bounds
  // differ.
  bool Merge(const Histogram& other) {
    if (other.bounds != bounds || other.counts.size() != counts.size()) return false;
    for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
    sum += other.sum;
    count += other.count;
    return true;
  }

  std::vector<double> bounds;
  std::vector<int64_t> counts;  // bounds.size() + 1
  double sum = 0;
  int64_t count = 0;
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_HISTOGRAM_H_
