// A parameter-server shard's state at one moment, as plain tensors: what a
// checkpoint holds. ParameterStore takes it under its lock (tensors cloned,
// nothing encoded) and the checkpoint writer encodes it outside the lock.
//
// Also the bridge to LibTorch 1.13's per-parameter optimizer state
// (torch::optim::*ParamState), which the optimizers key by the address of
// the parameter's TensorImpl: ExportOptimizerState reads it by parameter,
// ImportOptimizerState recreates it on another tensor.
#ifndef ELASTICDL_PS_SHARD_STATE_H_
#define ELASTICDL_PS_SHARD_STATE_H_

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/optimizer.h"

namespace elasticdl::ps {

// One parameter and the optimizer's state for it.
struct ParameterSnapshot {
  torch::Tensor value;
  // The optimizer's tensors by slot name ("momentum_buffer", "exp_avg",
  // ...). Empty when the optimizer has no state for the parameter yet (SGD
  // with momentum, Adam, AdamW and RMSprop create it at the first step).
  std::map<std::string, torch::Tensor> slots;
  // Adam, AdamW, Adagrad, RMSprop: steps taken on this parameter.
  int64_t step = 0;
};

struct ShardSnapshot {
  int64_t version = 0;
  int ps_id = 0;
  int num_ps = 1;
  std::map<std::string, ParameterSnapshot> parameters;
  std::map<std::string, torch::Tensor> buffers;
  // task id -> minibatches applied (a prefix [0, n)); no zero entries.
  std::map<int64_t, int64_t> applied;
  proto::OptimizerConfig optimizer;
  // Embedding tables and their rows (with slots and steps).
  std::vector<proto::EmbeddingTableSpec> tables;
  std::vector<proto::EmbeddingRowBlock> blocks;
};

// Encodes `snapshot` into `out` (cleared first), moving its row blocks.
// Fails only on a dtype the protocol does not carry.
Status EncodeSnapshot(ShardSnapshot snapshot, proto::ShardCheckpoint* out);

// `spec` as the protocol's OptimizerConfig.
proto::OptimizerConfig OptimizerConfigOf(const OptimizerSpec& spec);

// Copies (clones) `optimizer`'s state for `param` into `*out`'s slots and
// step. `spec` says which kind of optimizer it is.
void ExportOptimizerState(const OptimizerSpec& spec, const torch::optim::Optimizer& optimizer,
                          const torch::Tensor& param, ParameterSnapshot* out);

// Replaces `optimizer`'s state for `param` by `slots` and `step`, from
// ExportOptimizerState of an optimizer whose state `spec`'s continues
// (SlotsCarryOver: the same kind, or Adam and AdamW). Slots the
// configuration needs but `slots` lacks (a checkpoint written without
// amsgrad restored with it, ...) start at zero. Empty `slots` leave the
// state as the optimizer created it. INVALID_ARGUMENT, naming `name`, when a
// slot's shape or type differs from the parameter's.
Status ImportOptimizerState(const OptimizerSpec& spec, const std::string& name,
                            const std::map<std::string, torch::Tensor>& slots, int64_t step,
                            const torch::Tensor& param, torch::optim::Optimizer* optimizer);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_SHARD_STATE_H_
