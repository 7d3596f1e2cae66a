#include "data/csv_import.h"

#include <csv.h>
#include <google/protobuf/stubs/common.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/proto/example.pb.h"

namespace elasticdl {
namespace {

using Row = std::vector<std::optional<std::string>>;  // nullopt: empty field

// Streams the rows of a CSV file through libcsv (RFC 4180 quoting).
Status ForEachRow(const std::string& path, char delimiter,
                  const std::function<Status(uint64_t row, const Row&)>& fn) {
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  struct State {
    Row row;
    uint64_t index = 0;
    Status status;
    const std::function<Status(uint64_t, const Row&)>* fn;
  } state;
  state.fn = &fn;
  csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_EMPTY_IS_NULL) != 0) {
    return absl::InternalError("csv_init failed");
  }
  csv_set_delim(&parser, static_cast<unsigned char>(delimiter));
  auto on_field = [](void* data, size_t len, void* user) {
    auto* s = static_cast<State*>(user);
    if (data == nullptr) {
      s->row.emplace_back();
    } else {
      s->row.emplace_back(std::string(static_cast<const char*>(data), len));
    }
  };
  auto on_row = [](int, void* user) {
    auto* s = static_cast<State*>(user);
    if (s->status.ok()) s->status = (*s->fn)(s->index, s->row);
    ++s->index;
    s->row.clear();
  };
  std::string buf(std::min<uint64_t>(uint64_t{1} << 20, std::max<uint64_t>(file->size(), 1)), '\0');
  uint64_t offset = 0;
  Status status;
  while (offset < file->size() && state.status.ok()) {
    size_t got = 0;
    status = file->Read(offset, buf.size(), buf.data(), &got);
    if (!status.ok()) break;
    if (csv_parse(&parser, buf.data(), got, on_field, on_row, &state) != got) {
      status = absl::InvalidArgumentError(
          StrCat(path, ": row ", state.index + 1, ": ", csv_strerror(csv_error(&parser))));
      break;
    }
    offset += got;
  }
  if (status.ok() && state.status.ok() && csv_fini(&parser, on_field, on_row, &state) != 0) {
    status = absl::InvalidArgumentError(
        StrCat(path, ": row ", state.index + 1, ": ", csv_strerror(csv_error(&parser))));
  }
  csv_free(&parser);
  EDL_RETURN_IF_ERROR(status);
  return state.status;
}

bool IsInt64(const std::string& s) {
  int64_t v;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

bool ParseFloat(const std::string& s, float* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

StatusOr<std::map<std::string, example::Kind>> ParseColumnTypes(std::string_view spec) {
  std::map<std::string, example::Kind> out;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          StrCat("column type '", item, "' is not NAME:TYPE (TYPE int64, float or bytes)"));
    }
    std::string_view type = item.substr(colon + 1);
    example::Kind kind;
    if (type == "int64") {
      kind = example::Kind::kInt64;
    } else if (type == "float") {
      kind = example::Kind::kFloat;
    } else if (type == "bytes") {
      kind = example::Kind::kBytes;
    } else {
      return absl::InvalidArgumentError(StrCat("column type '", type, "' for '",
                                               item.substr(0, colon),
                                               "' is unknown; expected int64, float or bytes"));
    }
    out[std::string(item.substr(0, colon))] = kind;
  }
  return out;
}

StatusOr<CsvSchema> ScanCsv(const std::string& path, const CsvOptions& options) {
  CsvSchema schema;
  std::vector<bool> all_int, all_float;
  EDL_RETURN_IF_ERROR(ForEachRow(path, options.delimiter, [&](uint64_t row, const Row& fields) {
    if (row == 0) {
      std::set<std::string> seen;
      for (size_t i = 0; i < fields.size(); ++i) {
        if (!fields[i].has_value()) {
          return absl::InvalidArgumentError(
              StrCat(path, ": header: column ", i + 1, " has no name"));
        }
        if (!google::protobuf::internal::IsStructurallyValidUTF8(
                fields[i]->data(), static_cast<int>(fields[i]->size()))) {
          return absl::InvalidArgumentError(
              StrCat(path, ": header: column ", i + 1,
                     " name is not UTF-8 (feature names are protobuf strings)"));
        }
        if (!seen.insert(*fields[i]).second) {
          return absl::InvalidArgumentError(
              StrCat(path, ": header: column name '", *fields[i], "' appears twice"));
        }
        schema.names.push_back(*fields[i]);
      }
      all_int.assign(fields.size(), true);
      all_float.assign(fields.size(), true);
      return absl::OkStatus();
    }
    if (fields.size() != schema.names.size()) {
      return absl::InvalidArgumentError(StrCat(path, ": row ", row + 1, ": expected ",
                                               schema.names.size(), " fields, found ",
                                               fields.size()));
    }
    for (size_t i = 0; i < fields.size(); ++i) {
      if (!fields[i].has_value()) continue;
      float f;
      if (all_int[i] && !IsInt64(*fields[i])) all_int[i] = false;
      if (all_float[i] && !ParseFloat(*fields[i], &f)) all_float[i] = false;
    }
    ++schema.num_rows;
    return absl::OkStatus();
  }));
  if (schema.names.empty()) return absl::InvalidArgumentError(StrCat(path, ": no header row"));
  for (const auto& [name, kind] : options.column_types) {
    if (std::find(schema.names.begin(), schema.names.end(), name) == schema.names.end()) {
      return absl::InvalidArgumentError(
          StrCat(path, ": column type given for '", name, "', which the header lacks"));
    }
  }
  for (size_t i = 0; i < schema.names.size(); ++i) {
    auto given = options.column_types.find(schema.names[i]);
    if (given != options.column_types.end()) {
      schema.kinds.push_back(given->second);
    } else {
      schema.kinds.push_back(all_int[i]     ? example::Kind::kInt64
                             : all_float[i] ? example::Kind::kFloat
                                            : example::Kind::kBytes);
    }
  }
  return schema;
}

Status ConvertCsv(const std::string& path, const CsvOptions& options, const CsvSchema& schema,
                  const std::function<Status(std::string_view)>& sink) {
  proto::Example example;
  std::string serialized;
  return ForEachRow(path, options.delimiter, [&](uint64_t row, const Row& fields) -> Status {
    if (row == 0) return absl::OkStatus();
    if (fields.size() != schema.names.size()) {
      return absl::InvalidArgumentError(StrCat(path, ": row ", row + 1, ": expected ",
                                               schema.names.size(), " fields, found ",
                                               fields.size()));
    }
    example.Clear();
    auto* features = example.mutable_features()->mutable_feature();
    for (size_t i = 0; i < fields.size(); ++i) {
      if (!fields[i].has_value()) continue;
      const std::string& value = *fields[i];
      proto::Feature& feature = (*features)[schema.names[i]];
      switch (schema.kinds[i]) {
        case example::Kind::kInt64: {
          int64_t v;
          auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
          if (ec != std::errc() || end != value.data() + value.size()) {
            return absl::InvalidArgumentError(StrCat(path, ": row ", row + 1, ": column '",
                                                     schema.names[i], "': '", value,
                                                     "' is not an int64"));
          }
          feature.mutable_int64_list()->add_value(v);
          break;
        }
        case example::Kind::kFloat: {
          float v;
          if (!ParseFloat(value, &v)) {
            return absl::InvalidArgumentError(StrCat(path, ": row ", row + 1, ": column '",
                                                     schema.names[i], "': '", value,
                                                     "' is not a number"));
          }
          feature.mutable_float_list()->add_value(v);
          break;
        }
        default:
          feature.mutable_bytes_list()->add_value(value);
          break;
      }
    }
    serialized.clear();
    example.SerializeToString(&serialized);
    return sink(serialized);
  });
}

}  // namespace elasticdl
