// What a job reads and writes, checked by the client before any process
// starts: a path that does not exist, a validation set without records or an
// output nobody may write fails here, in seconds, rather than after the zoo
// is built and the master has started.
#ifndef ELASTICDL_CLIENT_JOB_INPUTS_H_
#define ELASTICDL_CLIENT_JOB_INPUTS_H_

#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

// Every path of --training_data, --validation_data and --prediction_data
// names at least one record file (a file, a directory with record files, a
// glob that matches); --validation_data's files are opened and hold at least
// one record between them. (Training and prediction files are indexed by the
// master, which reports a corrupt or empty one naming it; TFRecord files are
// indexed by reading them whole, which is done once.) Paths with a scheme
// (`s3://...`) are left to the processes that read them. Errors name the flag
// and the path.
Status CheckDataPaths(const proto::JobSpec& spec);

// `path` (--output, --checkpoint_dir, ...) can be written by this user: it is
// a writable directory, or its nearest existing ancestor is one (the job
// creates the rest). `is_file`: the path names a file (predict's CSV), so an
// existing one must be a writable file or a writable directory.
Status CheckWritable(const std::string& flag, const std::string& path, bool is_file = false);

// The two above for the spec's data and outputs (--output, --checkpoint_dir).
Status CheckJobInputs(const proto::JobSpec& spec);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_INPUTS_H_
