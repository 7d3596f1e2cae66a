// Differential fuzzer for the tf.train.Example wire reader
// (data/example_wire.h) against protobuf's generated parser
// (elasticdl::proto::Example), whose semantics the reader promises to match.
//
// The input is one serialized record, parsed by both:
//  * protobuf accepts it: DecodeAll must succeed with the same features (keys,
//    oneof kinds, values; floats compared bit for bit, so NaNs compare), and
//    FindFeatures + Append{Floats,Int64s,Bytes} must agree on a few of its
//    keys, on a key it lacks, and refuse the wrong kinds with INVALID_ARGUMENT;
//  * protobuf rejects it: DecodeAll must fail too, with DATA_LOSS.
// FindFeatures is not held to the second rule: it looks only at the features
// it is asked for, by design (data/example_wire.h).
//
// With --skip_rejected (libFuzzer ignores flags starting with "--") the second
// rule is not checked either, to look past divergences where protobuf rejects
// and the reader accepts (fuzz/crashes/README.md has the ones found so far) for
// the more serious kind: records protobuf accepts that the reader rejects or
// reads differently.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "data/example_wire.h"
#include "elasticdl/proto/example.pb.h"
#include "fuzz_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

using example::DecodedFeature;
using example::FeatureView;
using example::Kind;

std::string Hex(std::string_view bytes) {
  std::string hex;
  for (size_t i = 0; i < bytes.size() && i < 512; ++i) {
    hex += fmt::format("{:02x}", static_cast<uint8_t>(bytes[i]));
  }
  if (bytes.size() > 512) hex += "...";
  return hex;
}

Kind KindOf(const proto::Feature& f) {
  switch (f.kind_case()) {
    case proto::Feature::kBytesList:
      return Kind::kBytes;
    case proto::Feature::kFloatList:
      return Kind::kFloat;
    case proto::Feature::kInt64List:
      return Kind::kInt64;
    case proto::Feature::KIND_NOT_SET:
      break;
  }
  return Kind::kNone;
}

bool SameFloats(const google::protobuf::RepeatedField<float>& want, const float* got, size_t n) {
  return static_cast<size_t>(want.size()) == n &&
         (n == 0 || std::memcmp(want.data(), got, n * sizeof(float)) == 0);
}

bool SameInt64s(const google::protobuf::RepeatedField<int64_t>& want, const int64_t* got,
                size_t n) {
  return static_cast<size_t>(want.size()) == n &&
         (n == 0 || std::memcmp(want.data(), got, n * sizeof(int64_t)) == 0);
}

template <typename String>
bool SameBytes(const google::protobuf::RepeatedPtrField<std::string>& want, const String* got,
               size_t n) {
  if (static_cast<size_t>(want.size()) != n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (want.Get(static_cast<int>(i)) != got[i]) return false;
  }
  return true;
}

void CheckDecodeAll(std::string_view record,
                    const std::map<std::string, const proto::Feature*>& want) {
  std::vector<DecodedFeature> got;
  Status s = example::DecodeAll(record, &got);
  EDL_FUZZ_CHECK(s.ok(), "protobuf accepts the record, DecodeAll rejects it: {}\n  record: {}",
                 s.ToString(), Hex(record));
  EDL_FUZZ_CHECK(got.size() == want.size(),
                 "protobuf finds {} features, DecodeAll {}\n  record: {}", want.size(), got.size(),
                 Hex(record));
  auto it = want.begin();
  for (const DecodedFeature& d : got) {
    const auto& [key, feature] = *it++;
    EDL_FUZZ_CHECK(d.key == key, "DecodeAll key '{}', protobuf '{}'\n  record: {}", Hex(d.key),
                   Hex(key), Hex(record));
    EDL_FUZZ_CHECK(d.kind == KindOf(*feature),
                   "feature '{}': DecodeAll {}, protobuf {}\n  record: {}", Hex(key),
                   example::KindName(d.kind), example::KindName(KindOf(*feature)), Hex(record));
    bool same = SameFloats(feature->float_list().value(), d.floats.data(), d.floats.size()) &&
                SameInt64s(feature->int64_list().value(), d.int64s.data(), d.int64s.size()) &&
                SameBytes(feature->bytes_list().value(), d.bytes.data(), d.bytes.size());
    EDL_FUZZ_CHECK(same, "feature '{}' ({}): DecodeAll and protobuf values differ\n  record: {}",
                   Hex(key), example::KindName(d.kind), Hex(record));
  }
}

// Checks FindFeatures and the Append functions on one looked-up key.
void CheckView(std::string_view record, std::string_view key, const FeatureView& view,
               const proto::Feature* want) {
  EDL_FUZZ_CHECK(view.present == (want != nullptr),
                 "FindFeatures: '{}' present {}, protobuf {}\n  record: {}", Hex(key), view.present,
                 want != nullptr, Hex(record));
  const proto::Feature empty;
  if (want == nullptr) want = &empty;
  EDL_FUZZ_CHECK(view.kind == KindOf(*want), "FindFeatures: '{}' is {}, protobuf {}\n  record: {}",
                 Hex(key), example::KindName(view.kind), example::KindName(KindOf(*want)),
                 Hex(record));
  // Each Append keeps what its output held and adds the values, or refuses
  // a feature of another kind.
  std::vector<float> floats = {-1.0f};
  Status s = example::AppendFloats(view, &floats);
  if (view.kind == Kind::kFloat) {
    EDL_FUZZ_CHECK(s.ok() && floats[0] == -1.0f &&
                       SameFloats(want->float_list().value(), floats.data() + 1, floats.size() - 1),
                   "AppendFloats('{}'): {} or values differ\n  record: {}", Hex(key), s.ToString(),
                   Hex(record));
  } else {
    EDL_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument && floats.size() == 1,
                   "AppendFloats on a {}: {}", example::KindName(view.kind), s.ToString());
  }
  std::vector<int64_t> int64s = {-1};
  s = example::AppendInt64s(view, &int64s);
  if (view.kind == Kind::kInt64) {
    EDL_FUZZ_CHECK(s.ok() && int64s[0] == -1 &&
                       SameInt64s(want->int64_list().value(), int64s.data() + 1, int64s.size() - 1),
                   "AppendInt64s('{}'): {} or values differ\n  record: {}", Hex(key), s.ToString(),
                   Hex(record));
  } else {
    EDL_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument && int64s.size() == 1,
                   "AppendInt64s on a {}: {}", example::KindName(view.kind), s.ToString());
  }
  std::vector<std::string_view> bytes = {"sentinel"};
  s = example::AppendBytes(view, &bytes);
  if (view.kind == Kind::kBytes) {
    EDL_FUZZ_CHECK(s.ok() && bytes[0] == "sentinel" &&
                       SameBytes(want->bytes_list().value(), bytes.data() + 1, bytes.size() - 1),
                   "AppendBytes('{}'): {} or values differ\n  record: {}", Hex(key), s.ToString(),
                   Hex(record));
  } else {
    EDL_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument && bytes.size() == 1,
                   "AppendBytes on a {}: {}", example::KindName(view.kind), s.ToString());
  }
}

void CheckFindFeatures(std::string_view record,
                       const std::map<std::string, const proto::Feature*>& want) {
  // Up to three keys the record has (the first one twice), and one it lacks.
  std::vector<std::string_view> keys;
  for (const auto& [key, feature] : want) {
    if (keys.size() == 3) break;
    keys.push_back(key);
  }
  if (!keys.empty()) keys.push_back(keys[0]);
  std::string absent = "absent";
  while (want.count(absent) != 0) absent += "!";
  keys.push_back(absent);

  std::vector<FeatureView> views;
  Status s = example::FindFeatures(record, keys, &views);
  EDL_FUZZ_CHECK(s.ok(), "protobuf accepts the record, FindFeatures rejects it: {}\n  record: {}",
                 s.ToString(), Hex(record));
  EDL_FUZZ_CHECK(views.size() == keys.size(), "FindFeatures: {} views for {} keys", views.size(),
                 keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = want.find(std::string(keys[i]));
    CheckView(record, keys[i], views[i], it == want.end() ? nullptr : it->second);
  }
}

// Hand-encoded wire data, for what SerializeToString never writes.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Tag(uint32_t field, uint32_t wire_type) { return Varint(field << 3 | wire_type); }
std::string Field(uint32_t field, std::string_view bytes) {
  return Tag(field, 2) + Varint(bytes.size()) + std::string(bytes);
}
std::string Entry(std::string_view key, std::string_view feature) {
  return Field(1, Field(1, Field(1, key) + Field(2, feature)));  // Example.features.feature
}

// With map entries in key order, so that the seeds are the same on every run.
std::string Serialize(const proto::Example& example) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

Status WriteSeeds(const std::string& dir) {
  proto::Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  auto* floats = features["image"].mutable_float_list();
  for (float v : {1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    floats->add_value(v);
  }
  auto* ints = features["label"].mutable_int64_list();
  for (int64_t v : {int64_t{7}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    ints->add_value(v);
  }
  auto* strings = features["name"].mutable_bytes_list();
  for (const char* v : {"cat", "", "\xff\xfe"}) strings->add_value(v);
  features["none"];  // a Feature with no kind
  const std::string full = Serialize(ex);
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "three_kinds", full));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "empty", ""));

  // Unpacked values, unknown fields of every wire type, and a group.
  const std::string unpacked_floats = Tag(1, 5) + std::string("\x00\x00\x80\x3f", 4) + Tag(1, 5) +
                                      std::string("\x00\x00\xc0\x7f", 4);
  const std::string unpacked_ints = Tag(1, 0) + Varint(3) + Tag(1, 0) + Varint(~uint64_t{0});
  const std::string unknown = Tag(9, 0) + Varint(1) + Tag(10, 1) + std::string(8, 'u') +
                              Tag(11, 5) + "uuuu" + Tag(12, 3) + Tag(1, 0) + Varint(5) + Tag(12, 4);
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "unpacked_and_unknown",
                                unknown + Entry("f", Field(2, unpacked_floats + unknown)) +
                                    Entry("i", Field(3, unpacked_ints) + unknown) +
                                    Field(15, "skipped")));

  // Merges: a second Example appended merges into the first; the later entry
  // for a key replaces the earlier one, and within a Feature the last kind
  // wins while lists of one kind merge.
  proto::Example later;
  (*later.mutable_features()->mutable_feature())["label"].mutable_float_list()->add_value(2.0f);
  std::string merged =
      full + Serialize(later) +
      Entry("m", Field(3, Field(1, Varint(1))) + Field(2, Field(1, "\x01\x02\x03\x04")) +
                     Field(2, Field(1, "\x05\x06\x07\x08")));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "merges", merged));
  return absl::OkStatus();
}

// Set once from the command line, before the first input.
bool skip_rejected = false;

}  // namespace
}  // namespace elasticdl::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  elasticdl::fuzz::HandleSeedFlag(*argc, *argv, &elasticdl::fuzz::WriteSeeds);
  for (int i = 1; i < *argc; ++i) {
    if (std::string_view((*argv)[i]) == "--skip_rejected") elasticdl::fuzz::skip_rejected = true;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  using namespace elasticdl::fuzz;
  const std::string_view record(reinterpret_cast<const char*>(data), size);
  proto::Example message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) {
    if (skip_rejected) return 0;
    std::vector<DecodedFeature> got;
    Status s = example::DecodeAll(record, &got);
    EDL_FUZZ_CHECK(!s.ok(), "protobuf rejects the record, DecodeAll accepts it\n  record: {}",
                   Hex(record));
    EDL_FUZZ_CHECK(s.code() == StatusCode::kDataLoss,
                   "DecodeAll failed with {}, expected DATA_LOSS\n  record: {}", s.ToString(),
                   Hex(record));
    return 0;
  }
  std::map<std::string, const proto::Feature*> want;
  for (const auto& [key, feature] : message.features().feature()) want[key] = &feature;
  CheckDecodeAll(record, want);
  CheckFindFeatures(record, want);
  return 0;
}
