// The job specification every role of a job reads from the job directory.
#ifndef ELASTICDL_RPC_JOB_SPEC_H_
#define ELASTICDL_RPC_JOB_SPEC_H_

#include <string>

#include "common/file.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::rpc {

// `job_dir`/job.pbtxt.
std::string JobSpecPath(const std::string& job_dir);

// Writes the spec (protobuf text format) atomically.
Status WriteJobSpec(const proto::JobSpec& spec, const std::string& job_dir);
StatusOr<proto::JobSpec> ReadJobSpec(const std::string& job_dir);

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_JOB_SPEC_H_
