// A worker's model seen through the parameter servers: which shard owns each
// parameter and buffer, copying pulled values in, and gathering gradients and
// buffer changes for a push.
//
// Buffers (BatchNorm statistics and the like) are not trained by gradients;
// a push carries how much this worker's forward passes changed them since
// the last pull, and the server adds that change to its copy.
#ifndef ELASTICDL_WORKER_SHARDED_MODEL_H_
#define ELASTICDL_WORKER_SHARDED_MODEL_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/model.h"

namespace elasticdl::worker {

class ShardedModel {
 public:
  ShardedModel(std::shared_ptr<Model> model, int num_shards);

  Model& model() { return *model_; }
  int num_shards() const { return num_shards_; }

  // The values of shard `shard`, for initializing its server.
  StatusOr<proto::ModelValues> Encode(int shard) const;
  // Copies pulled values of one shard into the model and remembers its
  // buffers as the base of the next push's deltas.
  Status Apply(const proto::ModelValues& values);
  // Gradients (after backward) and buffer deltas of shard `shard`.
  Status FillPush(int shard, proto::PushRequest* request) const;
  // Shard `shard` accepted the last push: its buffer deltas are applied
  // there, so the next deltas start from here.
  void PushAccepted(int shard);

  // Every parameter and buffer, e.g. for a trained-model file.
  StatusOr<proto::ModelValues> EncodeAll() const;

 private:
  struct Slot {
    std::string name;
    torch::Tensor tensor;
    int shard = 0;
    bool is_buffer = false;
    torch::Tensor pulled;  // buffers: the value last pulled
  };
  Slot* Find(const std::string& name, bool is_buffer);

  std::shared_ptr<Model> model_;
  int num_shards_;
  std::vector<Slot> slots_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_SHARDED_MODEL_H_
