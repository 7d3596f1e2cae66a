// Whether floating-point values are all finite (no NaN, no infinity), by
// their exponent bits: a scan at memory speed, with nothing allocated, cheap
// enough to run on every minibatch's gradients.
#ifndef ELASTICDL_COMMON_FINITE_H_
#define ELASTICDL_COMMON_FINITE_H_

#include <cstddef>

namespace elasticdl {

// `count` IEEE-754 binary32 values at `data` (any alignment).
bool AllFiniteFloat32(const void* data, size_t count);
// `count` IEEE-754 binary64 values at `data` (any alignment).
bool AllFiniteFloat64(const void* data, size_t count);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_FINITE_H_
