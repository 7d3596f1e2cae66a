// Classifiers for SQL users: `TRAIN classifier.DNN` and `TRAIN
// classifier.Linear`. The label is the index of the row's class among the
// label's values (`elasticdl sql` maps them both ways); the output holds a
// logit per class. tabular.h lists the params.
#include "tabular.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
using sql_models::TabularNetwork;

namespace {

int64_t NumClasses(const Params& params) {
  const auto n = params.get<int64_t>("num_classes");
  if (n < 2) throw std::invalid_argument("num_classes: a classifier needs at least 2 classes");
  return n;
}

std::shared_ptr<Model> DNN(const Params& params) {
  return std::make_shared<TabularNetwork>(params, NumClasses(params), /*deep=*/true);
}
ELASTICDL_REGISTER(DNN);

std::shared_ptr<Model> Linear(const Params& params) {
  return std::make_shared<TabularNetwork>(params, NumClasses(params), /*deep=*/false);
}
ELASTICDL_REGISTER(Linear);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode, const Params& params) {
  return sql_models::TabularDataset(std::move(dataset), mode, params, torch::kInt64);
}
ELASTICDL_REGISTER(dataset_fn);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::nn::functional::cross_entropy(predictions, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer(const Params& params) { return sql_models::TabularOptimizer(params); }
ELASTICDL_REGISTER(optimizer);

MetricMap eval_metrics_fn() { return {{"accuracy", Accuracy}}; }
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
