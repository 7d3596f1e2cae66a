// Tensors to and from their messages: what EncodeTensor writes DecodeTensor
// and CopyInto read back, whatever the tensor's layout in memory (a view
// with an offset, a transposed view, a tensor that requires grad, no
// elements), and a message that does not describe its bytes is refused.
// DecodeTensors writes over the tensors of its last call only where nobody
// else holds them.
#include "rpc/tensor_codec.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>

#include "rpc/tensor_bytes.h"

namespace elasticdl::rpc {
namespace {

// Encodes `t` and decodes it again.
torch::Tensor RoundTrip(const torch::Tensor& t) {
  proto::Tensor message;
  Status encoded = EncodeTensor("t", t, &message);
  EXPECT_TRUE(encoded.ok()) << encoded;
  EXPECT_EQ(message.content().size(), static_cast<size_t>(t.numel() * t.element_size()));
  StatusOr<torch::Tensor> decoded = DecodeTensor(message);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : torch::Tensor();
}

TEST(TensorCodecTest, ATensorComesBackWithItsValuesShapeAndType) {
  const torch::Tensor floats = torch::arange(12, torch::kFloat32).reshape({3, 4});
  const torch::Tensor back = RoundTrip(floats);
  EXPECT_EQ(back.scalar_type(), torch::kFloat32);
  EXPECT_EQ(back.sizes(), floats.sizes());
  EXPECT_TRUE(torch::equal(back, floats));

  const torch::Tensor longs = torch::tensor({int64_t{-3}, int64_t{0}, int64_t{1} << 40});
  EXPECT_TRUE(torch::equal(RoundTrip(longs), longs));
  const torch::Tensor doubles = torch::tensor({0.25, -1e300}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(RoundTrip(doubles), doubles));
}

TEST(TensorCodecTest, BuffersOfEveryTypeAModelKeepsComeBack) {
  // A causal mask, quantization tables, half-precision statistics.
  const torch::Tensor mask = torch::triu(torch::ones({4, 4}, torch::kBool), 1);
  for (const torch::Tensor& t : {mask, torch::tensor({0, 7, 255}, torch::kUInt8),
                                 torch::tensor({-128, 0, 127}, torch::kInt8),
                                 torch::tensor({-32768, 1, 32767}, torch::kInt16),
                                 torch::tensor({0.5, -65504.0, 1e-3}, torch::kFloat16),
                                 torch::tensor({0.5, -3e38, 1e-3}, torch::kBFloat16)}) {
    const torch::Tensor back = RoundTrip(t);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << t;
    EXPECT_TRUE(torch::equal(back, t)) << t;
  }
}

TEST(TensorCodecTest, EveryTypeOnTheWireHasLibTorchsSize) {
  // rpc/tensor_bytes.h sizes values without LibTorch (shared regions): a
  // type the codec sends must have its size there, LibTorch's.
  std::set<int> sent;
  for (torch::ScalarType type :
       {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32, torch::kBool, torch::kUInt8,
        torch::kInt8, torch::kInt16, torch::kFloat16, torch::kBFloat16}) {
    proto::Tensor message;
    ASSERT_TRUE(EncodeTensor("t", torch::zeros({2, 3}, type), &message).ok()) << type;
    EXPECT_EQ(ElementBytes(message.dtype()), static_cast<int64_t>(c10::elementSize(type))) << type;
    EXPECT_EQ(ValueBytes(message), static_cast<int64_t>(message.content().size())) << type;
    sent.insert(message.dtype());
  }
  // And every type of the protocol but DT_INVALID is one of them.
  const google::protobuf::EnumDescriptor* types = proto::DataType_descriptor();
  for (int i = 0; i < types->value_count(); ++i) {
    const int number = types->value(i)->number();
    if (number == proto::DT_INVALID) continue;
    EXPECT_EQ(sent.count(number), 1u) << types->value(i)->name() << " is not sent";
  }
  proto::Tensor bad;
  bad.set_dtype(proto::DT_FLOAT32);
  bad.add_shape(3);
  bad.add_shape(-1);
  EXPECT_EQ(ValueBytes(bad), -1);
  EXPECT_EQ(DecodeTensor(bad).status().message(), "tensor '': invalid shape [3, -1]");
}

TEST(TensorCodecTest, ViewsAreEncodedByTheirValuesNotTheirStorage) {
  const torch::Tensor base = torch::arange(20, torch::kFloat32).reshape({4, 5});
  // Contiguous, but not at the start of its storage.
  const torch::Tensor rows = base.narrow(0, 2, 2);
  ASSERT_TRUE(rows.is_contiguous());
  ASSERT_GT(rows.storage_offset(), 0);
  EXPECT_TRUE(torch::equal(RoundTrip(rows), rows));
  // Not contiguous: its values in the order of its own indices.
  const torch::Tensor transposed = base.t();
  ASSERT_FALSE(transposed.is_contiguous());
  const torch::Tensor back = RoundTrip(transposed);
  EXPECT_EQ(back.sizes(), transposed.sizes());
  EXPECT_TRUE(torch::equal(back, transposed));
  // A parameter (requires grad) and its gradient.
  torch::Tensor weight = torch::ones({2, 3}, torch::requires_grad());
  (weight * 3).sum().backward();
  EXPECT_TRUE(torch::equal(RoundTrip(weight), torch::ones({2, 3})));
  EXPECT_TRUE(torch::equal(RoundTrip(weight.grad()), torch::full({2, 3}, 3.0)));
}

TEST(TensorCodecTest, ATensorWithoutElementsHasNoContent) {
  proto::Tensor message;
  message.set_content("left over");
  ASSERT_TRUE(EncodeTensor("empty", torch::zeros({0, 7}), &message).ok());
  EXPECT_TRUE(message.content().empty());
  ASSERT_EQ(message.shape_size(), 2);
  EXPECT_EQ(message.shape(1), 7);
  StatusOr<torch::Tensor> back = DecodeTensor(message);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sizes(), torch::IntArrayRef({0, 7}));
}

TEST(TensorCodecTest, CopyIntoFillsATensorOfTheSameShapeAndTypeOnly) {
  proto::Tensor message;
  ASSERT_TRUE(EncodeTensor("w", torch::arange(6, torch::kFloat32).reshape({2, 3}), &message).ok());
  torch::Tensor into = torch::zeros({2, 3});
  ASSERT_TRUE(CopyInto(message, into).ok());
  EXPECT_TRUE(torch::equal(into, torch::arange(6, torch::kFloat32).reshape({2, 3})));

  torch::Tensor other_shape = torch::zeros({3, 2});
  Status s = CopyInto(message, other_shape);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("'w'"), std::string::npos) << s;
  torch::Tensor other_type = torch::zeros({2, 3}, torch::kFloat64);
  EXPECT_EQ(CopyInto(message, other_type).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorCodecTest, ATensorDescribedWhereItLiesIsReadFromThereAndCopiedIntoPlace) {
  const torch::Tensor base = torch::arange(20, torch::kFloat32).reshape({4, 5});
  const torch::Tensor rows = base.narrow(0, 1, 2);  // contiguous, at an offset
  proto::Tensor message;
  message.set_content("left over");
  StatusOr<std::string_view> bytes = DescribeTensor("w", rows, &message);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(message.content().empty());
  EXPECT_EQ(message.name(), "w");
  ASSERT_EQ(message.shape_size(), 2);
  EXPECT_EQ(message.shape(0), 2);
  EXPECT_EQ(bytes->size(), 10 * sizeof(float));
  EXPECT_EQ(static_cast<const void*>(bytes->data()), rows.data_ptr());  // not a copy

  // The same bytes at an offset of a shared area, copied into a tensor.
  std::string area(64, '\0');
  area.append(bytes->data(), bytes->size());
  message.set_shared_offset(64);
  torch::Tensor into = torch::zeros({2, 5});
  Status copied = CopyInto(message, into, area);
  ASSERT_TRUE(copied.ok()) << copied;
  EXPECT_TRUE(torch::equal(into, rows));
  // Bytes that would lie beyond the area are refused, naming the tensor.
  Status beyond = CopyInto(message, into, std::string_view(area).substr(0, 100));
  EXPECT_EQ(beyond.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(beyond.message()).find("'w'"), std::string::npos) << beyond;

  // A tensor not laid out in memory as its values' order has no such bytes.
  StatusOr<std::string_view> transposed = DescribeTensor("t", base.t(), &message);
  EXPECT_EQ(transposed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(transposed.status().message()).find("'t'"), std::string::npos);
}

TEST(TensorCodecTest, MessagesThatDoNotDescribeTheirBytesAreRefused) {
  proto::Tensor message;
  ASSERT_TRUE(EncodeTensor("b", torch::ones({4}), &message).ok());
  message.mutable_content()->pop_back();
  StatusOr<torch::Tensor> short_content = DecodeTensor(message);
  EXPECT_EQ(short_content.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(short_content.status().message()).find("'b'"), std::string::npos);

  ASSERT_TRUE(EncodeTensor("b", torch::ones({4}), &message).ok());
  message.set_shape(0, -1);
  EXPECT_EQ(DecodeTensor(message).status().code(), absl::StatusCode::kInvalidArgument);

  proto::Tensor unused;
  Status unsupported = EncodeTensor("c", torch::ones({2}, torch::kComplexFloat), &unused);
  EXPECT_EQ(unsupported.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unsupported.message(), "tensors of type ComplexFloat cannot be sent");

  // A bool is a byte of 0 or 1.
  ASSERT_TRUE(EncodeTensor("m", torch::ones({3}, torch::kBool), &message).ok());
  (*message.mutable_content())[1] = 2;
  StatusOr<torch::Tensor> not_a_bool = DecodeTensor(message);
  EXPECT_EQ(not_a_bool.status().message(), "tensor 'm': byte 1 of a bool is 2, not 0 or 1");
}

// A push's gradients, as the parameter server decodes them.
google::protobuf::RepeatedPtrField<proto::Tensor> Gradients(float w, float b, int64_t w_size = 3) {
  google::protobuf::RepeatedPtrField<proto::Tensor> out;
  EXPECT_TRUE(EncodeTensor("w", torch::full({w_size}, w), out.Add()).ok());
  EXPECT_TRUE(EncodeTensor("b", torch::full({1}, b), out.Add()).ok());
  return out;
}

TEST(TensorCodecTest, DecodeTensorsWritesOverTheTensorsNobodyHoldsAnyLonger) {
  NamedTensors reuse;
  StatusOr<NamedTensors> first = DecodeTensors(Gradients(1, 2), {}, &reuse);
  ASSERT_TRUE(first.ok()) << first.status();
  const void* w_bytes = first->at("w").data_ptr();
  const void* b_bytes = first->at("b").data_ptr();
  // The caller keeps "b" (as a store keeps a gradient that waits for a
  // step) and lets go of "w".
  torch::Tensor kept = first->at("b");
  first->clear();

  StatusOr<NamedTensors> second = DecodeTensors(Gradients(3, 4), {}, &reuse);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->at("w").data_ptr(), w_bytes);  // written over
  EXPECT_TRUE(torch::equal(second->at("w"), torch::full({3}, 3.0F)));
  EXPECT_NE(second->at("b").data_ptr(), b_bytes);  // still held: a new one
  EXPECT_TRUE(torch::equal(second->at("b"), torch::full({1}, 4.0F)));
  EXPECT_TRUE(torch::equal(kept, torch::full({1}, 2.0F)));  // untouched

  // A view of a tensor's storage holds it too, and another shape needs
  // another tensor.
  torch::Tensor view = second->at("w").narrow(0, 0, 1);
  second->clear();
  StatusOr<NamedTensors> third = DecodeTensors(Gradients(5, 6, 4), {}, &reuse);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(torch::equal(third->at("w"), torch::full({4}, 5.0F)));
  EXPECT_FLOAT_EQ(view[0].item<float>(), 3);
  third->clear();
  view = torch::Tensor();
  StatusOr<NamedTensors> fourth = DecodeTensors(Gradients(7, 8), {}, &reuse);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_TRUE(torch::equal(fourth->at("w"), torch::full({3}, 7.0F)));
  EXPECT_TRUE(torch::equal(fourth->at("b"), torch::full({1}, 8.0F)));
}

}  // namespace
}  // namespace elasticdl::rpc
