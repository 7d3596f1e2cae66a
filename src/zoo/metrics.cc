#include "elasticdl/zoo/metrics.h"

#include <c10/util/Exception.h>
#include <torch/torch.h>

namespace elasticdl {
namespace {

// Labels and predictions as flat double tensors of one value per element.
std::pair<torch::Tensor, torch::Tensor> Flat(const torch::Tensor& labels,
                                             const torch::Tensor& predictions) {
  torch::Tensor l = labels.detach().flatten().to(torch::kCPU, torch::kFloat64);
  torch::Tensor p = predictions.detach().flatten().to(torch::kCPU, torch::kFloat64);
  TORCH_CHECK(l.numel() == p.numel(), "labels have ", l.numel(), " values but predictions ",
              p.numel());
  return {l, p};
}

class AucMetric final : public Metric {
 public:
  explicit AucMetric(int num_thresholds)
      : num_thresholds_(num_thresholds), counts_(2 * static_cast<size_t>(num_thresholds)) {
    TORCH_CHECK(num_thresholds > 1, "AUC needs num_thresholds > 1, got ", num_thresholds);
  }

  void Update(const torch::Tensor& labels, const torch::Tensor& predictions) override {
    auto [l, p] = Flat(labels, predictions);
    torch::Tensor bucket =
        (torch::ceil(p.clamp(0, 1) * (num_thresholds_ - 1)) - 1).clamp_min(0).to(torch::kLong);
    torch::Tensor positive = l.gt(0.5);
    torch::Tensor pos = torch::bincount(bucket.masked_select(positive), {}, num_thresholds_);
    torch::Tensor neg = torch::bincount(bucket.masked_select(~positive), {}, num_thresholds_);
    auto pos_a = pos.accessor<int64_t, 1>();
    auto neg_a = neg.accessor<int64_t, 1>();
    for (int i = 0; i < num_thresholds_; ++i) {
      counts_[i] += static_cast<double>(pos_a[i]);
      counts_[num_thresholds_ + i] += static_cast<double>(neg_a[i]);
    }
  }

  MetricState state() const override { return {MetricKind::kAuc, counts_}; }

 private:
  int num_thresholds_;
  std::vector<double> counts_;  // see MetricKind::kAuc
};

}  // namespace

void MeanMetric::Update(const torch::Tensor& labels, const torch::Tensor& predictions) {
  torch::Tensor values = fn_(labels, predictions).detach();
  // One value per example, or one per value of the labels or of the
  // predictions (the squared error of every output). Anything else would
  // average the wrong thing without a word: a minibatch's mean, or a [B]
  // argmax compared with [B, 1] labels, which broadcasts to [B, B] (told
  // apart from one value per output only where B is not the number of
  // outputs).
  const torch::Tensor& first = labels.defined() && labels.dim() > 0 ? labels : predictions;
  const int64_t examples = first.defined() && first.dim() > 0 ? first.size(0) : 1;
  const bool shaped = values.numel() == examples ||
                      (labels.defined() && values.numel() == labels.numel()) ||
                      (predictions.defined() && values.numel() == predictions.numel());
  TORCH_CHECK(shaped, "gave ", values.numel(), " values (shape ", values.sizes(),
              ") for a minibatch of ", examples, " examples (labels of shape ",
              labels.defined() ? labels.sizes() : c10::IntArrayRef{}, ", predictions of shape ",
              predictions.defined() ? predictions.sizes() : c10::IntArrayRef{},
              "); expected one value per example",
              values.numel() == 1 ? ": return the values, not their mean" : "",
              examples > 1 && values.numel() == examples * examples
                  ? ": a [B] tensor compared with [B, 1] labels broadcasts to [B, B]; flatten the "
                    "labels first (labels.view(-1))"
                  : "");
  values = values.to(torch::kCPU, torch::kFloat64);
  sum_ += values.sum().item<double>();
  count_ += static_cast<double>(values.numel());
}

MetricState MeanMetric::state() const { return {MetricKind::kMean, {sum_, count_}}; }

std::unique_ptr<Metric> Accuracy() {
  return std::make_unique<MeanMetric>(
      [](const torch::Tensor& labels, const torch::Tensor& predictions) {
        torch::Tensor classes = predictions.dim() == 2 && predictions.size(1) > 1
                                    ? predictions.argmax(1)
                                    : predictions.flatten().ge(0.5).to(torch::kLong);
        torch::Tensor truth = labels.flatten().to(torch::kLong);
        TORCH_CHECK(classes.numel() == truth.numel(), "accuracy: ", truth.numel(), " labels for ",
                    classes.numel(), " predictions");
        return classes.eq(truth);
      });
}

std::unique_ptr<Metric> MeanSquaredError() {
  return std::make_unique<MeanMetric>(
      [](const torch::Tensor& labels, const torch::Tensor& predictions) {
        auto [l, p] = Flat(labels, predictions);
        return (p - l).square();
      });
}

std::unique_ptr<Metric> MeanAbsoluteError() {
  return std::make_unique<MeanMetric>(
      [](const torch::Tensor& labels, const torch::Tensor& predictions) {
        auto [l, p] = Flat(labels, predictions);
        return (p - l).abs();
      });
}

std::unique_ptr<Metric> AUC(int num_thresholds) {
  return std::make_unique<AucMetric>(num_thresholds);
}

}  // namespace elasticdl
