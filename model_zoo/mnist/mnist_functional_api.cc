// MNIST with the functional API: seed 001's mnist_functional_api.py in C++.
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

std::shared_ptr<Model> custom_model() {
  auto inputs = Input("image", {28, 28});
  nn::Sequential x;
  x->push_back(Reshape({1, 28, 28}));
  x->push_back(nn::Conv2d(nn::Conv2dOptions(1, 32, 3)));
  x->push_back(nn::ReLU());
  x->push_back(nn::Conv2d(nn::Conv2dOptions(32, 64, 3)));
  x->push_back(nn::ReLU());
  x->push_back(nn::BatchNorm2d(64));
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  x->push_back(nn::Dropout(0.25));
  x->push_back(nn::Flatten());
  x->push_back(nn::Linear(9216, 10));
  return Functional(inputs, x);
}
ELASTICDL_REGISTER(custom_model);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  auto parse_data = [mode](const Record& record) -> StatusOr<Example> {
    FeatureSpecMap feature_description = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)}};
    if (mode != Mode::PREDICTION) {
      feature_description["label"] = FixedLenFeature({1}, torch::kInt64);
    }
    EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, feature_description));
    Example example;
    example.features = {{"image", r["image"] / 255.0}};
    if (mode != Mode::PREDICTION) example.labels = r["label"];
    return example;
  };

  auto parsed = dataset.map(parse_data);
  if (mode != Mode::PREDICTION) parsed = parsed.shuffle(1024);
  return parsed;
}
ELASTICDL_REGISTER(dataset_fn);

// The main job's recipe (scripts/main_job.sh: --dataset_fn=standardized_dataset_fn
// --optimizer=adam_optimizer). The seed's (pixels / 255, SGD 0.1) spikes early, with losses
// above 20, and its BatchNorm statistics then lag the weights: when several workers'
// minibatches are averaged per step, one epoch can end anywhere from 41 % to 85 %
// (docs/benchmarks.md, "Accuracy"). Pixels standardized with Fashion-MNIST's mean and
// standard deviation, and Adam, train steadily for any number of workers.
Dataset<Example> standardized_dataset_fn(Dataset<Record> dataset, Mode mode) {
  return dataset_fn(std::move(dataset), mode).map([](Example example) {
    example.features["image"] = (example.features["image"] - 0.2860) / 0.3530;
    return example;
  });
}
ELASTICDL_REGISTER(standardized_dataset_fn);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::nn::functional::cross_entropy(predictions, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::SGDOptions(0.1); }
ELASTICDL_REGISTER(optimizer);

OptimizerSpec adam_optimizer() { return torch::optim::AdamOptions(1e-3); }
ELASTICDL_REGISTER(adam_optimizer);

MetricMap eval_metrics_fn() {
  return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
             return torch::eq(torch::argmax(predictions, 1), labels.flatten());
           }}};
}
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
