#include "elasticdl/zoo/preprocessing.h"

#include <ATen/ATen.h>

#include "elasticdl/seed.h"

namespace elasticdl {
namespace {

int64_t ToBucket(uint64_t h, int64_t num_buckets) {
  if (num_buckets > 0) return static_cast<int64_t>(h % static_cast<uint64_t>(num_buckets));
  return static_cast<int64_t>(h >> 1);
}

}  // namespace

int64_t HashBucket(std::string_view value, int64_t num_buckets, uint64_t salt) {
  uint64_t h = 14695981039346656037ull ^ SplitMix64(salt);  // FNV-1a, salted
  for (unsigned char c : value) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return ToBucket(SplitMix64(h), num_buckets);
}

int64_t HashBucket(int64_t value, int64_t num_buckets, uint64_t salt) {
  return ToBucket(SplitMix64(static_cast<uint64_t>(value) ^ SplitMix64(salt ^ 0x5bd1e995ull)),
                  num_buckets);
}

torch::Tensor Bucketize(const torch::Tensor& x, const std::vector<double>& boundaries) {
  torch::Tensor b = torch::tensor(boundaries, torch::kFloat64);
  return torch::bucketize(x.to(torch::kFloat64), b, /*out_int32=*/false, /*right=*/true);
}

torch::Tensor LogNormalize(const torch::Tensor& x) {
  return torch::log1p(x.to(torch::kFloat32).clamp_min(0));
}

Vocabulary::Vocabulary(const std::vector<std::string>& values) {
  for (const std::string& v : values) ids_.emplace(v, static_cast<int64_t>(ids_.size()));
}

int64_t Vocabulary::Lookup(std::string_view value) const {
  auto it = ids_.find(std::string(value));
  return it == ids_.end() ? size() : it->second;
}

}  // namespace elasticdl
