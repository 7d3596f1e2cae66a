// A small multilayer perceptron for rows of numeric columns: the data set
// `elasticdl zoo init` generated (data/train.csv and data/test.csv: the
// features f0, f1, f2, f3 and the class 0, 1 or 2 in `label`), converted to
// records by `elasticdl data convert`, one tf.train.Example per row. Five
// epochs over the 600 training rows take seconds and reach about 0.9
// accuracy.
//
// For a CSV file of your own: name its feature columns in kFeatures and its
// label column in kLabel, set kNumClasses, and standardize columns of other
// scales in dataset_fn (subtract each one's mean, divide by its standard
// deviation).
//
// A model file registers entries, one line each, that a job names:
//
//   custom_model     the model: --model_def=tabular.model.custom_model
//   dataset_fn       a task's records -> examples (features and labels)
//   loss             (labels, predictions) -> one value to minimize
//   optimizer        what the parameter servers apply to the gradients
//   eval_metrics_fn  what evaluation reports
//
// Entries that take `const Params&` read --params, e.g.
// --params="hidden_units=64, learning_rate=0.003".
#include <string>
#include <vector>

#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

const std::vector<std::string> kFeatures = {"f0", "f1", "f2", "f3"};
const std::string kLabel = "label";
constexpr int64_t kNumClasses = 3;

// The feature columns side by side as one input, "features" ([batch, 4]),
// through a hidden layer; the output holds one logit per class.
std::shared_ptr<Model> custom_model(const Params& params) {
  const auto hidden_units = params.get<int64_t>("hidden_units", 32);
  auto inputs = Input("features", {static_cast<int64_t>(kFeatures.size())});
  nn::Sequential x;
  x->push_back(nn::Linear(kFeatures.size(), hidden_units));
  x->push_back(nn::ReLU());
  x->push_back(nn::Linear(hidden_units, kNumClasses));
  return Functional(inputs, x);
}
ELASTICDL_REGISTER(custom_model);

// Called once per task with its records; returns one example per record
// (the worker batches them). In PREDICTION records have no label.
Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  auto parse = [mode](const Record& record) -> StatusOr<Example> {
    FeatureSpecMap spec;
    for (const std::string& name : kFeatures) spec[name] = FixedLenFeature({1}, torch::kFloat32);
    if (mode != Mode::PREDICTION) spec[kLabel] = FixedLenFeature({1}, torch::kInt64);
    EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, spec));
    std::vector<torch::Tensor> columns;
    for (const std::string& name : kFeatures) columns.push_back(r[name]);
    Example example({{"features", torch::cat(columns)}});
    if (mode != Mode::PREDICTION) example.labels = r[kLabel];
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

OptimizerSpec optimizer(const Params& params) {
  return torch::optim::AdamOptions(params.get<double>("learning_rate", 0.01));
}
ELASTICDL_REGISTER(optimizer);

// Metrics are means over the evaluation data, merged exactly across workers.
MetricMap eval_metrics_fn() { return {{"accuracy", Accuracy}}; }
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
