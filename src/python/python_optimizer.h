// Optimizers as a Python model file gives them, in PyTorch's idiom
// (functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9)), made into what
// the parameter servers apply. elasticdl._runtime.describe_optimizer names
// the class and binds every argument (defaults included); this checks that
// the servers can apply each one.
#ifndef ELASTICDL_PYTHON_PYTHON_OPTIMIZER_H_
#define ELASTICDL_PYTHON_PYTHON_OPTIMIZER_H_

#include <torch/csrc/utils/pybind.h>  // pybind11 with LibTorch's tensor casters

#include <string>

#include "elasticdl/status.h"
#include "elasticdl/zoo/embedding.h"
#include "elasticdl/zoo/optimizer.h"

namespace elasticdl::python {

// SGD, Adam, AdamW, Adagrad or RMSprop with `args` (the class's keyword arguments).
// INVALID_ARGUMENT naming the class and the argument for an argument the
// servers cannot apply (maximize=True, a value of the wrong type), and for
// another class, listing those they apply. Arguments that only choose how
// PyTorch computes a step (foreach, fused, capturable, differentiable) are
// ignored. Needs the GIL.
StatusOr<OptimizerSpec> OptimizerOf(const std::string& name, const pybind11::dict& args);

// The same for an embedding table, which may also take elasticdl.optim.Ftrl.
StatusOr<TableOptimizerSpec> TableOptimizerOf(const std::string& name, const pybind11::dict& args);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PYTHON_OPTIMIZER_H_
