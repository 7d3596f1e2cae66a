// Evaluation metrics whose states merge exactly across workers (counts and
// sums, never raw outputs), the C++ form of seed 001's eval_metrics_fn:
//
//   MetricMap eval_metrics_fn() {
//     return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
//                return torch::eq(torch::argmax(predictions, 1), labels.flatten());
//              }}};
//   }
//
// A function of (labels, predictions) returning one value per example is the
// mean of those values. Built-in metrics: Accuracy, MeanSquaredError,
// MeanAbsoluteError, AUC.
#ifndef ELASTICDL_ZOO_METRICS_H_
#define ELASTICDL_ZOO_METRICS_H_

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "elasticdl/zoo/metric_state.h"

namespace elasticdl {

// One metric being accumulated over batches. Not thread-safe.
class Metric {
 public:
  virtual ~Metric() = default;
  // Adds one batch.
  virtual void Update(const torch::Tensor& labels, const torch::Tensor& predictions) = 0;
  // What has been accumulated, in a form that merges by addition.
  virtual MetricState state() const = 0;
};

// The mean over examples of fn(labels, predictions), which returns one value
// (or a boolean) per example, or one per value of the labels or of the
// predictions; any other number of values is an error naming the shapes.
class MeanMetric : public Metric {
 public:
  using Fn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
  explicit MeanMetric(Fn fn) : fn_(std::move(fn)) {}
  void Update(const torch::Tensor& labels, const torch::Tensor& predictions) override;
  MetricState state() const override;

 private:
  Fn fn_;
  double sum_ = 0;
  double count_ = 0;
};

// Fraction of examples whose argmax over classes equals the integer label.
// With a single output column, a prediction >= 0.5 means class 1.
std::unique_ptr<Metric> Accuracy();
// Mean of (prediction - label)^2 and of |prediction - label| over all output
// values; labels and predictions hold the same number of values.
std::unique_ptr<Metric> MeanSquaredError();
std::unique_ptr<Metric> MeanAbsoluteError();
// Area under the ROC curve of binary labels (> 0.5 is positive) and
// probabilities (clamped to [0, 1]), from histograms over `num_thresholds`
// buckets (as tf.keras.metrics.AUC; see MetricKind::kAuc). Update throws
// c10::Error when labels and predictions differ in size.
std::unique_ptr<Metric> AUC(int num_thresholds = 200);

// How eval_metrics_fn names a metric: a per-example function (mean) or a
// factory of a Metric such as `Accuracy` or `[] { return AUC(100); }`.
class MetricSpec {
 public:
  template <typename F, typename = std::enable_if_t<
                            std::is_invocable_r_v<torch::Tensor, F, const torch::Tensor&,
                                                  const torch::Tensor&>>>
  MetricSpec(F fn)  // NOLINT(google-explicit-constructor): reads like Python
      : make_([fn]() -> std::unique_ptr<Metric> { return std::make_unique<MeanMetric>(fn); }) {}

  template <typename F,
            typename = std::enable_if_t<std::is_invocable_r_v<std::unique_ptr<Metric>, F>>,
            typename = void>
  MetricSpec(F factory)  // NOLINT(google-explicit-constructor)
      : make_(std::move(factory)) {}

  std::unique_ptr<Metric> Make() const { return make_(); }

 private:
  std::function<std::unique_ptr<Metric>()> make_;
};

using MetricMap = std::map<std::string, MetricSpec>;

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_METRICS_H_
