// Regressors for SQL users: `TRAIN regressor.DNN` and `TRAIN regressor.Linear`.
// They predict the label in its own units; the loss is the mean squared
// error in units of the label's standard deviation, so that one learning
// rate suits salaries and fractions alike. tabular.h lists the params.
#include "tabular.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
using sql_models::TabularNetwork;

namespace {

// The network's output, scaled back to the label's units.
class Regressor : public Model {
 public:
  Regressor(const Params& params, bool deep)
      : network_(register_module("network", std::make_shared<TabularNetwork>(params, 1, deep))) {
    label_mean_ = register_buffer(
        "label_mean", torch::tensor(params.get<double>("label_mean", 0.0), torch::kFloat32));
    label_std_ = register_buffer("label_std", torch::tensor(LabelStd(params), torch::kFloat32));
  }

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    return network_->forward(inputs, training) * label_std_ + label_mean_;
  }

  static double LabelStd(const Params& params) {
    const double s = params.get<double>("label_std", 1.0);
    return s > 0 ? s : 1.0;
  }

 private:
  std::shared_ptr<TabularNetwork> network_;
  torch::Tensor label_mean_, label_std_;
};

std::shared_ptr<Model> DNN(const Params& params) {
  return std::make_shared<Regressor>(params, /*deep=*/true);
}
ELASTICDL_REGISTER(DNN);

std::shared_ptr<Model> Linear(const Params& params) {
  return std::make_shared<Regressor>(params, /*deep=*/false);
}
ELASTICDL_REGISTER(Linear);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode, const Params& params) {
  return sql_models::TabularDataset(std::move(dataset), mode, params, torch::kFloat32);
}
ELASTICDL_REGISTER(dataset_fn);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions,
                   const Params& params) {
  const double s = Regressor::LabelStd(params);
  return torch::mse_loss(predictions.flatten(), labels.flatten()) / (s * s);
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer(const Params& params) { return sql_models::TabularOptimizer(params); }
ELASTICDL_REGISTER(optimizer);

MetricMap eval_metrics_fn() { return {{"mse", MeanSquaredError}, {"mae", MeanAbsoluteError}}; }
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
