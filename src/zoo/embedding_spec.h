// What the parameter servers are told about a model's Embedding layers.
#ifndef ELASTICDL_ZOO_EMBEDDING_SPEC_H_
#define ELASTICDL_ZOO_EMBEDDING_SPEC_H_

#include <cstdint>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/embedding.h"
#include "elasticdl/zoo/model.h"

namespace elasticdl {

// The table's spec; its initializer is seeded by `job_seed` and the name.
proto::EmbeddingTableSpec TableSpecOf(const EmbeddingOptions& options, uint64_t job_seed);

// The Embedding layers of `model`, in module order. INVALID_ARGUMENT when
// two have the same name and differ (one layer may be registered twice),
// or a name or dimension is invalid.
StatusOr<std::vector<EmbeddingImpl*>> EmbeddingsOf(Model& model);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_EMBEDDING_SPEC_H_
