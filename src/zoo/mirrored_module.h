// A LibTorch module standing for a submodule of a model defined elsewhere (a
// Python torch.nn.Module): it holds the same parameter and buffer tensors
// under the same names, so that the worker pulls into, pushes from and
// checkpoints them as it does a LibTorch model's, and it says what the
// worker cannot learn from a LibTorch type: how the submodule updates its
// running statistics.
#ifndef ELASTICDL_ZOO_MIRRORED_MODULE_H_
#define ELASTICDL_ZOO_MIRRORED_MODULE_H_

#include <torch/nn/module.h>

#include <optional>
#include <string>
#include <utility>

namespace elasticdl {

class MirroredModule : public torch::nn::Module {
 public:
  // `type` names the mirrored module's class, e.g. "torch.nn.BatchNorm2d".
  explicit MirroredModule(std::string type) : torch::nn::Module(std::move(type)) {}

  // A normalization layer that tracks running statistics (running_mean,
  // running_var, num_batches_tracked) as BatchNorm does: the momentum of its
  // running average, or nullopt for a cumulative average (momentum None).
  struct RunningStats {
    std::optional<double> momentum;
  };
  std::optional<RunningStats> running_stats;
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_MIRRORED_MODULE_H_
