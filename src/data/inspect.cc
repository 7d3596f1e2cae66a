#include "data/inspect.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/data/recordio.h"

namespace elasticdl {
namespace {

std::string HumanBytes(uint64_t n) {
  if (n < 1024) return StrCat(n, " B");
  if (n < (1 << 20)) return fmt::format("{:.1f} KiB", n / 1024.0);
  if (n < (uint64_t{1} << 30)) return fmt::format("{:.1f} MiB", n / 1048576.0);
  return fmt::format("{:.2f} GiB", n / 1073741824.0);
}

std::string Escaped(std::string_view bytes, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_chars; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (bytes.size() > max_chars) out += "...";
  return out;
}

template <typename T>
std::string Values(const std::vector<T>& v, size_t max_values) {
  std::string out = "{";
  for (size_t i = 0; i < v.size() && i < max_values; ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}", v[i]);
  }
  if (v.size() > max_values) out += ", ...";
  out += "}";
  if (v.size() > max_values) {
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    double sum = 0;
    for (const T& x : v) sum += static_cast<double>(x);
    out += fmt::format("  min {} max {} mean {:.4g}", *lo, *hi, sum / v.size());
  }
  return out;
}

// Opens `path` in the format the options name, else its extension's.
StatusOr<std::unique_ptr<RecordFile>> OpenAs(const std::string& path, const InspectOptions& options,
                                             RecordFormat* format) {
  if (options.format.has_value()) {
    *format = *options.format;
  } else {
    EDL_ASSIGN_OR_RETURN(*format, RecordFormatFromPath(path));
  }
  return RecordFile::Open(path, *format);
}

// The first records of `file`, decoded, as Inspect shows them.
Status AppendFirstRecords(RecordFile& file, const InspectOptions& options, std::string* out) {
  uint64_t show = std::min(options.num_records, file.num_records());
  EDL_ASSIGN_OR_RETURN(auto scan, file.Scan(0, show));
  while (scan->Next()) {
    *out += StrCat("record ", scan->index(), " (", scan->record().size(), " bytes):\n");
    *out += DescribeRecord(scan->record(), options.max_values, "  ");
  }
  return scan->status();
}

}  // namespace

std::string DescribeRecord(std::string_view record, size_t max_values, std::string_view indent) {
  std::vector<example::DecodedFeature> features;
  Status s = example::DecodeAll(record, &features);
  if (!s.ok() || (features.empty() && !record.empty())) {
    return StrCat(indent, "not a tf.train.Example: \"", Escaped(record, 64), "\"\n");
  }
  if (features.empty()) return StrCat(indent, "(empty)\n");
  std::string out;
  for (const auto& f : features) {
    out += StrCat(indent, f.key, ": ", example::KindName(f.kind));
    switch (f.kind) {
      case example::Kind::kFloat:
        out += StrCat("[", f.floats.size(), "] ", Values(f.floats, max_values));
        break;
      case example::Kind::kInt64:
        out += StrCat("[", f.int64s.size(), "] ", Values(f.int64s, max_values));
        break;
      case example::Kind::kBytes: {
        out += StrCat("[", f.bytes.size(), "] {");
        for (size_t i = 0; i < f.bytes.size() && i < max_values; ++i) {
          out += StrCat(i > 0 ? ", " : "", "\"", Escaped(f.bytes[i], 40), "\"");
        }
        out += f.bytes.size() > max_values ? ", ...}" : "}";
        break;
      }
      case example::Kind::kNone:
        break;
    }
    out += "\n";
  }
  return out;
}

StatusOr<std::string> Inspect(const std::string& path, const InspectOptions& options) {
  RecordFormat format;
  if (options.format.has_value()) {
    format = *options.format;
  } else {
    EDL_ASSIGN_OR_RETURN(format, RecordFormatFromPath(path));
  }
  std::string out = StrCat("file:     ", path, "\n");
  std::unique_ptr<RecordFile> file;
  if (format == RecordFormat::kRecordIO) {
    EDL_ASSIGN_OR_RETURN(auto recordio, RecordIOFile::Open(path));
    const auto& chunks = recordio->chunks();
    std::map<std::string_view, size_t> by_compressor;
    uint64_t stored = 0;
    for (const auto& c : chunks) {
      ++by_compressor[CompressorName(c.compressor)];
      stored += c.stored_size;
    }
    out += StrCat("format:   RecordIO\nrecords:  ", recordio->num_records(),
                  "\nchunks:   ", chunks.size());
    std::string mix;
    for (const auto& [name, n] : by_compressor)
      mix += StrCat(mix.empty() ? "" : ", ", n, " ", name);
    out += StrCat(chunks.empty() ? "" : " (" + mix + ")", ", ", HumanBytes(stored), " stored\n");
    for (size_t i = 0; i < chunks.size(); ++i) {
      const auto& c = chunks[i];
      out += fmt::format("  chunk {:<4} offset {:<12} {:<7} records {:<8} [{}, {})  stored {}\n", i,
                         c.offset, CompressorName(c.compressor), c.num_records, c.first_record,
                         c.first_record + c.num_records, HumanBytes(c.stored_size));
    }
    file = std::move(recordio);
  } else {
    EDL_ASSIGN_OR_RETURN(file, RecordFile::Open(path, format));
    out += StrCat("format:   TFRecord\nrecords:  ", file->num_records(), "\n");
  }
  EDL_RETURN_IF_ERROR(AppendFirstRecords(*file, options, &out));
  return out;
}

FilesReport InspectFiles(std::string_view spec, const std::vector<std::string>& files,
                         const InspectOptions& options) {
  FilesReport report;
  std::string lines;
  uint64_t total_records = 0, total_bytes = 0;
  std::unique_ptr<RecordFile> first;
  std::string first_path;
  for (const std::string& path : files) {
    std::string name = std::filesystem::path(path).filename().string();
    RecordFormat format = RecordFormat::kRecordIO;
    StatusOr<std::unique_ptr<RecordFile>> file = OpenAs(path, options, &format);
    if (!file.ok()) {
      // The message names the file: said once.
      absl::string_view why = file.status().message();
      if (why.substr(0, path.size() + 2) == path + ": ") why.remove_prefix(path.size() + 2);
      lines += StrCat("  ", fmt::format("{:>10}  {:<9} {:>10}", "-", "-", "-"), "  ", name, ": ",
                      why, "\n");
      report.problems.push_back(file.status());
      continue;
    }
    std::error_code ec;
    uint64_t bytes = std::filesystem::file_size(path, ec);
    if (ec) bytes = 0;
    total_records += (*file)->num_records();
    total_bytes += bytes;
    lines += StrCat(
        "  ",
        fmt::format("{:>10}  {:<9} {:>10}", (*file)->num_records(),
                    format == RecordFormat::kRecordIO ? "RecordIO" : "TFRecord", HumanBytes(bytes)),
        "  ", name, "\n");
    if (first == nullptr) {
      first = *std::move(file);
      first_path = path;
    }
  }
  size_t readable = files.size() - report.problems.size();
  report.text = StrCat(
      "data:     ", spec, "\nfiles:    ", files.size(), "\nrecords:  ", total_records, " in ",
      readable, " readable file", readable == 1 ? "" : "s", ", ", HumanBytes(total_bytes), "\n",
      fmt::format("  {:>10}  {:<9} {:>10}", "records", "format", "size"), "  file\n", lines);
  if (first != nullptr && options.num_records > 0) {
    report.text += StrCat("first records, of ", first_path, ":\n");
    if (Status s = AppendFirstRecords(*first, options, &report.text); !s.ok()) {
      report.problems.push_back(s);
    }
  }
  return report;
}

}  // namespace elasticdl
