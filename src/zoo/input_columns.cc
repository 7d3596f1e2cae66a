#include "zoo/input_columns.h"

#include <set>

#include "common/strings.h"

namespace elasticdl {
namespace {

std::string ShapeString(c10::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::string DescribeColumn(const NumericColumn& column) {
  return StrCat(column.key, " ", c10::toString(column.dtype), " ", ShapeString(column.shape));
}

Status ValidateColumns(const std::vector<NumericColumn>& columns, bool labels) {
  std::set<std::string> keys;
  for (const NumericColumn& c : columns) {
    if (c.key.empty()) return absl::InvalidArgumentError("a column has an empty key");
    if (!keys.insert(c.key).second) {
      return absl::InvalidArgumentError(StrCat("column '", c.key, "' appears twice"));
    }
    for (int64_t d : c.shape) {
      if (d <= 0) {
        return absl::InvalidArgumentError(StrCat("column '", c.key, "' has shape ",
                                                 ShapeString(c.shape),
                                                 "; every dimension must be positive"));
      }
    }
  }
  if (columns.empty() || (labels && columns.size() != 1)) {
    return absl::InvalidArgumentError(
        StrCat("returned ", columns.size(), " columns; ",
               labels ? "input_fn returns one labels tensor, described by exactly one column"
                      : "the model needs at least one input"));
  }
  return Status();
}

namespace {

// `t` (`what`) checked against `column` for a batch of `batch` examples and
// reshaped to [batch, column.shape...]; errors say what differs.
StatusOr<torch::Tensor> Conform(const torch::Tensor& t, const std::string& what,
                                const NumericColumn& column, int64_t batch, const char* columns) {
  if (!t.defined()) return absl::InvalidArgumentError(StrCat(what, " is an undefined tensor"));
  if (t.scalar_type() != column.dtype) {
    return absl::InvalidArgumentError(StrCat(what, " is ", c10::toString(t.scalar_type()), "; ",
                                             columns, "() declares ", DescribeColumn(column)));
  }
  if (t.dim() == 0 || t.size(0) != batch) {
    return absl::InvalidArgumentError(StrCat(what, " has shape ", ShapeString(t.sizes()),
                                             "; its first dimension must be the minibatch's ",
                                             batch, " examples"));
  }
  int64_t per_example = 1;
  for (int64_t d : column.shape) per_example *= d;
  if (t.numel() != per_example * batch) {
    return absl::InvalidArgumentError(StrCat(what, " has shape ", ShapeString(t.sizes()), " (",
                                             t.numel() / batch, " values per example); ", columns,
                                             "() declares ", DescribeColumn(column), " (",
                                             per_example, " values)"));
  }
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), column.shape.begin(), column.shape.end());
  return t.reshape(shape);
}

}  // namespace

StatusOr<Example> ApplyColumns(InputFnResult result, const std::vector<NumericColumn>& features,
                               const NumericColumn& label, int64_t batch, Mode mode) {
  FeatureMap& inputs = result.first;
  Example example;
  for (const NumericColumn& column : features) {
    auto it = inputs.find(column.key);
    if (it == inputs.end()) {
      std::vector<std::string> keys;
      for (const auto& [key, value] : inputs) keys.push_back(key);
      return (absl::InvalidArgumentError(fmt::format(
          "returned no model input '{}' that feature_columns() declares ({}); it returned: {}",
          column.key, DescribeColumn(column),
          keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", ")))));
    }
    StatusOr<torch::Tensor> shaped = Conform(it->second, StrCat("model input '", column.key, "'"),
                                             column, batch, "feature_columns");
    if (!shaped.ok()) return (shaped.status());
    example.features.emplace(column.key, std::move(*shaped));
  }
  if (example.features.size() != inputs.size()) {
    std::vector<std::string> declared;
    for (const NumericColumn& c : features) declared.push_back(c.key);
    for (const auto& [key, value] : inputs) {
      if (example.features.count(key) == 0) {
        return (absl::InvalidArgumentError(
            fmt::format("returned model input '{}' that feature_columns() does not declare "
                        "(it declares {})",
                        key, fmt::join(declared, ", "))));
      }
    }
  }
  if (mode != Mode::PREDICTION) {
    if (!result.second.defined()) {
      return (absl::InvalidArgumentError(
          StrCat("returned no labels for a ", mode == Mode::TRAINING ? "training" : "evaluation",
                 " minibatch; label_columns() declares ", DescribeColumn(label))));
    }
    StatusOr<torch::Tensor> labels =
        Conform(result.second, "labels", label, batch, "label_columns");
    if (!labels.ok()) return (labels.status());
    example.labels = std::move(*labels);
  }
  return example;
}

}  // namespace elasticdl
