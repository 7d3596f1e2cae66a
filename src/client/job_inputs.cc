#include "client/job_inputs.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/strings.h"
#include "master/data_source.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

bool HasScheme(const std::string& path) { return path.find("://") != std::string::npos; }

bool Writable(const fs::path& path) { return ::access(path.c_str(), W_OK) == 0; }

// The files of one flag's paths; NOT_FOUND naming the flag and the path for
// a path that names none.
StatusOr<std::vector<std::string>> FilesOf(
    const std::string& flag, const google::protobuf::RepeatedPtrField<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (HasScheme(path)) continue;
    StatusOr<std::vector<std::string>> expanded = master::ExpandDataPath(path);
    if (!expanded.ok()) return Annotate(expanded.status(), flag);
    files.insert(files.end(), expanded->begin(), expanded->end());
  }
  return files;
}

}  // namespace

Status CheckDataPaths(const proto::JobSpec& spec) {
  const proto::TaskSpec& tasks = spec.tasks();
  EDL_RETURN_IF_ERROR(FilesOf("--training_data", tasks.training_data()).status());
  EDL_RETURN_IF_ERROR(FilesOf("--prediction_data", tasks.prediction_data()).status());
  EDL_ASSIGN_OR_RETURN(std::vector<std::string> validation,
                       FilesOf("--validation_data", tasks.validation_data()));
  if (validation.empty()) return absl::OkStatus();
  EDL_ASSIGN_OR_RETURN(std::vector<master::Shard> shards,
                       master::OpenShards(validation, "--validation_data"));
  int64_t records = 0;
  for (const master::Shard& shard : shards) records += shard.num_records;
  if (records > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("--validation_data=", absl::StrJoin(tasks.validation_data(), ","), ": its ",
             shards.size(), shards.size() == 1 ? " file holds" : " files hold",
             " no records; name a validation set with records, or leave the flag out"));
}

Status CheckWritable(const std::string& flag, const std::string& path, bool is_file) {
  if (path.empty() || HasScheme(path)) return absl::OkStatus();
  std::error_code ec;
  const fs::path target = fs::absolute(path, ec);
  // The path, else its nearest existing ancestor: the job creates the
  // directories below it. A path this user may not look up is an error of
  // its own (a directory on the way it may not enter).
  fs::path existing = target;
  fs::file_status status;
  for (;;) {
    status = fs::status(existing, ec);
    if (!ec) break;
    if (ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
      return absl::PermissionDeniedError(StrCat(flag, "=", path, ": cannot be reached (",
                                                existing.string(), ": ", ec.message(), ")"));
    }
    if (existing == existing.parent_path()) break;
    existing = existing.parent_path();
  }
  const bool directory = fs::is_directory(status);
  if (existing == target) {
    if (!directory && !is_file) {
      return absl::InvalidArgumentError(StrCat(flag, "=", path, ": exists and is not a directory"));
    }
    // A directory is written into (and a trained model replaces it: its
    // parent must take the new one too); a file is replaced.
    if (!Writable(target) || (directory && !is_file && !Writable(target.parent_path()))) {
      return absl::PermissionDeniedError(StrCat(flag, "=", path, ": not writable by this user"));
    }
    return absl::OkStatus();
  }
  if (!directory) {
    return absl::InvalidArgumentError(
        StrCat(flag, "=", path, ": ", existing.string(), " is not a directory"));
  }
  if (!Writable(existing)) {
    return absl::PermissionDeniedError(StrCat(flag, "=", path, ": cannot be created (",
                                              existing.string(), " is not writable by this user)"));
  }
  return absl::OkStatus();
}

Status CheckJobInputs(const proto::JobSpec& spec) {
  EDL_RETURN_IF_ERROR(CheckDataPaths(spec));
  EDL_RETURN_IF_ERROR(CheckWritable("--output", spec.output(),
                                    /*is_file=*/spec.type() == proto::JOB_PREDICTION));
  return CheckWritable("--checkpoint_dir", spec.ps().checkpoint_dir());
}

}  // namespace elasticdl::client
