#include "rpc/tensor_codec.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/finite.h"
#include "common/strings.h"
#include "rpc/tensor_bytes.h"

namespace elasticdl::rpc {
namespace {

StatusOr<proto::DataType> ToProto(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return proto::DT_FLOAT32;
    case torch::kFloat64:
      return proto::DT_FLOAT64;
    case torch::kInt64:
      return proto::DT_INT64;
    case torch::kInt32:
      return proto::DT_INT32;
    case torch::kBool:
      return proto::DT_BOOL;
    case torch::kUInt8:
      return proto::DT_UINT8;
    case torch::kInt8:
      return proto::DT_INT8;
    case torch::kInt16:
      return proto::DT_INT16;
    case torch::kFloat16:
      return proto::DT_FLOAT16;
    case torch::kBFloat16:
      return proto::DT_BFLOAT16;
    default:
      return absl::InvalidArgumentError(
          StrCat("tensors of type ", c10::toString(type), " cannot be sent"));
  }
}

StatusOr<torch::ScalarType> FromProto(proto::DataType type) {
  switch (type) {
    case proto::DT_FLOAT32:
      return torch::kFloat32;
    case proto::DT_FLOAT64:
      return torch::kFloat64;
    case proto::DT_INT64:
      return torch::kInt64;
    case proto::DT_INT32:
      return torch::kInt32;
    case proto::DT_BOOL:
      return torch::kBool;
    case proto::DT_UINT8:
      return torch::kUInt8;
    case proto::DT_INT8:
      return torch::kInt8;
    case proto::DT_INT16:
      return torch::kInt16;
    case proto::DT_FLOAT16:
      return torch::kFloat16;
    case proto::DT_BFLOAT16:
      return torch::kBFloat16;
    default:
      return absl::InvalidArgumentError(StrCat("unknown tensor data type ", int(type)));
  }
}

bool InMemory(const torch::Tensor& t) {
  return t.layout() == torch::kStrided && t.device().is_cpu() && t.is_contiguous();
}

}  // namespace

StatusOr<std::string_view> DescribeTensor(const std::string& name, const torch::Tensor& tensor,
                                          proto::Tensor* out) {
  EDL_ASSIGN_OR_RETURN(proto::DataType dtype, ToProto(tensor.scalar_type()));
  if (!InMemory(tensor)) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", name, "' is not contiguous in memory on the CPU"));
  }
  out->set_name(name);
  out->set_dtype(dtype);
  out->clear_shape();
  for (int64_t d : tensor.sizes()) out->add_shape(d);
  out->clear_content();
  const size_t bytes = tensor.numel() * tensor.element_size();
  if (bytes == 0) return std::string_view();
  return std::string_view(static_cast<const char*>(tensor.data_ptr()), bytes);
}

Status EncodeTensor(const std::string& name, const torch::Tensor& tensor, proto::Tensor* out) {
  // A contiguous tensor in memory (every gradient and parameter of a CPU
  // model) is read where it lies: no operator is dispatched for it.
  EDL_RETURN_IF_ERROR(ToProto(tensor.scalar_type()).status());
  const torch::Tensor t = InMemory(tensor) ? tensor : tensor.detach().to(torch::kCPU).contiguous();
  EDL_ASSIGN_OR_RETURN(std::string_view bytes, DescribeTensor(name, t, out));
  // assign copies once; resize would first fill the bytes with zeros.
  if (!bytes.empty()) out->mutable_content()->assign(bytes.data(), bytes.size());
  return absl::OkStatus();
}

bool AllFinite(const torch::Tensor& tensor) {
  if (!tensor.defined() || !tensor.is_floating_point()) return true;
  const torch::ScalarType type = tensor.scalar_type();
  if (tensor.device().is_cpu() && (type == torch::kFloat32 || type == torch::kFloat64)) {
    const torch::Tensor t = tensor.contiguous();
    const auto count = static_cast<size_t>(t.numel());
    return type == torch::kFloat32 ? AllFiniteFloat32(t.data_ptr(), count)
                                   : AllFiniteFloat64(t.data_ptr(), count);
  }
  return torch::isfinite(tensor).all().item<bool>();
}

namespace {

// `message`'s dtype, shape and bytes (its content, or those at its
// shared_offset in `shared`), checked against each other.
struct Described {
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  std::string_view bytes;
};
StatusOr<Described> Describe(const proto::Tensor& message, std::string_view shared) {
  EDL_ASSIGN_OR_RETURN(torch::ScalarType dtype, FromProto(message.dtype()));
  std::vector<int64_t> shape(message.shape().begin(), message.shape().end());
  const int64_t numel = ElementCount(shape);
  if (numel < 0) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", message.name(), "': invalid shape ", c10::str(c10::IntArrayRef(shape))));
  }
  const size_t expected = numel * ElementBytes(message.dtype());
  std::string_view bytes = message.content();
  if (message.has_shared_offset()) {
    if (!bytes.empty() || message.shared_offset() > shared.size() ||
        expected > shared.size() - message.shared_offset()) {
      return absl::InvalidArgumentError(StrCat(
          "tensor '", message.name(), "': ", expected, " bytes at offset ", message.shared_offset(),
          " of shared memory of ", shared.size(), bytes.empty() ? "" : ", and a content besides"));
    }
    bytes = shared.substr(message.shared_offset(), expected);
  }
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(StrCat("tensor '", message.name(), "': ", bytes.size(),
                                             " bytes of content, ", expected,
                                             " expected for its type and shape"));
  }
  // A bool's byte is 0 or 1; another would be a value no operator expects.
  if (dtype == torch::kBool) {
    const auto other =
        std::find_if(bytes.begin(), bytes.end(), [](char c) { return c != 0 && c != 1; });
    if (other != bytes.end()) {
      return absl::InvalidArgumentError(
          StrCat("tensor '", message.name(), "': byte ", other - bytes.begin(), " of a bool is ",
                 static_cast<int>(static_cast<unsigned char>(*other)), ", not 0 or 1"));
    }
  }
  return Described{dtype, std::move(shape), bytes};
}

// Whether `t` is a tensor `d`'s bytes can be written into: of its type and
// shape, contiguous on the CPU, and held by its caller alone (no other
// handle, no view of its storage).
bool Fits(const torch::Tensor& t, const Described& d) {
  return t.defined() && t.use_count() == 1 && t.scalar_type() == d.dtype &&
         t.sizes() == c10::IntArrayRef(d.shape) && t.layout() == torch::kStrided &&
         t.device().is_cpu() && t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().use_count() == 1 && !t.requires_grad();
}

torch::Tensor Fill(const Described& d, torch::Tensor into) {
  if (!Fits(into, d)) into = torch::empty(d.shape, torch::TensorOptions().dtype(d.dtype));
  if (!d.bytes.empty()) std::memcpy(into.data_ptr(), d.bytes.data(), d.bytes.size());
  return into;
}

}  // namespace

StatusOr<torch::Tensor> DecodeTensor(const proto::Tensor& message, std::string_view shared) {
  EDL_ASSIGN_OR_RETURN(Described d, Describe(message, shared));
  return Fill(d, torch::Tensor());
}

// Whether `message` has `dst`'s type and shape; INVALID_ARGUMENT naming both
// otherwise.
Status CheckSameKind(const proto::Tensor& message, const torch::Tensor& dst) {
  EDL_ASSIGN_OR_RETURN(torch::ScalarType dtype, FromProto(message.dtype()));
  const bool same_shape =
      static_cast<size_t>(message.shape_size()) == dst.sizes().size() &&
      std::equal(message.shape().begin(), message.shape().end(), dst.sizes().begin());
  if (dtype == dst.scalar_type() && same_shape) return absl::OkStatus();
  std::vector<int64_t> shape(message.shape().begin(), message.shape().end());
  return absl::InvalidArgumentError(
      StrCat("tensor '", message.name(), "' has shape ", c10::str(c10::IntArrayRef(shape)), " ",
             c10::toString(dtype), "; the model's is ", c10::str(dst.sizes()), " ",
             c10::toString(dst.scalar_type())));
}

Status CopyInto(const proto::Tensor& message, torch::Tensor& dst, std::string_view shared) {
  EDL_RETURN_IF_ERROR(CheckSameKind(message, dst));
  if (!dst.is_contiguous()) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", message.name(), "': the model's is not contiguous"));
  }
  EDL_ASSIGN_OR_RETURN(Described d, Describe(message, shared));
  if (!d.bytes.empty()) std::memcpy(dst.data_ptr(), d.bytes.data(), d.bytes.size());
  return absl::OkStatus();
}

Status CheckModelValues(const torch::nn::Module& model, const proto::ModelValues& values) {
  for (bool is_buffer : {false, true}) {
    const char* kind = is_buffer ? "buffer" : "parameter";
    std::map<std::string_view, const proto::Tensor*> given;
    for (const proto::Tensor& t : is_buffer ? values.buffers() : values.parameters()) {
      given.emplace(t.name(), &t);
    }
    for (const auto& item : is_buffer ? model.named_buffers() : model.named_parameters()) {
      auto it = given.find(item.key());
      if (it == given.end()) {
        return absl::InvalidArgumentError(
            StrCat("it holds no ", kind, " '", item.key(), "', which the model has"));
      }
      EDL_RETURN_IF_ERROR(CheckSameKind(*it->second, item.value()));
      given.erase(it);
    }
    if (!given.empty()) {
      return absl::InvalidArgumentError(
          StrCat("the model has no ", kind, " named '", given.begin()->first, "'"));
    }
  }
  return absl::OkStatus();
}

StatusOr<NamedTensors> DecodeTensors(
    const google::protobuf::RepeatedPtrField<proto::Tensor>& messages, std::string_view shared,
    NamedTensors* reuse) {
  NamedTensors out;
  for (const proto::Tensor& m : messages) {
    EDL_ASSIGN_OR_RETURN(Described d, Describe(m, shared));
    torch::Tensor into;
    if (reuse != nullptr) {
      auto it = reuse->find(m.name());
      if (it != reuse->end()) into = std::move(it->second);  // held by `into` alone, if by anyone
    }
    if (!out.emplace(m.name(), Fill(d, std::move(into))).second) {
      return absl::InvalidArgumentError(StrCat("tensor '", m.name(), "' appears twice"));
    }
  }
  if (reuse != nullptr) *reuse = out;
  return out;
}

}  // namespace elasticdl::rpc
