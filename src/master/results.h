// What a finished job leaves behind: a training job's last checkpoint and
// its trained model (read whole from the parameter servers, refused when a
// tensor holds NaN or infinity), a prediction job's merged predictions.
#ifndef ELASTICDL_MASTER_RESULTS_H_
#define ELASTICDL_MASTER_RESULTS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "master/data_source.h"
#include "master/task_manager.h"
#include "rpc/parameter_servers.h"

namespace elasticdl::master {

// A training job: with `checkpoint`, every server checkpoints what it holds;
// with an output directory in `spec`, the model is read from `servers` and
// published there whole (PublishTrainedModel) with the job's zoo
// (<job_dir>/zoo) and what `add_files` (if set) writes into the directory
// being built. UNAVAILABLE (rpc::IsUnreachable) when a server cannot be
// reached: the caller may try again.
Status WriteTrainingResults(const proto::JobSpec& spec, bool checkpoint,
                            rpc::ParameterServers* servers,
                            const std::function<Status(const std::string&)>& add_files = {});

// AllreduceStrategy: the workers hold the model, and write it as a
// checkpoint (one shard) when training ends. With an output directory in
// `spec`, the checkpoint of `model_version` in the job's checkpoint
// directory is published as the trained model, as above. UNAVAILABLE while
// that checkpoint is not there yet.
Status WriteCollectiveTrainingResults(
    const proto::JobSpec& spec, int64_t model_version,
    const std::function<Status(const std::string&)>& add_files = {});

// A prediction job: the workers' parts (<job_dir>/predictions/task-<id>.csv)
// concatenated in the order of the input under one header, into
// `spec.output()` (a .csv file, or predictions.csv in that directory).
Status MergePredictions(const proto::JobSpec& spec,
                        const std::vector<std::pair<Range, TaskId>>& tasks);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_RESULTS_H_
