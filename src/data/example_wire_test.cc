#include "data/example_wire.h"

#include <gmock/gmock.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include "testing/examples.h"

namespace elasticdl::example {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<FeatureView> Find(const std::string& record, std::vector<std::string_view> keys) {
  std::vector<FeatureView> views;
  Status s = FindFeatures(record, keys, &views);
  EXPECT_TRUE(s.ok()) << s;
  return views;
}

TEST(ExampleWireTest, FindsAndDecodesEachKind) {
  proto::Example e;
  testing::AddFloats(&e, "f", {1.5f, -2.0f});
  testing::AddInt64s(&e, "i", {7, -1, INT64_MIN});
  testing::AddBytes(&e, "b", {"x", "", "yz"});
  std::string record = e.SerializeAsString();
  auto views = Find(record, {"f", "i", "b", "missing"});
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string_view> bytes;
  ASSERT_TRUE(AppendFloats(views[0], &floats).ok());
  ASSERT_TRUE(AppendInt64s(views[1], &ints).ok());
  ASSERT_TRUE(AppendBytes(views[2], &bytes).ok());
  EXPECT_THAT(floats, ElementsAre(1.5f, -2.0f));
  EXPECT_THAT(ints, ElementsAre(7, -1, INT64_MIN));
  EXPECT_THAT(bytes, ElementsAre("x", "", "yz"));
  EXPECT_FALSE(views[3].present);
  EXPECT_THAT(AppendFloats(views[1], &floats).message(), HasSubstr("holds int64_list"));
}

TEST(ExampleWireTest, FollowsProtobufMergeSemantics) {
  // Two `features` fields: entries merge, a later entry for a key replaces
  // the earlier one.
  proto::Example first, second;
  testing::AddFloats(&first, "a", {1});
  testing::AddFloats(&first, "b", {2});
  testing::AddInt64s(&second, "a", {3, 4});
  std::string record = first.SerializeAsString() + second.SerializeAsString();
  proto::Example merged;
  ASSERT_TRUE(merged.ParseFromString(record));
  auto views = Find(record, {"a", "b"});
  EXPECT_EQ(views[0].kind, Kind::kInt64);
  std::vector<int64_t> ints;
  ASSERT_TRUE(AppendInt64s(views[0], &ints).ok());
  EXPECT_THAT(ints, ElementsAre(3, 4));
  EXPECT_EQ(merged.features().feature().at("a").int64_list().value_size(), 2);
  std::vector<float> floats;
  ASSERT_TRUE(AppendFloats(views[1], &floats).ok());
  EXPECT_THAT(floats, ElementsAre(2));
}

TEST(ExampleWireTest, AcceptsUnpackedValuesAndSkipsUnknownFields) {
  // FloatList{value: 1.0 (fixed32, unpacked), value: 2.0}, inside
  // Feature{float_list}, inside an entry{key "k"}, plus an unknown field 9.
  std::string float_list = std::string("\x0d\x00\x00\x80\x3f\x0d\x00\x00\x00\x40", 10);
  std::string feature = "\x12" + std::string(1, static_cast<char>(float_list.size())) + float_list;
  std::string entry =
      std::string("\x0a\x01k\x12", 4) + std::string(1, static_cast<char>(feature.size())) + feature;
  std::string features = "\x0a" + std::string(1, static_cast<char>(entry.size())) + entry;
  std::string record = "\x0a" + std::string(1, static_cast<char>(features.size())) + features +
                       std::string("\x48\x05", 2);
  proto::Example check;
  ASSERT_TRUE(check.ParseFromString(record));
  auto views = Find(record, {"k"});
  std::vector<float> floats;
  ASSERT_TRUE(AppendFloats(views[0], &floats).ok());
  EXPECT_THAT(floats, ElementsAre(1.0f, 2.0f));
}

TEST(ExampleWireTest, MalformedBytesAreDataLoss) {
  std::string record = testing::MnistExample(3);
  std::vector<FeatureView> views;
  for (size_t cut : {size_t{1}, size_t{5}, record.size() / 2, record.size() - 1}) {
    Status s = FindFeatures(record.substr(0, cut), {"image", "label"}, &views);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << cut;
    EXPECT_THAT(s.message(), HasSubstr("malformed tf.train.Example")) << cut;
  }
  EXPECT_EQ(FindFeatures(std::string("\x0f", 1), {"x"}, &views).code(), StatusCode::kDataLoss);
}

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Inputs the differential fuzzer found where an earlier reader disagreed with
// protobuf: each is malformed for protobuf, and must be for us.
TEST(ExampleWireTest, RejectsWhatProtobufRejects) {
  std::string deep_groups = FromHex("0ace010acb010a016112c50112c201");
  deep_groups += std::string(97, '\x63') + std::string(97, '\x64');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"malformed Feature of a replaced entry", FromHex("0a100a070a016112021a050a050a01611200")},
      {"malformed list of an overridden oneof kind", FromHex("0a0d0a0b0a0161120612020a051a00")},
      {"tag over 5 bytes", FromHex("90808080800000")},
      {"length over 5 bytes", FromHex("12808080808000")},
      {"length of 2^32", FromHex("128080808010")},
      {"an earlier key occurrence not UTF-8", FromHex("0a0a0a080a01ff0a01611200")},
      {"groups past protobuf's recursion limit", deep_groups},
  };
  for (const auto& [what, record] : cases) {
    proto::Example check;
    EXPECT_FALSE(check.ParseFromString(record)) << what;
    std::vector<DecodedFeature> all;
    Status s = DecodeAll(record, &all);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what;
    std::vector<FeatureView> views;
    EXPECT_EQ(FindFeatures(record, {"a"}, &views).code(), StatusCode::kDataLoss) << what;
  }
  // One group fewer is within the limit for both.
  std::string ok_groups = FromHex("0acc010ac9010a016112c30112c001");
  ok_groups += std::string(96, '\x63') + std::string(96, '\x64');
  proto::Example check;
  EXPECT_TRUE(check.ParseFromString(ok_groups));
  std::vector<DecodedFeature> all;
  EXPECT_TRUE(DecodeAll(ok_groups, &all).ok());
}

TEST(ExampleWireTest, AKeyAskedForTwiceIsFoundTwice) {
  proto::Example e;
  testing::AddInt64s(&e, "a", {4});
  auto views = Find(e.SerializeAsString(), {"a", "b", "a"});
  EXPECT_TRUE(views[0].present);
  EXPECT_FALSE(views[1].present);
  EXPECT_TRUE(views[2].present);
  std::vector<int64_t> ints;
  ASSERT_TRUE(AppendInt64s(views[2], &ints).ok());
  EXPECT_THAT(ints, ElementsAre(4));
}

TEST(ExampleWireTest, EmptyPackedFloatsAreZeroValues) {
  std::string record = FromHex("0a080a06120412020a00");
  proto::Example check;
  ASSERT_TRUE(check.ParseFromString(record));
  std::vector<DecodedFeature> all;
  ASSERT_TRUE(DecodeAll(record, &all).ok());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, Kind::kFloat);
  EXPECT_TRUE(all[0].floats.empty());
}

TEST(ExampleWireTest, DecodeAllListsEveryFeatureSorted) {
  proto::Example e;
  testing::AddInt64s(&e, "z", {1});
  testing::AddBytes(&e, "a", {"hi"});
  std::vector<DecodedFeature> all;
  ASSERT_TRUE(DecodeAll(e.SerializeAsString(), &all).ok());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].key, "a");
  EXPECT_THAT(all[0].bytes, ElementsAre("hi"));
  EXPECT_EQ(all[1].key, "z");
  EXPECT_THAT(all[1].int64s, ElementsAre(1));
}

TEST(ExampleWireTest, TheEncoderWritesWhatProtobufReads) {
  std::string record;
  ExampleEncoder encoder(&record);
  encoder.AddBytes("a", "text");
  encoder.AddFloat("b", -2.5f);
  encoder.AddInt64("c", -7);
  encoder.AddFloat("d", 1e-30f);
  encoder.Finish();
  proto::Example parsed;
  ASSERT_TRUE(parsed.ParseFromString(record));
  const auto& features = parsed.features().feature();
  EXPECT_EQ(features.at("a").bytes_list().value(0), "text");
  EXPECT_EQ(features.at("b").float_list().value(0), -2.5f);
  EXPECT_EQ(features.at("c").int64_list().value(0), -7);
  EXPECT_EQ(features.at("d").float_list().value(0), 1e-30f);
  std::vector<DecodedFeature> all;
  ASSERT_TRUE(DecodeAll(record, &all).ok());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_THAT(all[1].floats, ElementsAre(-2.5f));
  EXPECT_THAT(all[2].int64s, ElementsAre(-7));
}

TEST(ExampleWireTest, TheEncoderWritesListsAsProtobufPacksThem) {
  std::string record;
  ExampleEncoder encoder(&record);
  encoder.AddInt64s("e", {});
  const std::vector<float> floats = {0.5f, -1, 3e8f};
  encoder.AddFloats("f", floats);
  const std::vector<int64_t> ids = {0, 300, -1, int64_t{1} << 40};
  encoder.AddInt64s("i", ids);
  encoder.Finish();
  proto::Example parsed;
  ASSERT_TRUE(parsed.ParseFromString(record));
  const auto& features = parsed.features().feature();
  EXPECT_EQ(features.at("e").int64_list().value_size(), 0);
  EXPECT_THAT(features.at("f").float_list().value(), ElementsAre(0.5f, -1, 3e8f));
  EXPECT_THAT(features.at("i").int64_list().value(), ElementsAre(0, 300, -1, int64_t{1} << 40));
  std::string reserialized;
  {
    google::protobuf::io::StringOutputStream stream(&reserialized);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);  // map entries by key
    ASSERT_TRUE(parsed.SerializeToCodedStream(&out));
  }
  EXPECT_EQ(reserialized, record);
}

}  // namespace
}  // namespace elasticdl::example
