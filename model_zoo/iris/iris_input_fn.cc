// A structured-data model in seed 002's style: Fisher's Iris, read from the
// records `elasticdl data convert iris.csv iris.recordio` writes (one float
// per measurement, the species as text), four numeric feature columns and
// an integer label column.
#include <array>
#include <stdexcept>
#include <string>

#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

const std::array<const char*, 4> kFeatures = {"sepal_length", "sepal_width", "petal_length",
                                              "petal_width"};
const std::array<const char*, 3> kClasses = {"setosa", "versicolor", "virginica"};
// Each measurement's mean and standard deviation over the data set (cm).
const std::array<double, 4> kMean = {5.843, 3.057, 3.758, 1.199};
const std::array<double, 4> kStd = {0.825, 0.434, 1.759, 0.760};

class IrisModel : public Model {
 public:
  explicit IrisModel(const Params& params)
      : hidden_(register_module("hidden",
                                nn::Linear(kFeatures.size(), params.get<int>("hidden_units", 16)))),
        output_(register_module(
            "output", nn::Linear(params.get<int>("hidden_units", 16), kClasses.size()))) {}

  // One input per feature column, each [batch, 1].
  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    std::vector<torch::Tensor> columns;
    for (size_t i = 0; i < kFeatures.size(); ++i) {
      columns.push_back((inputs.at(kFeatures[i]) - kMean[i]) / kStd[i]);
    }
    return output_(torch::relu(hidden_(torch::cat(columns, 1))));
  }

 private:
  nn::Linear hidden_, output_;
};

std::shared_ptr<Model> model(const Params& params) { return std::make_shared<IrisModel>(params); }
ELASTICDL_REGISTER(model);

int64_t ClassId(const std::string& name) {
  for (size_t i = 0; i < kClasses.size(); ++i) {
    if (name == kClasses[i]) return static_cast<int64_t>(i);
  }
  throw std::invalid_argument("unknown iris class '" + name + "'");
}

InputFnResult input_fn(const std::vector<Features>& records) {
  FeatureMap inputs;
  for (const char* key : kFeatures) {
    std::vector<torch::Tensor> column;
    for (const Features& r : records) column.push_back(r[key]);
    inputs[key] = torch::cat(column);  // [batch]
  }
  std::vector<int64_t> labels;
  for (const Features& r : records) {
    auto it = r.bytes.find("class");
    if (it != r.bytes.end()) labels.push_back(ClassId(it->second.at(0)));
  }
  if (labels.empty()) return {inputs, torch::Tensor()};  // prediction
  return {inputs, torch::tensor(labels)};
}
ELASTICDL_REGISTER(input_fn);

std::vector<NumericColumn> feature_columns() {
  std::vector<NumericColumn> columns;
  for (const char* key : kFeatures) columns.push_back(numeric_column(key, torch::kFloat32, {1}));
  return columns;
}
ELASTICDL_REGISTER(feature_columns);

std::vector<NumericColumn> label_columns() { return {numeric_column("class", torch::kInt64)}; }
ELASTICDL_REGISTER(label_columns);

torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) {
  return nn::functional::cross_entropy(output, labels.flatten());
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer(double lr = 0.1) { return torch::optim::SGDOptions(lr); }
ELASTICDL_REGISTER(optimizer);

MetricMap eval_metrics_fn() {
  return {{"accuracy", [](const torch::Tensor& labels, const torch::Tensor& predictions) {
             return torch::eq(torch::argmax(predictions, 1), labels.flatten());
           }}};
}
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
