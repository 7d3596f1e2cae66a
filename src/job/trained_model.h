// The trained-model directory written by `train --output DIR` and read by
// `evaluate` and `predict`:
//
//   DIR/trained_model.pbtxt   the TrainedModel record (seed 003)
//   DIR/parameters.pb         ModelValues: every parameter and buffer
//   DIR/zoo/                  the model zoo's sources, so DIR is self-contained
//   DIR/embeddings/           the embedding tables, if any: a checkpoint of
//                             the parameter servers (ps/checkpoint.h)
//   DIR/events.out.tfevents.* the job's TensorBoard file
//
// DIR is published whole (PublishTrainedModel): a reader, or a crash, sees
// the previous model or the new one, never parts of both.
#ifndef ELASTICDL_JOB_TRAINED_MODEL_H_
#define ELASTICDL_JOB_TRAINED_MODEL_H_

#include <functional>
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

// Where a new model for `dir` is built before it is published:
// <dir>.elasticdl-staging (a directory of that name is the system's; one
// left by a crash is removed by the next publish). The parameter servers
// export their tables under it.
std::string TrainedModelStagingDir(const std::string& dir);

// OK when `dir` may be replaced by a trained model: it does not exist, is
// empty, or holds one (trained_model.pbtxt). Else FAILED_PRECONDITION, so
// that nothing a user keeps there is lost.
Status CheckTrainedModelReplaceable(const std::string& dir);

// Publishes a new trained model at `dir` as a whole: `fill` writes it into
// TrainedModelStagingDir(dir) (created empty first), every file there is
// synced, and it takes dir's place in one step (ReplaceDirectory).
Status PublishTrainedModel(const std::string& dir,
                           const std::function<Status(const std::string& staging)>& fill);
StatusOr<proto::ModelValues> ReadModelValues(const std::string& dir);

}  // namespace elasticdl

#endif  // ELASTICDL_JOB_TRAINED_MODEL_H_
