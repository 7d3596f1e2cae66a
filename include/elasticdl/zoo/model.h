// Models of a model zoo: torch::nn::Modules whose forward takes the feature
// map of a batch and the training flag (seed 001's `call(inputs, training)`).
//
// Subclass style:
//
//   struct MnistModel : elasticdl::Model {
//     MnistModel() { conv1_ = register_module("conv1", nn::Conv2d(...)); ... }
//     torch::Tensor forward(const FeatureMap& inputs, bool training) override;
//   };
//
// Composition (functional) style: layers in a torch::nn::Sequential applied to
// one named input:
//
//   auto inputs = Input("image", {28, 28});
//   return Functional(inputs, nn::Sequential(Reshape({1, 28, 28}), ...));
//
// The framework calls model->train(training) before forward, so layers such
// as BatchNorm and Dropout follow the flag in both styles.
#ifndef ELASTICDL_ZOO_MODEL_H_
#define ELASTICDL_ZOO_MODEL_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "elasticdl/data/example.h"

namespace elasticdl {

// Which phase a dataset_fn prepares data for (seed 001's Mode).
enum class Mode { TRAINING, EVALUATION, PREDICTION };

const char* ModeName(Mode mode);

class Model : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;

  // Outputs for a batch. `inputs` holds the batched features of dataset_fn;
  // `training` is true while training and false in evaluation and prediction.
  virtual torch::Tensor forward(const FeatureMap& inputs, bool training) = 0;
};

// A named model input of a fixed per-example shape (Keras `Input`).
struct Input {
  Input(std::string name, std::vector<int64_t> shape)
      : name(std::move(name)), shape(std::move(shape)) {}
  std::string name;
  // Shape of one example, without the batch dimension. Checked on every
  // forward; an empty shape accepts any, and -1 any size of that dimension.
  std::vector<int64_t> shape;
};

// A model applying `layers` to the input named by `input`.
std::shared_ptr<Model> Functional(Input input, torch::nn::Sequential layers);

// Reshapes every example of a batch to `shape` (Keras `Reshape`: the batch
// dimension is kept; -1 infers one dimension). A layer LibTorch lacks; it
// lives in namespace elasticdl so that model files can write
// `nn::Sequential(Reshape({1, 28, 28}), nn::Conv2d(...))` with
// `namespace nn = torch::nn`.
class ReshapeImpl : public torch::nn::Module {
 public:
  explicit ReshapeImpl(std::vector<int64_t> shape) : shape_(std::move(shape)) {}
  torch::Tensor forward(const torch::Tensor& x);
  void pretty_print(std::ostream& stream) const override;

 private:
  std::vector<int64_t> shape_;
};

// TORCH_MODULE(Reshape), plus construction from a braced shape.
class Reshape : public torch::nn::ModuleHolder<ReshapeImpl> {
 public:
  using torch::nn::ModuleHolder<ReshapeImpl>::ModuleHolder;
  using Impl = ReshapeImpl;
  Reshape(std::initializer_list<int64_t> shape)  // NOLINT(google-explicit-constructor)
      : ModuleHolder(std::make_shared<ReshapeImpl>(std::vector<int64_t>(shape))) {}
};
}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_MODEL_H_
