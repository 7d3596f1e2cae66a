// What a zoo's optimizer() returns: the options of one of LibTorch's
// optimizers. The parameter servers (and local evaluation tools) instantiate
// it on the parameters they own, so a model file writes
//
//   OptimizerSpec optimizer() { return torch::optim::SGDOptions(0.1); }
//
// SGD covers momentum and Nesterov (SGDOptions(0.1).momentum(0.9).nesterov(true));
// AdamW is Adam with decoupled weight decay (its default weight_decay is 0.01).
#ifndef ELASTICDL_ZOO_OPTIMIZER_H_
#define ELASTICDL_ZOO_OPTIMIZER_H_

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

using OptimizerSpec =
    std::variant<torch::optim::SGDOptions, torch::optim::AdamOptions, torch::optim::AdagradOptions,
                 torch::optim::RMSpropOptions, torch::optim::AdamWOptions>;

// Checks the hyperparameters: negative rates, betas outside [0, 1), Nesterov
// without momentum or with dampening, ... are INVALID_ARGUMENT naming the
// optimizer and the hyperparameter. NaN is never valid.
Status ValidateOptimizer(const OptimizerSpec& spec);

// A LibTorch optimizer over `params` configured by `spec`, validated first.
StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(const OptimizerSpec& spec,
                                                                 std::vector<torch::Tensor> params);

// One line for logs and the trained-model record, e.g. "SGD(lr=0.1, momentum=0.9)".
std::string DescribeOptimizer(const OptimizerSpec& spec);

// Byte encoding of a spec (the OptimizerConfig message of elasticdl.proto),
// how it travels to parameter servers. ParseOptimizer reads it back exactly;
// bytes that are not an OptimizerConfig naming an optimizer are
// INVALID_ARGUMENT. It does not validate (MakeOptimizer does).
std::string SerializeOptimizer(const OptimizerSpec& spec);
StatusOr<OptimizerSpec> ParseOptimizer(std::string_view bytes);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_OPTIMIZER_H_
