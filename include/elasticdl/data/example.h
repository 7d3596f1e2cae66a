// Parsing tf.train.Example records into LibTorch tensors, the C++ form of
// tf.io.parse_single_example / tf.io.parse_example with FixedLenFeature and
// VarLenFeature specs:
//
//   const FeatureSpecMap spec = {
//       {"image", FixedLenFeature({28, 28}, torch::kFloat32)},
//       {"label", FixedLenFeature({1}, torch::kInt64)},
//   };
//   EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record, spec));
//   torch::Tensor image = r["image"] / 255.0;
//
// float_list features become float32 tensors, int64_list features int64
// tensors, bytes_list features strings. A record that lacks a fixed-length
// feature without a default, holds the wrong kind of list, or the wrong
// number of values is INVALID_ARGUMENT naming the feature (and, for batches,
// the record); malformed protobuf bytes are DATA_LOSS.
#ifndef ELASTICDL_DATA_EXAMPLE_H_
#define ELASTICDL_DATA_EXAMPLE_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

// What a feature's values are, and how they come out.
struct FeatureSpec {
  enum class Type { kFloat32, kInt64, kBytes };

  Type type = Type::kFloat32;
  // Fixed-length features have a shape; variable-length ones do not.
  bool fixed_length = true;
  std::vector<int64_t> shape;
  // Fixed-length only: used when a record lacks the feature. Numeric defaults
  // hold either one value (broadcast) or one per element.
  std::optional<torch::Tensor> default_value;
  std::optional<std::vector<std::string>> default_bytes;
  // Why the spec cannot be used (set by the factories below, e.g. for an
  // unsupported dtype); reported by ValidateFeatureSpec. Empty if usable.
  std::string invalid;

  // Number of values a fixed-length feature must hold (product of shape).
  int64_t num_elements() const;
};

// A feature of `shape` whose values are float32 (torch::kFloat32, from a
// float_list) or int64 (torch::kInt64, from an int64_list).
FeatureSpec FixedLenFeature(std::vector<int64_t> shape, torch::Dtype dtype,
                            std::optional<torch::Tensor> default_value = std::nullopt);
// A fixed-length bytes_list feature.
FeatureSpec FixedLenBytesFeature(
    std::vector<int64_t> shape,
    std::optional<std::vector<std::string>> default_value = std::nullopt);
// Any number of values (zero if the feature is absent).
FeatureSpec VarLenFeature(torch::Dtype dtype);
FeatureSpec VarLenBytesFeature();

using FeatureSpecMap = std::map<std::string, FeatureSpec>;
using FeatureMap = std::map<std::string, torch::Tensor>;

// Parsed features: numeric ones as tensors, bytes ones as strings.
struct Features {
  FeatureMap tensors;
  std::map<std::string, std::vector<std::string>> bytes;

  // The tensor called `name`; throws std::out_of_range naming it if absent.
  const torch::Tensor& operator[](const std::string& name) const;
};

// Checks a spec once: dtypes, shapes, default sizes. INVALID_ARGUMENT naming
// the feature.
Status ValidateFeatureSpec(const FeatureSpecMap& spec);

// One record. Fixed-length features have exactly their spec's shape;
// variable-length ones are 1-D.
StatusOr<Features> ParseExample(std::string_view record, const FeatureSpecMap& spec);

// Every feature of one record, without a spec (what seed 002's input_fn
// receives): a float_list as a 1-D float32 tensor, an int64_list as a 1-D
// int64 tensor, a bytes_list as strings. Malformed bytes are DATA_LOSS.
StatusOr<Features> ParseAllFeatures(std::string_view record);

// A batch of records. Fixed-length features get a leading batch dimension;
// variable-length numeric ones become sparse COO tensors of shape
// [batch, longest] (as tf.io.parse_example's SparseTensor); bytes features
// are flattened row-major (variable-length bytes are not supported in
// batches). Errors name the record's position in `records`.
StatusOr<Features> ParseExampleBatch(const std::vector<std::string_view>& records,
                                     const FeatureSpecMap& spec);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_EXAMPLE_H_
