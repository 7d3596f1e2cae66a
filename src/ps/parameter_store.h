// One parameter-server shard's state: the dense parameters and buffers it
// owns, their version, and the optimizer that applies pushed gradients.
//
// Versions: a shard starts at version 0 when initialized and adds one per
// optimizer step. Async mode (the default) steps on every push. Sync mode
// averages `grads_to_wait` accepted pushes per step and refuses gradients
// computed on a version more than `staleness_tolerance` steps old: the worker
// pulls and computes again.
//
// Thread-safe: every method may be called from many RPC threads at once;
// updates are serialized by one mutex, so a pull never sees half a step.
#ifndef ELASTICDL_PS_PARAMETER_STORE_H_
#define ELASTICDL_PS_PARAMETER_STORE_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/optimizer.h"

namespace elasticdl::ps {

struct ParameterStoreOptions {
  // The update rule, from the zoo's optimizer().
  OptimizerSpec optimizer = torch::optim::SGDOptions(0.1);
  // Apply each push at once (true) or average grads_to_wait pushes (false).
  bool use_async = true;
  // Sync mode: accepted pushes per step. At least 1.
  int grads_to_wait = 1;
  // Sync mode: how many versions old a push's base version may be.
  // 0 accepts only gradients computed on the current version.
  int staleness_tolerance = 0;
  // Async mode: scale a gradient computed on a version s steps old by
  // 1 / (1 + s), so that workers racing on the same version do not add up
  // to a larger step than one worker would take (the original's
  // --lr_staleness_modulation). For SGD this is the learning rate scaled.
  bool lr_staleness_modulation = false;
};

class ParameterStore {
 public:
  explicit ParameterStore(ParameterStoreOptions options);

  // Takes `values` as the initial model unless already initialized (first
  // wins). Sets *accepted accordingly and *version to the current version.
  Status Init(const proto::ModelValues& values, bool* accepted, int64_t* version);

  // Fills `out` with the current version and, when it differs from
  // `known_version`, all values. `initialized` is false before Init.
  Status Pull(int64_t known_version, proto::PullResponse* out);

  // Applies (or, in sync mode, accumulates) pushed gradients and buffer
  // deltas. Names, shapes and types must match what the shard owns;
  // otherwise INVALID_ARGUMENT and nothing is applied. FAILED_PRECONDITION
  // before Init.
  Status Push(const proto::PushRequest& request, proto::PushResponse* out);

  int64_t version() const;
  bool initialized() const;

 private:
  Status ValidateLocked(const std::map<std::string, torch::Tensor>& gradients,
                        const std::map<std::string, torch::Tensor>& deltas) const;
  Status StepLocked(const std::map<std::string, torch::Tensor>& gradients);
  void RefreshSnapshotLocked();

  const ParameterStoreOptions options_;

  mutable std::mutex mu_;
  bool initialized_ = false;
  int64_t version_ = 0;
  std::map<std::string, torch::Tensor> parameters_;
  std::map<std::string, torch::Tensor> buffers_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // Sync mode: the sum of accepted gradients since the last step.
  std::map<std::string, torch::Tensor> pending_sum_;
  int pending_count_ = 0;
  // Encoded values of version snapshot_version_, shared by concurrent pulls.
  std::shared_ptr<const proto::ModelValues> snapshot_;
  int64_t snapshot_version_ = -1;
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PARAMETER_STORE_H_
