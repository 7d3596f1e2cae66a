// MNIST by subclassing Model: seed 001's mnist_subclass.py in C++.
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

class CustomModel : public Model {
 public:
  CustomModel()
      : reshape_(register_module("reshape", Reshape({1, 28, 28}))),
        conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3)))),
        batch_norm_(register_module("batch_norm", nn::BatchNorm2d(64))),
        maxpooling_(register_module("maxpooling", nn::MaxPool2d(nn::MaxPool2dOptions(2)))),
        dropout_(register_module("dropout", nn::Dropout(0.25))),
        flatten_(register_module("flatten", nn::Flatten())),
        dense_(register_module("dense", nn::Linear(9216, 10))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    auto x = reshape_(inputs.at("image"));
    x = torch::relu(conv1_(x));
    x = torch::relu(conv2_(x));
    x = batch_norm_(x);
    x = maxpooling_(x);
    if (training) {
      x = dropout_(x);
    }
    x = flatten_(x);
    x = dense_(x);
    return x;
  }

 private:
  Reshape reshape_;
  nn::Conv2d conv1_, conv2_;
  nn::BatchNorm2d batch_norm_;
  nn::MaxPool2d maxpooling_;
  nn::Dropout dropout_;
  nn::Flatten flatten_;
  nn::Linear dense_;
};
ELASTICDL_REGISTER_MODEL(CustomModel);

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

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::nn::functional::cross_entropy(predictions, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::SGDOptions(0.1); }
ELASTICDL_REGISTER(optimizer);

MetricMap eval_metrics_fn() {
  return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
             return torch::eq(torch::argmax(predictions, 1), labels.flatten());
           }}};
}
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
