// MNIST in seed 002's model-file API: a model, input_fn over a batch of
// parsed records, the schemas feature_columns() and label_columns(),
// loss(output, labels) and optimizer(lr = 0.1).
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

std::shared_ptr<Model> model() {
  auto inputs = Input("image", {1, 28, 28});
  nn::Sequential x;
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
ELASTICDL_REGISTER(model);

// A batch of records, each with every feature of its tf.train.Example
// (`elasticdl data mnist` writes image: 784 floats 0-255, label: one int64).
// Prediction's records have no label.
InputFnResult input_fn(const std::vector<Features>& records) {
  std::vector<torch::Tensor> image_list;
  std::vector<torch::Tensor> label_list;
  // deserialize
  for (const Features& r : records) {
    torch::Tensor image = r["image"].reshape({28, 28});
    image = image / 255;
    image_list.push_back(image);
    if (r.tensors.count("label") != 0) label_list.push_back(r["label"]);
  }
  // batching
  torch::Tensor images = torch::stack(image_list);  // [batch, 28, 28]
  torch::Tensor labels = label_list.empty() ? torch::Tensor() : torch::cat(label_list);
  return {{{"image", images}}, labels};
}
ELASTICDL_REGISTER(input_fn);

// The model's one input: input_fn's images become [batch, 1, 28, 28].
std::vector<NumericColumn> feature_columns() {
  return {numeric_column("image", torch::kFloat32, {1, 28, 28})};
}
ELASTICDL_REGISTER(feature_columns);

std::vector<NumericColumn> label_columns() { return {numeric_column("label", torch::kInt64, {1})}; }
ELASTICDL_REGISTER(label_columns);

// Seed 002's order: the model's output first.
torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) {
  return nn::functional::cross_entropy(output, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer(double lr = 0.1) { return torch::optim::SGDOptions(lr); }
ELASTICDL_REGISTER(optimizer);

// Optional, as in seed 001: (labels, predictions).
MetricMap eval_metrics_fn() {
  return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
             return torch::eq(torch::argmax(predictions, 1), labels.flatten());
           }}};
}
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
