#include "job/trained_model.h"

#include <google/protobuf/text_format.h>

#include "common/file.h"
#include "common/strings.h"
#include "job/job_spec.h"

namespace elasticdl {

Status WriteTrainedModel(const std::string& dir, const proto::TrainedModel& record,
                         const proto::ModelValues& values) {
  EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  std::string bytes;
  if (!values.SerializeToString(&bytes)) return absl::InternalError("cannot encode parameters");
  EDL_RETURN_IF_ERROR(WriteFileAtomically(StrCat(dir, "/", kParametersFile), bytes));
  std::string text;
  google::protobuf::TextFormat::PrintToString(record, &text);
  return WriteFileAtomically(StrCat(dir, "/", kTrainedModelFile), text);
}

StatusOr<proto::TrainedModel> ReadTrainedModelRecord(const std::string& dir) {
  std::string path = StrCat(dir, "/", kTrainedModelFile);
  auto text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::NotFoundError(StrCat(dir, " is not a trained model: ", text.status().message()));
  }
  proto::TrainedModel record;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &record)) {
    return absl::DataLossError(StrCat(path, ": not a valid TrainedModel record"));
  }
  return record;
}

StatusOr<proto::ModelValues> ReadModelValues(const std::string& dir) {
  std::string path = StrCat(dir, "/", kParametersFile);
  EDL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  proto::ModelValues values;
  if (!values.ParseFromString(bytes)) {
    return absl::DataLossError(StrCat(path, ": not a valid parameters file"));
  }
  return values;
}

}  // namespace elasticdl
