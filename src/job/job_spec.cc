#include "job/job_spec.h"

#include <google/protobuf/text_format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl {

Status WriteJobSpec(const proto::JobSpec& spec, const std::string& job_dir) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(spec, &text)) {
    return absl::InternalError("cannot print the job spec");
  }
  return WriteFileAtomically(JobSpecFile(job_dir), text);
}

StatusOr<proto::JobSpec> ReadJobSpec(const std::string& job_dir) {
  std::string path = JobSpecFile(job_dir);
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  proto::JobSpec spec;
  if (!google::protobuf::TextFormat::ParseFromString(text, &spec)) {
    return absl::DataLossError(StrCat(path, ": not a valid job spec"));
  }
  return spec;
}

}  // namespace elasticdl
