#include "job/trained_model.h"

#include <google/protobuf/text_format.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

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

std::string TrainedModelStagingDir(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + ".elasticdl-staging";
}

Status CheckTrainedModelReplaceable(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::OkStatus();
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(StrCat(dir, " exists and is not a directory"));
  }
  if (fs::is_empty(dir, ec) || fs::exists(StrCat(dir, "/", kTrainedModelFile), ec)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      StrCat(dir, " exists and is not a trained model (no ", kTrainedModelFile,
             "): the new model replaces the whole directory; name a new one, or an empty one"));
}

Status PublishTrainedModel(const std::string& dir,
                           const std::function<Status(const std::string& staging)>& fill) {
  namespace fs = std::filesystem;
  EDL_RETURN_IF_ERROR(CheckTrainedModelReplaceable(dir));
  const std::string staging = TrainedModelStagingDir(dir);
  std::error_code ec;
  fs::remove_all(staging, ec);  // an earlier publish's, cut short
  if (ec) return absl::InternalError(StrCat("cannot remove ", staging, ": ", ec.message()));
  const std::string parent = fs::path(staging).parent_path().string();
  if (!parent.empty()) EDL_RETURN_IF_ERROR(CreateDirectories(parent));
  if (::mkdir(staging.c_str(), 0755) != 0) return ErrnoToStatus(errno, staging);
  Status built = fill(staging);
  if (built.ok()) built = SyncTree(staging);
  if (built.ok()) built = ReplaceDirectory(staging, dir);
  if (!built.ok()) fs::remove_all(staging, ec);
  return built;
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
