// The job specification every role of a job reads from the job directory.
#ifndef ELASTICDL_JOB_JOB_SPEC_H_
#define ELASTICDL_JOB_JOB_SPEC_H_

#include <string>

#include "common/file.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl {

// Writes the spec (protobuf text format) atomically to JobSpecFile(job_dir)
// (common/job_dir.h).
Status WriteJobSpec(const proto::JobSpec& spec, const std::string& job_dir);
StatusOr<proto::JobSpec> ReadJobSpec(const std::string& job_dir);

}  // namespace elasticdl

#endif  // ELASTICDL_JOB_JOB_SPEC_H_
