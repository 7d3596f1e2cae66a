// A small CNN for Fashion-MNIST, on the records `elasticdl data mnist` writes
// (image: float [28, 28] holding 0-255; label: int64 [1], the class 0-9).
// One epoch over 2000 images takes seconds and reaches about 0.7 accuracy.
//
// A model file registers entries, one line each, that a job names:
//
//   custom_model     the model: --model_def=mnist.model.custom_model
//   dataset_fn       a task's records -> examples (features and labels)
//   loss             (labels, predictions) -> one value to minimize
//   optimizer        what the parameter servers apply to the gradients
//   eval_metrics_fn  what evaluation reports
//
// --dataset_fn, --loss, --optimizer and --eval_metrics_fn default to these
// names; give one of them to use another entry (e.g. a second optimizer
// registered below). Edit this file and train again: only it compiles.
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

// Layers applied in order to the feature "image" of a batch ([batch, 28, 28]);
// the output holds one logit per class. (A Model subclass with
// forward(inputs, training) is the other way to write a model.)
std::shared_ptr<Model> custom_model() {
  auto inputs = Input("image", {28, 28});
  nn::Sequential x;
  x->push_back(Reshape({1, 28, 28}));
  x->push_back(nn::Conv2d(nn::Conv2dOptions(1, 16, 3)));  // [16, 26, 26]
  x->push_back(nn::ReLU());
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));    // [16, 13, 13]
  x->push_back(nn::Conv2d(nn::Conv2dOptions(16, 32, 3)));  // [32, 11, 11]
  x->push_back(nn::ReLU());
  x->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));  // [32, 5, 5]
  x->push_back(nn::Flatten());
  x->push_back(nn::Linear(32 * 5 * 5, 10));
  return Functional(inputs, x);
}
ELASTICDL_REGISTER(custom_model);

// Called once per task with its records; returns one example per record
// (the worker batches them). In PREDICTION records have no label.
Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  auto parse = [mode](const Record& record) -> StatusOr<Example> {
    FeatureSpecMap spec = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)}};
    if (mode != Mode::PREDICTION) spec["label"] = FixedLenFeature({1}, torch::kInt64);
    EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, spec));
    Example example({{"image", (r["image"] / 255.0 - kMean) / kStd}});
    if (mode != Mode::PREDICTION) example.labels = r["label"];
    return example;
  };
  auto examples = dataset.map(parse);
  if (mode == Mode::TRAINING) examples = examples.shuffle(1024);
  return examples;
}
ELASTICDL_REGISTER(dataset_fn);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return nn::functional::cross_entropy(predictions, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::AdamOptions(3e-3); }
ELASTICDL_REGISTER(optimizer);

// Another optimizer, for --optimizer=sgd_optimizer.
OptimizerSpec sgd_optimizer() { return torch::optim::SGDOptions(0.05).momentum(0.9); }
ELASTICDL_REGISTER(sgd_optimizer);

// Metrics are means over the evaluation data, merged exactly across workers.
MetricMap eval_metrics_fn() { return {{"accuracy", Accuracy}}; }
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
