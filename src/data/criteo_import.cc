#include "data/criteo_import.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "common/file.h"
#include "common/strings.h"
#include "data/example_wire.h"
#include "data/sharded_writer.h"

namespace elasticdl {
namespace {

constexpr int kFirstInteger = 1;
constexpr int kFirstCategory = 1 + kCriteoIntegerFeatures;

const std::array<std::string, kCriteoFields>& FieldNames() {
  static const auto* names = [] {
    auto* n = new std::array<std::string, kCriteoFields>;
    for (int i = 0; i < kCriteoFields; ++i) (*n)[i] = CriteoFieldName(i);
    return n;
  }();
  return *names;
}

// The fields in the order of their names, as protobuf's deterministic
// serialization writes map entries.
const std::array<int, kCriteoFields>& FieldsByName() {
  static const auto* order = [] {
    auto* o = new std::array<int, kCriteoFields>;
    for (int i = 0; i < kCriteoFields; ++i) (*o)[i] = i;
    std::sort(o->begin(), o->end(), [](int a, int b) { return FieldNames()[a] < FieldNames()[b]; });
    return o;
  }();
  return *order;
}

// A field's value for an error message: quoted, cut short if long.
std::string Quoted(std::string_view value) {
  constexpr size_t kMax = 40;
  if (value.size() <= kMax) return StrCat("'", value, "'");
  return StrCat("'", value.substr(0, kMax), "...' (", value.size(), " bytes)");
}

Status FieldError(std::string_view file, uint64_t line_number, int field, std::string_view what) {
  return absl::InvalidArgumentError(
      StrCat(file, ": line ", line_number, ": field ", CriteoFieldName(field), ": ", what));
}

// Criteo's 1TB logs come gzipped; reading one as text would only report a
// bad line.
Status RefuseGzip(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  char magic[2];
  size_t got = 0;
  EDL_RETURN_IF_ERROR(file->Read(0, sizeof(magic), magic, &got));
  if (got == 2 && magic[0] == '\x1f' && magic[1] == '\x8b') {
    return absl::InvalidArgumentError(StrCat(path, ": gzip-compressed; decompress it first"));
  }
  return absl::OkStatus();
}

std::string_view WithoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

std::string CriteoFieldName(int index) {
  if (index == 0) return "label";
  if (index < kFirstCategory) return StrCat("I", index - kFirstInteger + 1);
  return StrCat("C", index - kFirstCategory + 1);
}

Status ParseCriteoLine(std::string_view line, std::string_view file, uint64_t line_number,
                       CriteoRecord* record) {
  std::array<std::string_view, kCriteoFields> fields;
  size_t count = 0;
  for (size_t start = 0;;) {
    size_t tab = line.find('\t', start);
    if (count < fields.size()) {
      fields[count] =
          line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start);
    }
    ++count;
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (count != kCriteoFields) {
    return absl::InvalidArgumentError(
        StrCat(file, ": line ", line_number, ": found ", count, " tab-separated field",
               count == 1 ? "" : "s", ", expected ", kCriteoFields, " (label, I1..I13, C1..C26)"));
  }
  if (fields[0] == "0" || fields[0] == "1") {
    record->label = fields[0][0] - '0';
  } else {
    return FieldError(file, line_number, 0,
                      fields[0].empty() ? "missing" : StrCat(Quoted(fields[0]), " is not 0 or 1"));
  }
  for (int i = 0; i < kCriteoIntegerFeatures; ++i) {
    std::string_view f = fields[kFirstInteger + i];
    if (f.empty()) {
      record->integers[i].reset();
      continue;
    }
    int64_t v = 0;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || end != f.data() + f.size()) {
      return FieldError(
          file, line_number, kFirstInteger + i,
          StrCat(Quoted(f), ec == std::errc::result_out_of_range ? " is out of the int64 range"
                                                                 : " is not an integer"));
    }
    record->integers[i] = v;
  }
  for (int i = 0; i < kCriteoCategoricalFeatures; ++i) {
    record->categories[i] = fields[kFirstCategory + i];
  }
  return absl::OkStatus();
}

void CriteoExample(const CriteoRecord& record, std::string* out) {
  // Protobuf's map entries come sorted by key; writing them directly is 5
  // times faster than building messages (the tests hold the bytes equal).
  example::ExampleEncoder encoder(out);
  for (int field : FieldsByName()) {
    std::string_view key = FieldNames()[field];
    if (field == 0) {
      encoder.AddInt64(key, record.label);
    } else if (field < kFirstCategory) {
      const auto& v = record.integers[field - kFirstInteger];
      if (v.has_value()) encoder.AddInt64(key, *v);
    } else {
      std::string_view c = record.categories[field - kFirstCategory];
      if (!c.empty()) encoder.AddBytes(key, c);
    }
  }
  encoder.Finish();
}

Status ForEachLine(const std::string& path,
                   const std::function<Status(uint64_t line_number, std::string_view line)>& fn) {
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  std::string buffer(std::min<uint64_t>(uint64_t{1} << 20, std::max<uint64_t>(file->size(), 1)),
                     '\0');
  std::string carry;  // the start of a line that continues in the next read
  uint64_t line_number = 0;
  for (uint64_t offset = 0; offset < file->size();) {
    size_t got = 0;
    EDL_RETURN_IF_ERROR(file->Read(offset, buffer.size(), buffer.data(), &got));
    if (got == 0) break;
    offset += got;
    std::string_view data(buffer.data(), got);
    for (size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
      std::string_view line = data.substr(0, newline);
      if (!carry.empty()) {
        carry.append(line);
        line = carry;
      }
      EDL_RETURN_IF_ERROR(fn(++line_number, WithoutCr(line)));
      carry.clear();
      data.remove_prefix(newline + 1);
    }
    carry.append(data);
  }
  if (!carry.empty()) EDL_RETURN_IF_ERROR(fn(++line_number, WithoutCr(carry)));
  return absl::OkStatus();
}

StatusOr<std::vector<std::string>> CriteoSourceFiles(const std::string& src) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status status = fs::status(src, ec);
  if (!fs::exists(status)) {
    return absl::NotFoundError(StrCat(src, ": no such file or directory"));
  }
  if (!fs::is_directory(status)) return std::vector<std::string>{src};
  std::vector<std::string> files;
  for (fs::directory_iterator it(src, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || HasSuffix(name, ".json")) continue;
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  if (ec) return ErrnoToStatus(ec.value(), StrCat(src, ": cannot list"));
  if (files.empty()) {
    return absl::NotFoundError(StrCat(src, ": the directory holds no data files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<CriteoImportResult> ImportCriteo(const CriteoImportOptions& options) {
  if (options.output_dir.empty()) {
    return absl::InvalidArgumentError("an output directory is required");
  }
  CriteoImportResult result;
  EDL_ASSIGN_OR_RETURN(result.inputs, CriteoSourceFiles(options.source));
  uint64_t total = 0;
  for (const std::string& path : result.inputs) {
    EDL_RETURN_IF_ERROR(RefuseGzip(path));
    EDL_RETURN_IF_ERROR(ForEachLine(path, [&](uint64_t, std::string_view) {
      ++total;
      return absl::OkStatus();
    }));
  }
  if (total == 0) return absl::InvalidArgumentError(StrCat(options.source, ": no lines"));
  std::string ext =
      RecordFormatName(options.writer.format) == "recordio" ? ".recordio" : ".tfrecord";
  EDL_ASSIGN_OR_RETURN(
      auto writer, ShardedWriter::Create(StrCat(options.output_dir, "/data", ext), options.writer,
                                         options.records_per_shard, total));
  CriteoRecord record;
  std::string example;
  for (const std::string& path : result.inputs) {
    EDL_RETURN_IF_ERROR(ForEachLine(path, [&](uint64_t line_number, std::string_view line) {
      EDL_RETURN_IF_ERROR(ParseCriteoLine(line, path, line_number, &record));
      CriteoExample(record, &example);
      return writer->Write(example);
    }));
  }
  EDL_RETURN_IF_ERROR(writer->Close());
  result.records = total;
  result.outputs = writer->paths();
  return result;
}

}  // namespace elasticdl
