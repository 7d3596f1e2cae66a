#include "elasticdl/zoo/metric_state.h"

#include <cmath>
#include <limits>

#include "common/strings.h"

namespace elasticdl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "a mean", "an AUC".
const char* KindName(MetricKind kind) { return kind == MetricKind::kAuc ? "an AUC" : "a mean"; }

// Area under the ROC curve from per-bucket counts; see MetricKind::kAuc.
// tp[i] (fp[i]) counts positives (negatives) predicted above threshold i:
// those in buckets >= i.
double AucResult(const std::vector<double>& values) {
  const size_t n = values.size() / 2;
  const double* pos = values.data();
  const double* neg = values.data() + n;
  double total_pos = 0, total_neg = 0;
  for (size_t i = 0; i < n; ++i) {
    total_pos += pos[i];
    total_neg += neg[i];
  }
  if (total_pos == 0 || total_neg == 0) return kNaN;
  // Walk thresholds from the highest down, so tp and fp grow.
  double auc = 0, tp = 0, fp = 0;
  double prev_tpr = 0, prev_fpr = 0;
  for (size_t i = n; i-- > 0;) {
    tp += pos[i];
    fp += neg[i];
    double tpr = tp / total_pos, fpr = fp / total_neg;
    auc += (fpr - prev_fpr) * (tpr + prev_tpr) / 2;
    prev_tpr = tpr;
    prev_fpr = fpr;
  }
  return auc;
}

}  // namespace

Status MergeMetricState(const MetricState& from, MetricState* into) {
  if (into->values.empty()) {
    *into = from;
    return Status();
  }
  if (from.values.empty()) return Status();
  if (from.kind != into->kind) {
    return absl::InvalidArgumentError(StrCat("cannot merge ", KindName(from.kind),
                                             " metric state into ", KindName(into->kind), " one"));
  }
  if (from.values.size() != into->values.size()) {
    return absl::InvalidArgumentError(StrCat("cannot merge ", KindName(from.kind),
                                             " metric state of ", from.values.size(),
                                             " values into one of ", into->values.size()));
  }
  for (size_t i = 0; i < from.values.size(); ++i) into->values[i] += from.values[i];
  return Status();
}

Status MergeMetricStates(const MetricStates& from, MetricStates* into) {
  for (const auto& [name, state] : from) {
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(MergeMetricState(state, &(*into)[name]),
                                     StrCat("metric '", name, "'"));
  }
  return Status();
}

double MetricResult(const MetricState& state) {
  switch (state.kind) {
    case MetricKind::kMean:
      if (state.values.size() != 2 || state.values[1] == 0) return kNaN;
      return state.values[0] / state.values[1];
    case MetricKind::kAuc:
      if (state.values.size() < 4 || state.values.size() % 2 != 0) return kNaN;
      return AucResult(state.values);
  }
  return kNaN;
}

}  // namespace elasticdl
