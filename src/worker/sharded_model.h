// A worker's model seen through the parameter servers: which shard owns each
// parameter and buffer, copying pulled values in, and gathering gradients and
// buffer updates for a push.
//
// Buffers (BatchNorm statistics and the like) are not trained by gradients.
// Every forward starts from the buffers' pulled values (RestoreBuffers), and
// a push carries, per buffer, how the server should fold this worker's
// change in: b <- decay * b + (new - decay * pulled) (see PushRequest).
// BatchNorm and InstanceNorm running statistics get decay 1 - momentum, so
// that the server's copy stays an exponential moving average however many
// workers push; every other buffer (num_batches_tracked, a module's own
// counters) gets decay 1: the changes add up. A bool buffer's change is, per
// element, set, cleared or kept, applied push after push.
#ifndef ELASTICDL_WORKER_SHARDED_MODEL_H_
#define ELASTICDL_WORKER_SHARDED_MODEL_H_

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

  // The model's embedding tables (their rows live on the servers only).
  void set_tables(std::vector<proto::EmbeddingTableSpec> tables) { tables_ = std::move(tables); }

  // The values of shard `shard`, for initializing its server, with the
  // embedding tables.
  StatusOr<proto::ModelValues> Encode(int shard) const;
  // Copies pulled values of one shard into the model (their bytes in the
  // tensors' contents, or at their shared_offsets in `shared`) and remembers
  // its buffers as the base of the next push's updates.
  Status Apply(const proto::ModelValues& values, std::string_view shared = {});

  // A push's tensors left where they lie (FillPush): their bytes, by tensor
  // of the request (rpc::ParameterServers::PushFrom), and the tensors that
  // hold them. The bytes stay readable while the Held lives; a gradient's
  // change when the gradients are zeroed or computed again.
  struct Held {
    std::vector<std::string_view> bytes;
    std::vector<torch::Tensor> tensors;
  };
  // Gradients (after backward) and buffer updates of shard `shard`: their
  // values copied into the request or, with `held`, left where they lie and
  // named there.
  Status FillPush(int shard, proto::PushRequest* request, Held* held = nullptr) const;
  // Shard `shard` accepted the last push (not as a duplicate): its buffer
  // updates are applied there, so the next ones start from here.
  void PushAccepted(int shard);
  // Sets every buffer back to its base: what the servers hold of it.
  void RestoreBuffers();
  // The first gradient or buffer holding a NaN or an infinity, e.g.
  // "the gradient of 'dense.weight'"; nullopt when all are finite.
  std::optional<std::string> FirstNonFinite() const;

  // Every parameter and buffer, e.g. for a trained-model file.
  StatusOr<proto::ModelValues> EncodeAll() const;

  // What buffer `name` is: a normalization layer's running statistic
  // (running_mean, running_var) of momentum, or a cumulative one (momentum
  // unset: averaged over the minibatches its counter, num_batches_tracked,
  // counts), or anything else (a counter, which adds up what each worker's
  // forward added).
  struct BufferRole {
    enum Kind { kCounter, kRunningStatistic, kCumulativeStatistic } kind = kCounter;
    std::string counter;  // kCumulativeStatistic: the counter's name
  };
  BufferRole RoleOf(const std::string& name) const;

 private:
  struct Slot {
    std::string name;
    torch::Tensor tensor;
    int shard = 0;
    bool is_buffer = false;
    torch::Tensor pulled;  // buffers: the base of the next update
    // Buffers: the momentum of the running average this buffer is (a
    // BatchNorm's running_mean or running_var); nullopt when the buffer
    // adds up (decay 1). A module without momentum averages cumulatively:
    // cumulative is set and `counter` is the slot of its num_batches_tracked.
    std::optional<double> momentum;
    bool cumulative = false;
    int counter = -1;
  };
  Slot* Find(const std::string& name, bool is_buffer);
  // The decay of buffer slot `s` for the next push.
  double DecayOf(const Slot& s) const;

  std::shared_ptr<Model> model_;
  int num_shards_;
  std::vector<Slot> slots_;
  std::vector<proto::EmbeddingTableSpec> tables_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_SHARDED_MODEL_H_
