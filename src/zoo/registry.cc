#include "elasticdl/zoo/registry.h"

namespace elasticdl {

const char* EntryKindName(EntryKind kind) {
  switch (kind) {
    case EntryKind::kModel:
      return "model";
    case EntryKind::kDatasetFn:
      return "dataset_fn";
    case EntryKind::kLoss:
      return "loss";
    case EntryKind::kOptimizer:
      return "optimizer";
    case EntryKind::kEvalMetricsFn:
      return "eval_metrics_fn";
    case EntryKind::kInputFn:
      return "input_fn";
    case EntryKind::kColumns:
      return "feature_columns/label_columns";
    case EntryKind::kLearningRateSchedule:
      return "learning_rate_schedule";
    case EntryKind::kTrial:
      return "trial";
  }
  return "unknown";
}

}  // namespace elasticdl
