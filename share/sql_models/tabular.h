// What the models for SQL users share: the records `elasticdl sql` writes
// from a query's rows, and the layers that read them.
//
// Each row is one tf.train.Example:
//   numeric      float[n]   the numeric columns, NULL as the column's mean
//   categorical  int64[k]   the text columns as ids: a vocabulary built from
//                           the data (0: a value it lacks, or NULL) or a hash
//                           bucket
//   label        float[1] (regressor) or int64[1] (classifier: the class's
//                           index among the label's values, sorted)
//
// --params (`elasticdl sql` derives the first ones from the data and adds
// the WITH clause's):
//   numeric_mean, numeric_std  one per numeric column: inputs are standardized
//   categorical_sizes          one per text column: its number of ids
//   label_mean, label_std      regressors: outputs are in the label's units
//   num_classes                classifiers
//   hidden_units               DNN: widths of the ReLU layers (default [64, 32])
//   embedding_dim              DNN: width of a text column's embedding (default 8)
//   dropout                    DNN: after each hidden layer (default 0)
//   optimizer, learning_rate   "adam" (default; 0.01), "adagrad" (0.1) or "sgd" (0.01)
#ifndef ELASTICDL_SQL_MODELS_TABULAR_H_
#define ELASTICDL_SQL_MODELS_TABULAR_H_

#include <string>
#include <vector>

#include "elasticdl/elasticdl.h"

namespace sql_models {

using elasticdl::Dataset;
using elasticdl::Example;
using elasticdl::FeatureMap;
using elasticdl::Mode;
using elasticdl::Params;
using elasticdl::Record;
namespace nn = torch::nn;

inline int64_t NumNumeric(const Params& params) {
  return static_cast<int64_t>(params.get<std::vector<double>>("numeric_mean", {}).size());
}

inline std::vector<int64_t> CategoricalSizes(const Params& params) {
  return params.get<std::vector<int64_t>>("categorical_sizes", {});
}

// The records of the header's layout; `label_dtype` float for regressors,
// int64 for classifiers.
inline Dataset<Example> TabularDataset(Dataset<Record> dataset, Mode mode, const Params& params,
                                       torch::Dtype label_dtype) {
  elasticdl::FeatureSpecMap spec;
  const int64_t n = NumNumeric(params);
  const auto k = static_cast<int64_t>(CategoricalSizes(params).size());
  if (n > 0) spec["numeric"] = elasticdl::FixedLenFeature({n}, torch::kFloat32);
  if (k > 0) spec["categorical"] = elasticdl::FixedLenFeature({k}, torch::kInt64);
  if (mode != Mode::PREDICTION) spec["label"] = elasticdl::FixedLenFeature({1}, label_dtype);
  auto parse = [spec, mode](const Record& record) -> elasticdl::StatusOr<Example> {
    EDL_ASSIGN_OR_RETURN(elasticdl::Features f, elasticdl::ParseExample(record.data, spec));
    Example example;
    example.features = f.tensors;
    example.features.erase("label");
    if (mode != Mode::PREDICTION) example.labels = f["label"];
    return example;
  };
  auto parsed = dataset.map(parse);
  if (mode == Mode::TRAINING) parsed = parsed.shuffle(1024);
  return parsed;
}

inline elasticdl::OptimizerSpec TabularOptimizer(const Params& params) {
  const auto name = params.get<std::string>("optimizer", "adam");
  if (name == "adam") return torch::optim::AdamOptions(params.get<double>("learning_rate", 0.01));
  if (name == "adagrad") {
    return torch::optim::AdagradOptions(params.get<double>("learning_rate", 0.1));
  }
  if (name == "sgd") return torch::optim::SGDOptions(params.get<double>("learning_rate", 0.01));
  throw std::invalid_argument("optimizer='" + name + "': expected adam, adagrad or sgd");
}

// The inputs of a batch as one float matrix: standardized numeric columns
// followed by each text column's embedding.
class TabularInputImpl : public nn::Module {
 public:
  TabularInputImpl(const Params& params, int64_t embedding_dim) {
    auto mean = params.get<std::vector<double>>("numeric_mean", {});
    auto std = params.get<std::vector<double>>("numeric_std", {});
    if (mean.size() != std.size()) {
      throw std::invalid_argument("numeric_mean and numeric_std differ in length");
    }
    for (double& s : std) s = s > 0 ? s : 1.0;  // a constant column stays 0
    mean_ = register_buffer("mean", torch::tensor(mean, torch::kFloat32));
    std_ = register_buffer("std", torch::tensor(std, torch::kFloat32));
    for (int64_t size : CategoricalSizes(params)) {
      if (size <= 0) throw std::invalid_argument("categorical_sizes: sizes must be positive");
      embeddings_.push_back(register_module("embedding_" + std::to_string(embeddings_.size()),
                                            nn::Embedding(size, embedding_dim)));
    }
    width_ = static_cast<int64_t>(mean.size()) +
             static_cast<int64_t>(embeddings_.size()) * embedding_dim;
  }

  torch::Tensor forward(const FeatureMap& inputs) {
    std::vector<torch::Tensor> parts;
    if (mean_.numel() > 0) parts.push_back((inputs.at("numeric") - mean_) / std_);
    if (!embeddings_.empty()) {
      const torch::Tensor& ids = inputs.at("categorical");
      for (size_t i = 0; i < embeddings_.size(); ++i) {
        parts.push_back(embeddings_[i]->forward(ids.select(1, static_cast<int64_t>(i))));
      }
    }
    return torch::cat(parts, 1);
  }

  int64_t width() const { return width_; }

 private:
  torch::Tensor mean_, std_;
  std::vector<nn::Embedding> embeddings_;
  int64_t width_ = 0;
};
TORCH_MODULE(TabularInput);

// Inputs -> ReLU layers of hidden_units -> `outputs` values (DNN), or
// inputs -> `outputs` values (Linear: an embedding of width `outputs` per
// text column is its one-hot weights).
class TabularNetwork : public elasticdl::Model {
 public:
  TabularNetwork(const Params& params, int64_t outputs, bool deep) {
    const int64_t dim = deep ? params.get<int64_t>("embedding_dim", 8) : outputs;
    input_ = register_module("input", TabularInput(params, dim));
    if (input_->width() == 0) throw std::invalid_argument("the model has no input columns");
    int64_t in = input_->width();
    if (deep) {
      const double dropout = params.get<double>("dropout", 0.0);
      for (int64_t units : params.get<std::vector<int64_t>>("hidden_units", {64, 32})) {
        if (units <= 0) throw std::invalid_argument("hidden_units: widths must be positive");
        layers_->push_back(nn::Linear(in, units));
        layers_->push_back(nn::ReLU());
        if (dropout > 0) layers_->push_back(nn::Dropout(dropout));
        in = units;
      }
    }
    layers_->push_back(nn::Linear(in, outputs));
    register_module("layers", layers_);
  }

  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    return layers_->forward(input_->forward(inputs));
  }

 private:
  TabularInput input_{nullptr};
  nn::Sequential layers_;
};

}  // namespace sql_models

#endif  // ELASTICDL_SQL_MODELS_TABULAR_H_
