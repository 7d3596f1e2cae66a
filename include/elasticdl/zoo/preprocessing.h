// Feature preprocessing for dataset_fns (what ElasticDL's preprocessing
// layers offered): categorical values to embedding ids, numbers to buckets
// or a normalized scale.
//
//   int64_t id = HashBucket(r.bytes.at("C1")[0], /*num_buckets=*/0, /*salt=*/1);
#ifndef ELASTICDL_ZOO_PREPROCESSING_H_
#define ELASTICDL_ZOO_PREPROCESSING_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace elasticdl {

// A stable 64-bit hash of `value` (the same on every machine and run),
// mixed with `salt` so that equal strings of different features differ:
// in [0, num_buckets) when num_buckets > 0, else any non-negative int64 (an
// id for a table without a range).
int64_t HashBucket(std::string_view value, int64_t num_buckets = 0, uint64_t salt = 0);
// The same for an integer-valued categorical feature (a large int id).
int64_t HashBucket(int64_t value, int64_t num_buckets = 0, uint64_t salt = 0);

// Bucket indices of `x` for sorted `boundaries` (b0 < b1 < ...): 0 below
// b0, i for [b(i-1), b(i)), boundaries.size() from the last one up.
torch::Tensor Bucketize(const torch::Tensor& x, const std::vector<double>& boundaries);

// log(1 + max(x, 0)): a heavy-tailed count brought to a trainable scale.
torch::Tensor LogNormalize(const torch::Tensor& x);

// A vocabulary: values to ids 0..size-1 in the order given; anything else
// to `size` (one out-of-vocabulary id), so a table of size + 1 rows holds
// them all.
class Vocabulary {
 public:
  explicit Vocabulary(const std::vector<std::string>& values);
  int64_t Lookup(std::string_view value) const;
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }

 private:
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_PREPROCESSING_H_
