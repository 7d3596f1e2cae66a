// The mergeable state of an evaluation metric. Free of LibTorch so the master,
// which merges states from workers and computes results, does not need it.
#ifndef ELASTICDL_ZOO_METRIC_STATE_H_
#define ELASTICDL_ZOO_METRIC_STATE_H_

#include <map>
#include <string>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

enum class MetricKind {
  // values = {sum, count}; result sum / count.
  kMean,
  // values = {positives per bucket..., negatives per bucket...} over
  // num_thresholds buckets; an example with prediction p falls in bucket
  // max(ceil(p * (num_thresholds - 1)) - 1, 0), as in tf.keras.metrics.AUC.
  // Result: the area under the ROC curve, by the trapezoidal rule over the
  // thresholds i / (num_thresholds - 1).
  kAuc,
};

struct MetricState {
  MetricKind kind = MetricKind::kMean;
  std::vector<double> values;
};

using MetricStates = std::map<std::string, MetricState>;

// Adds `from` into `into` (which may be empty). Kinds and sizes must agree.
Status MergeMetricState(const MetricState& from, MetricState* into);
Status MergeMetricStates(const MetricStates& from, MetricStates* into);
// The metric's value; NaN when nothing was accumulated (for AUC: when either
// class is absent, so the curve is undefined).
double MetricResult(const MetricState& state);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_METRIC_STATE_H_
