// The arithmetic of a step on the tensors a parameter server holds, on its
// critical path: a synchronous step's last push waits for all of it. Tensors
// of float32 or float64 (and, for buffers, int64) in one contiguous piece on
// the CPU are computed in one pass over memory per operand, with no LibTorch
// dispatch per tensor and operation; any other tensor goes through LibTorch.
// Either way, element by element, the same operations in the same order as
// the LibTorch calls named below: the same values, bit for bit.
#ifndef ELASTICDL_PS_STEP_MATH_H_
#define ELASTICDL_PS_STEP_MATH_H_

#include <torch/types.h>

#include <vector>

namespace elasticdl::ps {

// Adds terms[1], terms[2], ... to *terms[0] in that order, then divides it
// by `divisor` (≥ 1; not at all when 1): add_, then div_. All terms have the
// shape and type of *terms[0] (the store checked each against its
// parameter), which is written in place.
void SumAndDivide(const std::vector<torch::Tensor*>& terms, int divisor);

// held <- held * decay + update: mul_ (not when decay is 1), then add_.
// `update` has the shape and type of `held`; decay is 1 for integers. A bool
// `held` takes an int8 `update` of its shape: 1 sets, -1 clears, 0 keeps.
void FoldUpdate(torch::Tensor& held, const torch::Tensor& update, double decay);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_STEP_MATH_H_
