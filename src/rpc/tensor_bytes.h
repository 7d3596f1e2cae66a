// How many bytes a proto::Tensor's values take, from its dtype and shape
// alone: what the codec (rpc/tensor_codec.h) expects in `content` and what a
// shared region (rpc/shared_tensors.h) must hold at `shared_offset`. No
// LibTorch: the codec's test checks these sizes against LibTorch's.
#ifndef ELASTICDL_RPC_TENSOR_BYTES_H_
#define ELASTICDL_RPC_TENSOR_BYTES_H_

#include <cstdint>

#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::rpc {

// The bytes of one element of `type`; 0 for a type the codec does not know.
inline int64_t ElementBytes(proto::DataType type) {
  switch (type) {
    case proto::DT_BOOL:
    case proto::DT_UINT8:
    case proto::DT_INT8:
      return 1;
    case proto::DT_INT16:
    case proto::DT_FLOAT16:
    case proto::DT_BFLOAT16:
      return 2;
    case proto::DT_FLOAT32:
    case proto::DT_INT32:
      return 4;
    case proto::DT_FLOAT64:
    case proto::DT_INT64:
      return 8;
    default:
      return 0;
  }
}

// The largest number of elements a tensor on the wire may have.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// The elements of `shape`; -1 for a negative dimension or more than
// kMaxElements.
template <typename Dims>
int64_t ElementCount(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > kMaxElements / d)) return -1;
    n *= d;
  }
  return n;
}

// The bytes of `t`'s values; -1 for an unknown type or an invalid shape.
inline int64_t ValueBytes(const proto::Tensor& t) {
  const int64_t element = ElementBytes(t.dtype());
  const int64_t n = ElementCount(t.shape());
  return element == 0 || n < 0 ? -1 : n * element;
}

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_TENSOR_BYTES_H_
