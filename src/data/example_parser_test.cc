#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "elasticdl/data/example.h"
#include "testing/examples.h"

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const FeatureSpecMap& MnistSpec() {
  static const FeatureSpecMap spec = {
      {"image", FixedLenFeature({28, 28}, torch::kFloat32)},
      {"label", FixedLenFeature({1}, torch::kInt64)},
  };
  return spec;
}

TEST(ParseExampleTest, FixedLengthFeaturesHaveTheirShape) {
  auto parsed = ParseExample(testing::MnistExample(7, 128.0f), MnistSpec());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const torch::Tensor& image = (*parsed)["image"];
  EXPECT_EQ(image.sizes(), (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(image.scalar_type(), torch::kFloat32);
  EXPECT_EQ(image.sum().item<float>(), 784 * 128.0f);
  EXPECT_EQ((*parsed)["label"].item<int64_t>(), 7);
  EXPECT_THROW((*parsed)["nope"], std::out_of_range);
}

TEST(ParseExampleTest, DefaultsVarLenAndBytes) {
  proto::Example e;
  testing::AddInt64s(&e, "ids", {4, 5, 6});
  testing::AddBytes(&e, "name", {"cat"});
  FeatureSpecMap spec = {
      {"ids", VarLenFeature(torch::kInt64)},
      {"empty", VarLenFeature(torch::kFloat32)},
      {"weight", FixedLenFeature({2}, torch::kFloat32, torch::tensor({0.5f}))},
      {"name", FixedLenBytesFeature({1})},
      {"tags", VarLenBytesFeature()},
  };
  auto parsed = ParseExample(e.SerializeAsString(), spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)["ids"].equal(torch::tensor({4, 5, 6}, torch::kInt64)));
  EXPECT_EQ((*parsed)["empty"].numel(), 0);
  EXPECT_TRUE((*parsed)["weight"].equal(torch::tensor({0.5f, 0.5f})));
  EXPECT_EQ(parsed->bytes.at("name"), std::vector<std::string>{"cat"});
  EXPECT_TRUE(parsed->bytes.at("tags").empty());
}

TEST(ParseExampleTest, ErrorsNameTheFeature) {
  proto::Example e;
  testing::AddFloats(&e, "image", std::vector<float>(783, 0));
  testing::AddFloats(&e, "label", {1});
  Status s = ParseExample(e.SerializeAsString(), MnistSpec()).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("feature 'image' has 783 values, expected 784 for shape [28, 28]"));

  proto::Example wrong_kind;
  testing::AddFloats(&wrong_kind, "image", std::vector<float>(784, 0));
  testing::AddFloats(&wrong_kind, "label", {1});
  EXPECT_THAT(ParseExample(wrong_kind.SerializeAsString(), MnistSpec()).status().message(),
              HasSubstr("feature 'label' holds float_list, expected int64_list"));

  proto::Example missing;
  testing::AddFloats(&missing, "image", std::vector<float>(784, 0));
  EXPECT_THAT(ParseExample(missing.SerializeAsString(), MnistSpec()).status().message(),
              HasSubstr("feature 'label' is missing and its spec has no default"));

  EXPECT_EQ(ParseExample("\xff\xff", MnistSpec()).status().code(), StatusCode::kDataLoss);
}

TEST(ParseExampleTest, InvalidSpecsAreRejected) {
  FeatureSpecMap bad_dtype = {{"x", FixedLenFeature({1}, torch::kFloat64)}};
  EXPECT_THAT(ParseExample("", bad_dtype).status().message(),
              HasSubstr("feature 'x': dtype Double is not supported"));
  FeatureSpecMap bad_shape = {{"x", FixedLenFeature({2, -1}, torch::kFloat32)}};
  EXPECT_THAT(ParseExample("", bad_shape).status().message(),
              HasSubstr("feature 'x': shape [2, -1] is invalid"));
  FeatureSpecMap bad_default = {{"x", FixedLenFeature({3}, torch::kFloat32, torch::zeros({2}))}};
  EXPECT_THAT(ParseExample("", bad_default).status().message(),
              HasSubstr("default has 2 values, expected 1 or 3"));
}

TEST(ParseExampleBatchTest, StacksFixedAndSparsifiesVarLen) {
  proto::Example a, b;
  testing::AddFloats(&a, "x", {1, 2});
  testing::AddInt64s(&a, "ids", {9});
  testing::AddFloats(&b, "x", {3, 4});
  testing::AddInt64s(&b, "ids", {7, 8, 6});
  std::string ra = a.SerializeAsString(), rb = b.SerializeAsString();
  FeatureSpecMap spec = {{"x", FixedLenFeature({2}, torch::kFloat32)},
                         {"ids", VarLenFeature(torch::kInt64)}};
  auto parsed = ParseExampleBatch({ra, rb}, spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)["x"].equal(torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})));
  torch::Tensor ids = (*parsed)["ids"];
  EXPECT_TRUE(ids.is_sparse());
  EXPECT_EQ(ids.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(ids.to_dense().equal(torch::tensor({{9, 0, 0}, {7, 8, 6}}, torch::kInt64)));
}

TEST(ParseExampleBatchTest, DefaultsFillMissingRows) {
  proto::Example a, b;
  testing::AddInt64s(&a, "n", {5, 6});
  testing::AddFloats(&b, "other", {1});
  std::string ra = a.SerializeAsString(), rb = b.SerializeAsString();
  FeatureSpecMap spec = {{"n", FixedLenFeature({2}, torch::kInt64, torch::tensor({-1}))}};
  auto parsed = ParseExampleBatch({ra, rb, ra}, spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)["n"].equal(torch::tensor({{5, 6}, {-1, -1}, {5, 6}}, torch::kInt64)));
}

TEST(ParseExampleBatchTest, ErrorsNameTheRecord) {
  std::string good = testing::MnistExample(1);
  proto::Example bad;
  testing::AddFloats(&bad, "image", {1});
  testing::AddInt64s(&bad, "label", {1});
  std::string rb = bad.SerializeAsString();
  Status s = ParseExampleBatch({good, good, rb}, MnistSpec()).status();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("record 2 of the batch"), HasSubstr("'image'")));
}

}  // namespace
}  // namespace elasticdl
