// CIFAR-10 with the functional API: the original ElasticDL's
// cifar10_functional_api.py in C++. Records as `elasticdl data cifar10`
// writes them: `image` float[32, 32, 3] holding 0-255 (HWC), `label` int64[1].
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Keras' Conv2D(filters, kernel_size=(3, 3), padding='same', use_bias=True).
nn::Conv2d Conv2D(int64_t in, int64_t filters) {
  return nn::Conv2d(nn::Conv2dOptions(in, filters, 3).padding(1).bias(true));
}

// Keras' BatchNormalization(epsilon=1e-06, momentum=0.9): Keras keeps 0.9 of
// the running statistics per step, LibTorch's momentum is the new batch's 0.1.
nn::BatchNorm2d BatchNormalization(int64_t features) {
  return nn::BatchNorm2d(nn::BatchNorm2dOptions(features).eps(1e-06).momentum(0.1));
}

std::shared_ptr<Model> custom_model() {
  auto inputs = Input("image", {32, 32, 3});
  nn::Sequential x;
  // Keras convolves channels-last images; LibTorch wants [N, C, H, W].
  x->push_back(nn::Functional([](const torch::Tensor& t) { return t.permute({0, 3, 1, 2}); }));

  x->push_back(Conv2D(3, 32));
  x->push_back(BatchNormalization(32));
  x->push_back(nn::ReLU());
  x->push_back(Conv2D(32, 32));
  x->push_back(BatchNormalization(32));
  x->push_back(nn::ReLU());
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  x->push_back(nn::Dropout(0.2));

  x->push_back(Conv2D(32, 64));
  x->push_back(BatchNormalization(64));
  x->push_back(nn::ReLU());
  x->push_back(Conv2D(64, 64));
  x->push_back(BatchNormalization(64));
  x->push_back(nn::ReLU());
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  x->push_back(nn::Dropout(0.3));

  x->push_back(Conv2D(64, 128));
  x->push_back(BatchNormalization(128));
  x->push_back(nn::ReLU());
  x->push_back(Conv2D(128, 128));
  x->push_back(BatchNormalization(128));
  x->push_back(nn::ReLU());
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  x->push_back(nn::Dropout(0.4));

  x->push_back(nn::Flatten());
  // The original ends in a softmax and then takes the softmax cross-entropy
  // of those probabilities as logits; this outputs the logits (the predicted
  // class, argmax, is the same).
  x->push_back(nn::Linear(128 * 4 * 4, 10));
  return Functional(inputs, x);
}
ELASTICDL_REGISTER(custom_model);

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
