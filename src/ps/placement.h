// Which parameter-server shard owns a dense parameter (a stable hash of its
// name, FNV-1a, 64 bits) and an embedding row (a mix of its id): every
// process agrees without coordination, and a parameter stays put when
// others are added.
#ifndef ELASTICDL_PS_PLACEMENT_H_
#define ELASTICDL_PS_PLACEMENT_H_

#include <cstdint>
#include <string_view>

#include "elasticdl/seed.h"

namespace elasticdl::ps {

inline uint64_t StableHash(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

inline int ShardOf(std::string_view parameter_name, int num_shards) {
  return static_cast<int>(StableHash(parameter_name) % static_cast<uint64_t>(num_shards));
}

// Which shard holds row `id` of an embedding table: the id mixed (so that
// consecutive ids, and ids that are hashes, spread alike), modulo the shards.
inline int RowShardOf(int64_t id, int num_shards) {
  return static_cast<int>(SplitMix64(static_cast<uint64_t>(id)) %
                          static_cast<uint64_t>(num_shards));
}

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PLACEMENT_H_
