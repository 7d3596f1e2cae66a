// CIFAR-10 by subclassing Model: the original ElasticDL's cifar10_subclass.py
// in C++. Records as `elasticdl data cifar10` writes them: `image`
// float[32, 32, 3] holding 0-255 (HWC), `label` int64[1].
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Keras' Conv2D(filters, kernel_size=(3, 3), padding='same', use_bias=True).
nn::Conv2dOptions Conv2D(int64_t in, int64_t filters) {
  return nn::Conv2dOptions(in, filters, 3).padding(1).bias(true);
}

// Keras' BatchNormalization(epsilon=1e-06, momentum=0.9): Keras keeps 0.9 of
// the running statistics per step, LibTorch's momentum is the new batch's 0.1.
nn::BatchNorm2dOptions BatchNormalization(int64_t features) {
  return nn::BatchNorm2dOptions(features).eps(1e-06).momentum(0.1);
}

class Cifar10Model : public Model {
 public:
  Cifar10Model()
      : conv_1_(register_module("conv_1", nn::Conv2d(Conv2D(3, 32)))),
        bn_1_(register_module("bn_1", nn::BatchNorm2d(BatchNormalization(32)))),
        conv_2_(register_module("conv_2", nn::Conv2d(Conv2D(32, 32)))),
        bn_2_(register_module("bn_2", nn::BatchNorm2d(BatchNormalization(32)))),
        max_pool_1_(register_module("max_pool_1", nn::MaxPool2d(nn::MaxPool2dOptions(2)))),
        dropout_1_(register_module("dropout_1", nn::Dropout(0.2))),
        conv_3_(register_module("conv_3", nn::Conv2d(Conv2D(32, 64)))),
        bn_3_(register_module("bn_3", nn::BatchNorm2d(BatchNormalization(64)))),
        conv_4_(register_module("conv_4", nn::Conv2d(Conv2D(64, 64)))),
        bn_4_(register_module("bn_4", nn::BatchNorm2d(BatchNormalization(64)))),
        max_pool_2_(register_module("max_pool_2", nn::MaxPool2d(nn::MaxPool2dOptions(2)))),
        dropout_2_(register_module("dropout_2", nn::Dropout(0.3))),
        conv_5_(register_module("conv_5", nn::Conv2d(Conv2D(64, 128)))),
        bn_5_(register_module("bn_5", nn::BatchNorm2d(BatchNormalization(128)))),
        conv_6_(register_module("conv_6", nn::Conv2d(Conv2D(128, 128)))),
        bn_6_(register_module("bn_6", nn::BatchNorm2d(BatchNormalization(128)))),
        max_pool_3_(register_module("max_pool_3", nn::MaxPool2d(nn::MaxPool2dOptions(2)))),
        dropout_3_(register_module("dropout_3", nn::Dropout(0.4))),
        flatten_1_(register_module("flatten_1", nn::Flatten())),
        dense_1_(register_module("dense_1", nn::Linear(128 * 4 * 4, 10))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    // Keras convolves channels-last images; LibTorch wants [N, C, H, W].
    auto x = inputs.at("image").permute({0, 3, 1, 2});
    x = conv_1_(x);
    x = bn_1_(x);
    x = torch::relu(x);
    x = conv_2_(x);
    x = bn_2_(x);
    x = torch::relu(x);
    x = max_pool_1_(x);
    x = dropout_1_(x);
    x = conv_3_(x);
    x = bn_3_(x);
    x = torch::relu(x);
    x = conv_4_(x);
    x = bn_4_(x);
    x = torch::relu(x);
    x = max_pool_2_(x);
    x = dropout_2_(x);
    x = conv_5_(x);
    x = bn_5_(x);
    x = torch::relu(x);
    x = conv_6_(x);
    x = bn_6_(x);
    x = torch::relu(x);
    x = max_pool_3_(x);
    x = dropout_3_(x);
    x = flatten_1_(x);
    // The original applies a softmax here and then takes the softmax
    // cross-entropy of the probabilities; this returns the logits (the
    // predicted class, argmax, is the same).
    return dense_1_(x);
  }

 private:
  nn::Conv2d conv_1_;
  nn::BatchNorm2d bn_1_;
  nn::Conv2d conv_2_;
  nn::BatchNorm2d bn_2_;
  nn::MaxPool2d max_pool_1_;
  nn::Dropout dropout_1_;
  nn::Conv2d conv_3_;
  nn::BatchNorm2d bn_3_;
  nn::Conv2d conv_4_;
  nn::BatchNorm2d bn_4_;
  nn::MaxPool2d max_pool_2_;
  nn::Dropout dropout_2_;
  nn::Conv2d conv_5_;
  nn::BatchNorm2d bn_5_;
  nn::Conv2d conv_6_;
  nn::BatchNorm2d bn_6_;
  nn::MaxPool2d max_pool_3_;
  nn::Dropout dropout_3_;
  nn::Flatten flatten_1_;
  nn::Linear dense_1_;
};
ELASTICDL_REGISTER_MODEL(Cifar10Model);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  auto parse_data = [mode](const Record& record) -> StatusOr<Example> {
    FeatureSpecMap feature_description = {{"image", FixedLenFeature({32, 32, 3}, torch::kFloat32)}};
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
  if (mode == Mode::TRAINING) parsed = parsed.shuffle(1024);
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
