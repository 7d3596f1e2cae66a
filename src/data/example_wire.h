// A direct reader of serialized tf.train.Example records: finds the features a
// spec asks for and decodes their values without building protobuf messages
// (the same approach as TensorFlow's fast example parsing).
//
// Semantics match protobuf's own parser: repeated `features` fields merge, a
// later map entry for a key replaces an earlier one, within a Feature the last
// oneof kind wins and repeated occurrences of the same kind merge, values may
// be packed or not, and unknown fields are skipped. Malformed wire data is
// DATA_LOSS. No LibTorch here.
#ifndef ELASTICDL_DATA_EXAMPLE_WIRE_H_
#define ELASTICDL_DATA_EXAMPLE_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "elasticdl/status.h"

namespace elasticdl::example {

enum class Kind { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

// "bytes_list", "float_list", "int64_list" or "no value".
std::string_view KindName(Kind kind);

// Where one feature's value lies inside a record; views into the record.
struct FeatureView {
  bool present = false;  // the key occurred in the record
  Kind kind = Kind::kNone;
  // Serialized {Bytes,Float,Int64}List messages of `kind`, in order; parsed
  // one after the other they merge into the feature's value.
  std::vector<std::string_view> lists;
};

// Looks up `keys` in `record`; (*out)[i] describes keys[i].
Status FindFeatures(std::string_view record, const std::vector<std::string_view>& keys,
                    std::vector<FeatureView>* out);

// Decodes a feature's values, appending them to `out`. The view's kind must
// match the function.
Status AppendFloats(const FeatureView& view, std::vector<float>* out);
Status AppendInt64s(const FeatureView& view, std::vector<int64_t>* out);
Status AppendBytes(const FeatureView& view, std::vector<std::string_view>* out);

// Every feature of a record, decoded (for `elasticdl data inspect` and tests).
struct DecodedFeature {
  std::string key;
  Kind kind = Kind::kNone;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
  std::vector<std::string> bytes;
};
// Sorted by key.
Status DecodeAll(std::string_view record, std::vector<DecodedFeature>* out);

// The writing side: a tf.train.Example of single-valued features, written
// straight to bytes. Features added in the order of their keys give
// protobuf's deterministic serialization byte for byte.
//
//   std::string record;
//   ExampleEncoder e(&record);
//   e.AddInt64("label", 1);
//   e.AddBytes("C1", "68fd1e64");
//   e.Finish();
class ExampleEncoder {
 public:
  // Starts an example in *out, replacing what it held.
  explicit ExampleEncoder(std::string* out);
  void AddInt64(std::string_view key, int64_t value);
  void AddFloat(std::string_view key, float value);
  // Lists, packed as protobuf packs them.
  void AddInt64s(std::string_view key, absl::Span<const int64_t> values);
  void AddFloats(std::string_view key, absl::Span<const float> values);
  void AddBytes(std::string_view key, std::string_view value);
  // Completes *out; add nothing after.
  void Finish();

 private:
  // One map entry whose Feature holds a list (tag `list_tag`) of
  // `list_size` bytes; the caller appends the list's contents.
  void AddEntryHeader(std::string_view key, char list_tag, size_t list_size);
  std::string* out_;
};

}  // namespace elasticdl::example

#endif  // ELASTICDL_DATA_EXAMPLE_WIRE_H_
