// A worker: asks the master for tasks and runs them until the job is over.
// Training tasks read their records, run the zoo's dataset_fn, and for each
// minibatch pull the model, compute gradients with LibTorch and push them;
// evaluation tasks accumulate metric states; prediction tasks write one CSV
// row per record.
//
// A task that fails (bad record, a throw in model code) is reported with its
// error and the worker goes on; losing the master or a parameter server ends
// the worker with an error status.
#ifndef ELASTICDL_WORKER_WORKER_H_
#define ELASTICDL_WORKER_WORKER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "elasticdl/status.h"
#include "rpc/ps_client.h"
#include "worker/sharded_model.h"
#include "zoo/zoo_program.h"

namespace elasticdl::worker {

struct WorkerOptions {
  // The job directory holding job.pbtxt.
  std::string job_dir;
  int worker_id = 0;
  // host:port of the master.
  std::string master_address;
  // LibTorch intra-op threads; 0 takes the job's worker_threads, else 1.
  int num_threads = 0;
};

class Worker {
 public:
  static StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& options);

  // Runs tasks until the master says the job is over.
  Status Run();

 private:
  Worker(WorkerOptions options, proto::JobSpec spec, ZooProgram program);

  Status Register();
  Status LoadInitialModel();
  Status Pull();
  Status Train(const proto::Task& task, proto::ReportTaskRequest* report);
  Status TrainMinibatch(const Example& batch, double* loss);
  Status Evaluate(const proto::Task& task, proto::ReportTaskRequest* report);
  Status Predict(const proto::Task& task);
  StatusOr<Dataset<Example>> Batches(const proto::Task& task, Mode mode);
  Status DatasetError(const Status& status) const;
  StatusOr<std::shared_ptr<const RecordFile>> OpenFile(const std::string& path);

  const WorkerOptions options_;
  const proto::JobSpec spec_;
  ZooProgram program_;
  std::unique_ptr<proto::Master::Stub> master_;
  std::unique_ptr<rpc::PsClient> ps_;
  std::unique_ptr<ShardedModel> model_;
  std::vector<int64_t> versions_;  // per shard, of the values in model_
  int64_t pushed_version_ = 0;     // the newest version a push of ours produced
  std::map<std::string, std::shared_ptr<const RecordFile>> files_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_WORKER_H_
