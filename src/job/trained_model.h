// The trained-model directory written by `train --output DIR` and read by
// `evaluate` and `predict`:
//
//   DIR/trained_model.pbtxt   the TrainedModel record (seed 003)
//   DIR/parameters.pb         ModelValues: every parameter and buffer
//   DIR/zoo/                  the model zoo's sources, so DIR is self-contained
//   DIR/embeddings/           the embedding tables, if any: a checkpoint of
//                             the parameter servers (ps/checkpoint.h)
#ifndef ELASTICDL_JOB_TRAINED_MODEL_H_
#define ELASTICDL_JOB_TRAINED_MODEL_H_

#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl {

inline constexpr char kTrainedModelFile[] = "trained_model.pbtxt";
inline constexpr char kParametersFile[] = "parameters.pb";
inline constexpr char kZooDir[] = "zoo";
inline constexpr char kEmbeddingsDir[] = "embeddings";

Status WriteTrainedModel(const std::string& dir, const proto::TrainedModel& record,
                         const proto::ModelValues& values);
StatusOr<proto::TrainedModel> ReadTrainedModelRecord(const std::string& dir);
StatusOr<proto::ModelValues> ReadModelValues(const std::string& dir);

}  // namespace elasticdl

#endif  // ELASTICDL_JOB_TRAINED_MODEL_H_
