// MNIST as a model class that carries its defaults (seed 003):
// default_loss, default_optimizer, default_input and default_eval_metrics.
// `--model_def=mnist.mnist_class_defaults.MnistModel` alone trains it;
// --input_fn, --loss and --optimizer replace the defaults, e.g.
// `--input_fn=shuffled_input --optimizer=sgd_optimizer`.
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

class MnistModel : public Model {
 public:
  MnistModel()
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3)))),
        batch_norm_(register_module("batch_norm", nn::BatchNorm2d(64))),
        dropout_(register_module("dropout", nn::Dropout(0.25))),
        dense_(register_module("dense", nn::Linear(9216, 10))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    auto x = inputs.at("image").reshape({-1, 1, 28, 28});
    x = torch::relu(conv1_(x));
    x = torch::relu(conv2_(x));
    x = batch_norm_(x);
    x = torch::max_pool2d(x, 2);
    if (training) x = dropout_(x);
    return dense_(x.flatten(1));
  }

  static torch::Tensor default_loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
    return nn::functional::cross_entropy(predictions, labels.flatten());
  }

  static OptimizerSpec default_optimizer() { return torch::optim::AdamOptions(1e-3); }

  // One record (`elasticdl data mnist`'s image and label) in, one example out.
  static StatusOr<Example> default_input(const Record& record, Mode mode) {
    FeatureSpecMap spec = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)}};
    if (mode != Mode::PREDICTION) spec["label"] = FixedLenFeature({1}, torch::kInt64);
    EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, spec));
    Example example({{"image", (r["image"] / 255.0 - kMean) / kStd}});
    if (mode != Mode::PREDICTION) example.labels = r["label"];
    return example;
  }

  static MetricMap default_eval_metrics() {
    return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
               return torch::eq(torch::argmax(predictions, 1), labels.flatten());
             }}};
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::BatchNorm2d batch_norm_;
  nn::Dropout dropout_;
  nn::Linear dense_;
};
ELASTICDL_REGISTER_MODEL(MnistModel);

// What the command line may choose instead of the defaults.

// default_input's examples, shuffled within each task.
Dataset<Example> shuffled_input(Dataset<Record> records, Mode mode) {
  auto examples =
      records.map([mode](const Record& record) { return MnistModel::default_input(record, mode); });
  if (mode == Mode::TRAINING) examples = examples.shuffle(1024);
  return examples;
}
ELASTICDL_REGISTER(shuffled_input);

OptimizerSpec sgd_optimizer() { return torch::optim::SGDOptions(0.05).momentum(0.9); }
ELASTICDL_REGISTER(sgd_optimizer);

}  // namespace
