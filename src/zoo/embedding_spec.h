// What the parameter servers are told about a model's Embedding layers.
#ifndef ELASTICDL_ZOO_EMBEDDING_SPEC_H_
#define ELASTICDL_ZOO_EMBEDDING_SPEC_H_

#include <cstdint>
#include <string_view>
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

// OK when `model` has no Embedding layer. Otherwise FAILED_PRECONDITION
// naming its first table: the workers of `strategy` (a
// --distribution_strategy value other than ParameterServerStrategy) hold
// dense models only, and a table's rows live on parameter servers.
Status CheckDenseModel(Model& model, std::string_view strategy);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_EMBEDDING_SPEC_H_
