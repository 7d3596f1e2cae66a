#include "data/example_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common/strings.h"

namespace elasticdl::example {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// One field of a message as it lies on the wire.
struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  uint64_t varint = 0;     // kVarint
  uint32_t fixed32 = 0;    // kFixed32
  std::string_view bytes;  // kLengthDelimited
};

// Walks the fields of one serialized message, skipping groups.
class FieldReader {
 public:
  explicit FieldReader(std::string_view message)
      : message_(message),
        in_(reinterpret_cast<const uint8_t*>(message.data()), static_cast<int>(message.size())) {}

  // Returns false at the end of the message or on malformed data; ok() tells.
  bool Next(Field* f) {
    while (true) {
      if (static_cast<size_t>(in_.CurrentPosition()) == message_.size()) return false;
      uint32_t tag = in_.ReadTagNoLastTag();
      if (tag == 0) return Fail("bad field tag");
      f->number = tag >> 3;
      f->type = tag & 7;
      if (f->number == 0) return Fail("field number 0");
      switch (f->type) {
        case kVarint:
          if (!in_.ReadVarint64(&f->varint)) return Fail("truncated varint");
          return true;
        case kFixed64: {
          uint64_t ignored;
          if (!in_.ReadLittleEndian64(&ignored)) return Fail("truncated fixed64");
          return true;
        }
        case kLengthDelimited: {
          uint32_t len;
          if (!in_.ReadVarint32(&len)) return Fail("truncated length");
          size_t pos = static_cast<size_t>(in_.CurrentPosition());
          if (len > message_.size() - pos || len > static_cast<uint32_t>(INT32_MAX)) {
            return Fail("length-delimited field runs past the end of its message");
          }
          f->bytes = message_.substr(pos, len);
          in_.Skip(static_cast<int>(len));
          return true;
        }
        case kFixed32:
          if (!in_.ReadLittleEndian32(&f->fixed32)) return Fail("truncated fixed32");
          return true;
        case kStartGroup:
          if (!WireFormatLite::SkipField(&in_, tag)) return Fail("malformed group");
          continue;  // groups are never fields we want
        default:
          return Fail(f->type == kEndGroup ? "unmatched end-group" : "invalid wire type");
      }
    }
  }

  bool ok() const { return error_ == nullptr; }
  Status status() const {
    if (ok()) return absl::OkStatus();
    return absl::DataLossError(
        StrCat("malformed tf.train.Example: ", error_, " at byte ", in_.CurrentPosition() + base_));
  }
  // Offset of `message` in the record, for error messages.
  void set_base(size_t base) { base_ = base; }

 private:
  bool Fail(const char* what) {
    error_ = what;
    return false;
  }
  std::string_view message_;
  CodedInputStream in_;
  const char* error_ = nullptr;
  size_t base_ = 0;
};

size_t OffsetIn(std::string_view outer, std::string_view inner) {
  return static_cast<size_t>(inner.data() - outer.data());
}

// Calls fn(key, value_messages) for every map entry of every `features`
// field, in wire order. value_messages are the serialized Feature messages of
// the entry (usually one; several merge).
template <typename Fn>
Status ForEachEntry(std::string_view record, std::vector<std::string_view>* values, Fn fn) {
  if (record.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::DataLossError("malformed tf.train.Example: record over 2 GiB");
  }
  FieldReader example(record);
  Field f;
  while (example.Next(&f)) {
    if (f.number != 1 || f.type != kLengthDelimited) continue;  // Example.features
    FieldReader features(f.bytes);
    features.set_base(OffsetIn(record, f.bytes));
    Field entry;
    while (features.Next(&entry)) {
      if (entry.number != 1 || entry.type != kLengthDelimited) continue;  // Features.feature
      FieldReader reader(entry.bytes);
      reader.set_base(OffsetIn(record, entry.bytes));
      std::string_view key;
      values->clear();
      Field e;
      while (reader.Next(&e)) {
        if (e.type != kLengthDelimited) continue;
        if (e.number == 1) key = e.bytes;
        if (e.number == 2) values->push_back(e.bytes);
      }
      EDL_RETURN_IF_ERROR(reader.status());
      if (!google::protobuf::internal::IsStructurallyValidUTF8(key.data(),
                                                               static_cast<int>(key.size()))) {
        return absl::DataLossError(StrCat("malformed tf.train.Example: feature name at byte ",
                                          OffsetIn(record, entry.bytes), " is not UTF-8"));
      }
      fn(key, *values);
    }
    EDL_RETURN_IF_ERROR(features.status());
  }
  return example.status();
}

// Resolves the oneof of a Feature given as one or more messages.
Status ResolveKind(std::string_view record, const std::vector<std::string_view>& values,
                   FeatureView* view) {
  view->kind = Kind::kNone;
  view->lists.clear();
  for (std::string_view value : values) {
    FieldReader reader(value);
    reader.set_base(OffsetIn(record, value));
    Field f;
    while (reader.Next(&f)) {
      if (f.type != kLengthDelimited || f.number < 1 || f.number > 3) continue;
      auto kind = static_cast<Kind>(f.number);
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
  // The last entry for a key wins; remember each key's Feature messages.
  thread_local std::vector<std::vector<std::string_view>> found;
  thread_local std::vector<std::string_view> values;
  if (found.size() < keys.size()) found.resize(keys.size());
  EDL_RETURN_IF_ERROR(ForEachEntry(
      record, &values, [&](std::string_view key, const std::vector<std::string_view>& v) {
        for (size_t i = 0; i < keys.size(); ++i) {
          if (keys[i] == key) {
            (*out)[i].present = true;
            found[i] = v;
          }
        }
      }));
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((*out)[i].present) EDL_RETURN_IF_ERROR(ResolveKind(record, found[i], &(*out)[i]));
  }
  return absl::OkStatus();
}

Status AppendFloats(const FeatureView& view, std::vector<float>* out) {
  if (view.kind != Kind::kFloat) return WrongKind(view, Kind::kFloat);
  for (std::string_view list : view.lists) {
    FieldReader reader(list);
    Field f;
    while (reader.Next(&f)) {
      if (f.number != 1) continue;
      if (f.type == kLengthDelimited) {  // packed
        if (f.bytes.size() % 4 != 0) {
          return absl::DataLossError(
              "malformed tf.train.Example: packed floats not a multiple of 4 bytes");
        }
        size_t n = f.bytes.size() / 4;
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
    FieldReader reader(list);
    Field f;
    while (reader.Next(&f)) {
      if (f.number != 1) continue;
      if (f.type == kLengthDelimited) {  // packed varints
        CodedInputStream in(reinterpret_cast<const uint8_t*>(f.bytes.data()),
                            static_cast<int>(f.bytes.size()));
        while (static_cast<size_t>(in.CurrentPosition()) < f.bytes.size()) {
          uint64_t v;
          if (!in.ReadVarint64(&v)) {
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
    FieldReader reader(list);
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
  std::map<std::string, std::vector<std::string_view>> entries;
  std::vector<std::string_view> values;
  EDL_RETURN_IF_ERROR(ForEachEntry(
      record, &values, [&](std::string_view key, const std::vector<std::string_view>& v) {
        entries[std::string(key)] = v;
      }));
  for (const auto& [key, feature_messages] : entries) {
    FeatureView view;
    view.present = true;
    EDL_RETURN_IF_ERROR(ResolveKind(record, feature_messages, &view));
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
    EDL_RETURN_IF_ERROR(Annotate(s, StrCat("feature '", key, "'")));
    out->push_back(std::move(d));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::example
