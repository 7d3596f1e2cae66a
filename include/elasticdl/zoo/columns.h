// Seed 002's model file: instead of a dataset_fn, a file registers
//
//   InputFnResult input_fn(const std::vector<Features>& records);  // a batch in,
//                                                                   // (model_inputs, labels) out
//   std::vector<NumericColumn> feature_columns();  // the schema of model_inputs
//   std::vector<NumericColumn> label_columns();    // the schema of labels
//   torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels);
//   OptimizerSpec optimizer(double lr = 0.1);
//
// The worker parses each record of a minibatch into Features (every feature
// of the tf.train.Example, see ParseAllFeatures) and calls input_fn once per
// minibatch. Its outputs are then checked against the columns: every feature
// column's key must be in model_inputs with the column's dtype and, per
// example, the column's number of elements; the model receives each input
// reshaped to [batch, shape...] (tf.feature_column's input layer). Likewise
// the labels against the one label column. A mismatch is an error naming
// the entry, the key, and the shapes on both sides.
//
// A file is read as seed 002's when it registers input_fn, feature_columns
// or label_columns; then its loss takes (output, labels), the reverse of
// seed 001's (labels, predictions). A file may not also register a
// dataset_fn.
#ifndef ELASTICDL_ZOO_COLUMNS_H_
#define ELASTICDL_ZOO_COLUMNS_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/data/example.h"

namespace elasticdl {

// tf.feature_column.numeric_column: a named tensor of `dtype` whose every
// example holds `shape` (without the batch dimension).
struct NumericColumn {
  std::string key;
  torch::Dtype dtype = torch::kFloat32;
  std::vector<int64_t> shape = {1};
};

inline NumericColumn numeric_column(std::string key, torch::Dtype dtype = torch::kFloat32,
                                    std::vector<int64_t> shape = {1}) {
  return NumericColumn{std::move(key), dtype, std::move(shape)};
}

// What input_fn returns: the model's inputs by key, and the labels (left
// undefined when the records carry none, as in prediction).
using InputFnResult = std::pair<FeatureMap, torch::Tensor>;

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_COLUMNS_H_
