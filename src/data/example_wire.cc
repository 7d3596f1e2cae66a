#include "data/example_wire.h"

#include <google/protobuf/stubs/common.h>

#include <cstring>
#include <map>

#include "common/strings.h"

namespace elasticdl::example {
namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Nesting as protobuf's parser counts it against its recursion limit: every
// nested message and every group takes one level of kRecursionBudget.
constexpr int kRecursionBudget = 100;
constexpr int kFeaturesDepth = 1;
constexpr int kEntryDepth = 2;
constexpr int kFeatureDepth = 3;
constexpr int kListDepth = 4;

// One field of a message as it lies on the wire.
struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  uint64_t varint = 0;     // kVarint
  uint32_t fixed32 = 0;    // kFixed32
  std::string_view bytes;  // kLengthDelimited
};

// Walks the fields of one serialized message, skipping groups. Reads tags,
// lengths and varints with exactly the limits of protobuf's own parser (tags
// and lengths in at most 5 bytes, lengths below 2 GiB, varints in at most 10
// bytes), so that it accepts and rejects the same inputs.
class FieldReader {
 public:
  // `message` lies inside `record` (for error offsets) at nesting `depth`.
  FieldReader(std::string_view record, std::string_view message, int depth)
      : record_(record), p_(message.data()), end_(message.data() + message.size()), depth_(depth) {}

  // Returns false at the end of the message or on malformed data; ok() tells.
  bool Next(Field* f) {
    while (p_ < end_) {
      const char* start = p_;
      uint32_t tag;
      if (!ReadTag(&tag)) return Fail(start, "bad field tag");
      f->number = tag >> 3;
      f->type = tag & 7;
      if (f->number == 0) return Fail(start, "field number 0");
      if (f->type == kStartGroup) {
        if (!SkipGroup(f->number, depth_ + 1)) return false;
        continue;  // groups are never fields we want
      }
      if (f->type == kEndGroup) return Fail(start, "unmatched end-group");
      return ReadValue(f, start);
    }
    return false;
  }

  bool ok() const { return error_ == nullptr; }
  Status status() const {
    if (ok()) return absl::OkStatus();
    return absl::DataLossError(
        StrCat("malformed tf.train.Example: ", error_, " at byte ", error_at_ - record_.data()));
  }

 private:
  bool Fail(const char* at, const char* what) {
    if (error_ == nullptr) {
      error_ = what;
      error_at_ = at;
    }
    return false;
  }

  // Reads the value of a field whose tag was just read.
  bool ReadValue(Field* f, const char* start) {
    switch (f->type) {
      case kVarint:
        return ReadVarint64(&f->varint) || Fail(start, "truncated or overlong varint");
      case kFixed64:
        if (end_ - p_ < 8) return Fail(start, "truncated fixed64");
        p_ += 8;
        return true;
      case kFixed32:
        if (end_ - p_ < 4) return Fail(start, "truncated fixed32");
        std::memcpy(&f->fixed32, p_, 4);
        p_ += 4;
        return true;
      case kLengthDelimited: {
        uint32_t len;
        if (!ReadSize(&len)) return Fail(start, "bad length");
        if (len > static_cast<uint64_t>(end_ - p_)) {
          return Fail(start, "length-delimited field runs past the end of its message");
        }
        f->bytes = std::string_view(p_, len);
        p_ += len;
        return true;
      }
      default:
        return Fail(start, "invalid wire type");
    }
  }

  // Skips a group up to its matching end-group tag.
  bool SkipGroup(uint32_t number, int depth) {
    if (depth > kRecursionBudget) return Fail(p_, "nesting deeper than 100");
    while (p_ < end_) {
      const char* start = p_;
      uint32_t tag;
      if (!ReadTag(&tag)) return Fail(start, "bad field tag");
      Field f;
      f.number = tag >> 3;
      f.type = tag & 7;
      if (f.number == 0) return Fail(start, "field number 0");
      if (f.type == kEndGroup) {
        return f.number == number || Fail(start, "mismatched end-group");
      }
      if (f.type == kStartGroup) {
        if (!SkipGroup(f.number, depth + 1)) return false;
      } else if (!ReadValue(&f, start)) {
        return false;
      }
    }
    return Fail(p_, "unterminated group");
  }

  // A tag: at most 5 bytes, high bits past 32 dropped (as protobuf).
  bool ReadTag(uint32_t* tag) {
    uint32_t v = 0;
    for (int i = 0; i < 5 && p_ < end_; ++i) {
      auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
      if (b < 0x80) {
        *tag = v;
        return true;
      }
    }
    return false;
  }

  // A length: at most 5 bytes, below 2^31.
  bool ReadSize(uint32_t* size) {
    uint32_t v = 0;
    for (int i = 0; i < 5 && p_ < end_; ++i) {
      auto b = static_cast<uint8_t>(*p_++);
      if (i == 4 && b >= 8) return false;
      v |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
      if (b < 0x80) {
        *size = v;
        return true;
      }
    }
    return false;
  }

 public:
  // A varint of at most 10 bytes, high bits past 64 dropped (as protobuf).
  static bool ReadVarint64(const char** p, const char* end, uint64_t* value) {
    uint64_t v = 0;
    for (int i = 0; i < 10 && *p < end; ++i) {
      auto b = static_cast<uint8_t>(*(*p)++);
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (b < 0x80) {
        *value = v;
        return true;
      }
    }
    return false;
  }

 private:
  bool ReadVarint64(uint64_t* value) { return ReadVarint64(&p_, end_, value); }

  std::string_view record_;
  const char* p_;
  const char* end_;
  int depth_;
  const char* error_ = nullptr;
  const char* error_at_ = nullptr;
};

Status Malformed(std::string_view record, const char* at, const char* what) {
  return absl::DataLossError(
      StrCat("malformed tf.train.Example: ", what, " at byte ", at - record.data()));
}

// Checks a {Bytes,Float,Int64}List the way protobuf parses it: packed floats
// must be whole, packed varints well-formed.
Status CheckList(std::string_view record, std::string_view list, Kind kind) {
  FieldReader reader(record, list, kListDepth);
  Field f;
  while (reader.Next(&f)) {
    if (f.number != 1 || f.type != kLengthDelimited) continue;
    if (kind == Kind::kFloat && f.bytes.size() % 4 != 0) {
      return Malformed(record, f.bytes.data(), "packed floats not a multiple of 4 bytes");
    }
    if (kind == Kind::kInt64) {
      const char* p = f.bytes.data();
      const char* end = p + f.bytes.size();
      uint64_t v;
      while (p < end) {
        const char* at = p;
        if (!FieldReader::ReadVarint64(&p, end, &v)) {
          return Malformed(record, at, "bad packed int64 varint");
        }
      }
    }
  }
  return reader.status();
}

// Resolves (and fully checks) the oneof of a Feature given as one or more
// messages that merge.
Status ResolveKind(std::string_view record, const std::vector<std::string_view>& values,
                   FeatureView* view) {
  view->kind = Kind::kNone;
  view->lists.clear();
  for (std::string_view value : values) {
    FieldReader reader(record, value, kFeatureDepth);
    Field f;
    while (reader.Next(&f)) {
      if (f.type != kLengthDelimited || f.number < 1 || f.number > 3) continue;
      auto kind = static_cast<Kind>(f.number);
      EDL_RETURN_IF_ERROR(CheckList(record, f.bytes, kind));
      if (kind != view->kind) {  // switching the oneof clears it
        view->kind = kind;
        view->lists.clear();
      }
      view->lists.push_back(f.bytes);
    }
    EDL_RETURN_IF_ERROR(reader.status());
  }
  return absl::OkStatus();
}

// Calls fn(key, view) for every map entry of every `features` field, in wire
// order, with `view` the entry's resolved Feature. Every entry is checked,
// also those a later entry replaces, as protobuf would.
template <typename Fn>
Status ForEachEntry(std::string_view record, Fn fn) {
  if (record.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::DataLossError("malformed tf.train.Example: record over 2 GiB");
  }
  thread_local std::vector<std::string_view> values;
  thread_local FeatureView view;
  FieldReader example(record, record, 0);
  Field f;
  while (example.Next(&f)) {
    if (f.number != 1 || f.type != kLengthDelimited) continue;  // Example.features
    FieldReader features(record, f.bytes, kFeaturesDepth);
    Field entry;
    while (features.Next(&entry)) {
      if (entry.number != 1 || entry.type != kLengthDelimited) continue;  // Features.feature
      FieldReader reader(record, entry.bytes, kEntryDepth);
      std::string_view key;
      values.clear();
      Field e;
      while (reader.Next(&e)) {
        if (e.type != kLengthDelimited) continue;
        if (e.number == 1) {
          key = e.bytes;
          if (!google::protobuf::internal::IsStructurallyValidUTF8(key.data(),
                                                                   static_cast<int>(key.size()))) {
            return Malformed(record, key.data(), "feature name is not UTF-8");
          }
        }
        if (e.number == 2) values.push_back(e.bytes);
      }
      EDL_RETURN_IF_ERROR(reader.status());
      EDL_RETURN_IF_ERROR(ResolveKind(record, values, &view));
      fn(key, &view);
    }
    EDL_RETURN_IF_ERROR(features.status());
  }
  return example.status();
}

Status WrongKind(const FeatureView& view, Kind wanted) {
  return absl::InvalidArgumentError(
      StrCat("holds ", KindName(view.kind), ", expected ", KindName(wanted)));
}

}  // namespace

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return "bytes_list";
    case Kind::kFloat:
      return "float_list";
    case Kind::kInt64:
      return "int64_list";
    case Kind::kNone:
      break;
  }
  return "no value";
}

Status FindFeatures(std::string_view record, const std::vector<std::string_view>& keys,
                    std::vector<FeatureView>* out) {
  out->resize(keys.size());
  for (FeatureView& v : *out) {
    v.present = false;
    v.kind = Kind::kNone;
    v.lists.clear();
  }
  // The last entry for a key wins. A key asked for twice is described twice.
  return ForEachEntry(record, [&](std::string_view key, FeatureView* view) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].size() == key.size() && keys[i] == key) {
        FeatureView& dst = (*out)[i];
        dst.present = true;
        dst.kind = view->kind;
        dst.lists = view->lists;
      }
    }
  });
}

Status AppendFloats(const FeatureView& view, std::vector<float>* out) {
  if (view.kind != Kind::kFloat) return WrongKind(view, Kind::kFloat);
  for (std::string_view list : view.lists) {
    FieldReader reader(list, list, kListDepth);
    Field f;
    while (reader.Next(&f)) {
      if (f.number != 1) continue;
      if (f.type == kLengthDelimited) {  // packed
        if (f.bytes.size() % 4 != 0) {
          return absl::DataLossError(
              "malformed tf.train.Example: packed floats not a multiple of 4 bytes");
        }
        size_t n = f.bytes.size() / 4;
        if (n == 0) continue;
        size_t start = out->size();
        out->resize(start + n);
        std::memcpy(out->data() + start, f.bytes.data(), f.bytes.size());
      } else if (f.type == kFixed32) {
        float v;
        std::memcpy(&v, &f.fixed32, 4);
        out->push_back(v);
      }
    }
    EDL_RETURN_IF_ERROR(reader.status());
  }
  return absl::OkStatus();
}

Status AppendInt64s(const FeatureView& view, std::vector<int64_t>* out) {
  if (view.kind != Kind::kInt64) return WrongKind(view, Kind::kInt64);
  for (std::string_view list : view.lists) {
    FieldReader reader(list, list, kListDepth);
    Field f;
    while (reader.Next(&f)) {
      if (f.number != 1) continue;
      if (f.type == kLengthDelimited) {  // packed varints
        const char* p = f.bytes.data();
        const char* end = p + f.bytes.size();
        while (p < end) {
          uint64_t v;
          if (!FieldReader::ReadVarint64(&p, end, &v)) {
            return absl::DataLossError("malformed tf.train.Example: bad packed int64 varint");
          }
          out->push_back(static_cast<int64_t>(v));
        }
      } else if (f.type == kVarint) {
        out->push_back(static_cast<int64_t>(f.varint));
      }
    }
    EDL_RETURN_IF_ERROR(reader.status());
  }
  return absl::OkStatus();
}

Status AppendBytes(const FeatureView& view, std::vector<std::string_view>* out) {
  if (view.kind != Kind::kBytes) return WrongKind(view, Kind::kBytes);
  for (std::string_view list : view.lists) {
    FieldReader reader(list, list, kListDepth);
    Field f;
    while (reader.Next(&f)) {
      if (f.number == 1 && f.type == kLengthDelimited) out->push_back(f.bytes);
    }
    EDL_RETURN_IF_ERROR(reader.status());
  }
  return absl::OkStatus();
}

Status DecodeAll(std::string_view record, std::vector<DecodedFeature>* out) {
  out->clear();
  std::map<std::string, FeatureView> entries;
  EDL_RETURN_IF_ERROR(ForEachEntry(record, [&](std::string_view key, FeatureView* view) {
    FeatureView& dst = entries[std::string(key)];
    dst.present = true;
    dst.kind = view->kind;
    dst.lists = view->lists;
  }));
  for (const auto& [key, view] : entries) {
    DecodedFeature d;
    d.key = key;
    d.kind = view.kind;
    Status s;
    if (view.kind == Kind::kFloat) s = AppendFloats(view, &d.floats);
    if (view.kind == Kind::kInt64) s = AppendInt64s(view, &d.int64s);
    if (view.kind == Kind::kBytes) {
      std::vector<std::string_view> b;
      s = AppendBytes(view, &b);
      d.bytes.assign(b.begin(), b.end());
    }
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(s, StrCat("feature '", key, "'"));
    out->push_back(std::move(d));
  }
  return absl::OkStatus();
}

namespace {

//   Example { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }  (entries: key = 1, value = 2)
//   Feature { BytesList bytes_list = 1; Int64List int64_list = 3; }
//   BytesList { repeated bytes value = 1; }  Int64List { repeated int64 value = 1 [packed]; }
constexpr char kTagFeatures = 0x0a;  // field 1, length-delimited
constexpr char kTagEntry = 0x0a;
constexpr char kTagKey = 0x0a;
constexpr char kTagValue = 0x12;
constexpr char kTagBytesList = 0x0a;
constexpr char kTagFloatList = 0x12;
constexpr char kTagInt64List = 0x1a;
constexpr char kTagListValue = 0x0a;
constexpr size_t kMaxVarint = 10;
// Room kept for Example's header: a tag and (mostly) a 3-byte length.
constexpr size_t kHeaderRoom = 4;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

size_t WriteVarint(uint64_t v, char* out) {
  size_t n = 0;
  for (; v >= 0x80; v >>= 7) out[n++] = static_cast<char>(v | 0x80);
  out[n++] = static_cast<char>(v);
  return n;
}

void AppendVarint(uint64_t v, std::string* out) {
  char buffer[kMaxVarint];
  out->append(buffer, WriteVarint(v, buffer));
}

}  // namespace

ExampleEncoder::ExampleEncoder(std::string* out) : out_(out) { out_->assign(kHeaderRoom, '\0'); }

void ExampleEncoder::AddEntryHeader(std::string_view key, char list_tag, size_t list_size) {
  size_t feature_size = 1 + VarintSize(list_size) + list_size;
  size_t entry_size =
      1 + VarintSize(key.size()) + key.size() + 1 + VarintSize(feature_size) + feature_size;
  out_->push_back(kTagEntry);
  AppendVarint(entry_size, out_);
  out_->push_back(kTagKey);
  AppendVarint(key.size(), out_);
  out_->append(key);
  out_->push_back(kTagValue);
  AppendVarint(feature_size, out_);
  out_->push_back(list_tag);
  AppendVarint(list_size, out_);
}

void ExampleEncoder::AddInt64(std::string_view key, int64_t value) { AddInt64s(key, {value}); }

void ExampleEncoder::AddInt64s(std::string_view key, absl::Span<const int64_t> values) {
  if (values.empty()) return AddEntryHeader(key, kTagInt64List, 0);  // as protobuf: no field
  size_t packed_size = 0;
  for (int64_t v : values) packed_size += VarintSize(static_cast<uint64_t>(v));
  AddEntryHeader(key, kTagInt64List, 1 + VarintSize(packed_size) + packed_size);
  out_->push_back(kTagListValue);
  AppendVarint(packed_size, out_);
  for (int64_t v : values) AppendVarint(static_cast<uint64_t>(v), out_);
}

void ExampleEncoder::AddFloat(std::string_view key, float value) { AddFloats(key, {value}); }

void ExampleEncoder::AddFloats(std::string_view key, absl::Span<const float> values) {
  if (values.empty()) return AddEntryHeader(key, kTagFloatList, 0);
  const size_t packed_size = values.size() * sizeof(float);
  AddEntryHeader(key, kTagFloatList, 1 + VarintSize(packed_size) + packed_size);
  out_->push_back(kTagListValue);
  AppendVarint(packed_size, out_);
  for (float value : values) {
    char bytes[sizeof(float)];
    std::memcpy(bytes, &value, sizeof(float));  // little-endian, as protobuf's fixed32
    out_->append(bytes, sizeof(float));
  }
}

void ExampleEncoder::AddBytes(std::string_view key, std::string_view value) {
  AddEntryHeader(key, kTagBytesList, 1 + VarintSize(value.size()) + value.size());
  out_->push_back(kTagListValue);
  AppendVarint(value.size(), out_);
  out_->append(value);
}

void ExampleEncoder::Finish() {
  // Example.features around the entries.
  size_t length = out_->size() - kHeaderRoom;
  char header[1 + kMaxVarint];
  header[0] = kTagFeatures;
  size_t header_size = 1 + WriteVarint(length, header + 1);
  out_->replace(0, kHeaderRoom, header, header_size);
}

}  // namespace elasticdl::example
