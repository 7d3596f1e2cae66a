// Tensors on the wire: LibTorch tensors <-> elasticdl.proto.Tensor.
#ifndef ELASTICDL_RPC_TENSOR_CODEC_H_
#define ELASTICDL_RPC_TENSOR_CODEC_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <string_view>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::rpc {

// Writes `tensor` (any device or layout; copied to a contiguous CPU tensor
// first unless it is one) into `out`, its values copied once.
// INVALID_ARGUMENT for dtypes the protocol does not carry.
Status EncodeTensor(const std::string& name, const torch::Tensor& tensor, proto::Tensor* out);

// As EncodeTensor, the values left where they lie: `out` gets the name,
// dtype and shape and no content, and the tensor's bytes are returned, valid
// while its storage is. INVALID_ARGUMENT for a tensor that is not contiguous
// in memory on the CPU, as for dtypes the protocol does not carry.
StatusOr<std::string_view> DescribeTensor(const std::string& name, const torch::Tensor& tensor,
                                          proto::Tensor* out);

// A new CPU tensor holding `message`'s values: its content, or with a
// shared_offset the bytes there in `shared` (an area of shared memory,
// rpc/shared_tensors.h). INVALID_ARGUMENT when their size does not match
// dtype and shape, or they would lie outside `shared`, naming the tensor.
StatusOr<torch::Tensor> DecodeTensor(const proto::Tensor& message, std::string_view shared = {});

// Copies `message`'s values (its content, or the bytes at its shared_offset
// in `shared`) into `dst` in place (no allocation), which must have the same
// type and shape; INVALID_ARGUMENT naming the tensor otherwise, or when the
// bytes do not match them (DecodeTensor's checks).
Status CopyInto(const proto::Tensor& message, torch::Tensor& dst, std::string_view shared = {});

// Whether `values` (a checkpoint's, a trained model's) can be loaded into
// `model` as they are: every parameter and buffer of the model is there
// with its type and shape, and nothing else. INVALID_ARGUMENT naming the
// first tensor that is missing, extra or different.
Status CheckModelValues(const torch::nn::Module& model, const proto::ModelValues& values);

// Whether `tensor` holds no NaN and no infinity (integer tensors hold
// none). Float32 and float64 tensors on the CPU are scanned in place, with
// nothing allocated (common/finite.h).
bool AllFinite(const torch::Tensor& tensor);

using NamedTensors = std::map<std::string, torch::Tensor>;

// Decodes a repeated Tensor field; names must be unique. With `reuse`, a
// tensor there of the same name, type and shape that nobody else holds any
// longer (the tensors its last call decoded, once their user let go) is
// written over instead of allocating another; `reuse` then holds handles
// of the tensors returned.
StatusOr<NamedTensors> DecodeTensors(
    const google::protobuf::RepeatedPtrField<proto::Tensor>& messages, std::string_view shared = {},
    NamedTensors* reuse = nullptr);

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_TENSOR_CODEC_H_
