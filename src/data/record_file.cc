#include "elasticdl/data/record_file.h"

#include "common/strings.h"
#include "data/recordio_file.h"
#include "data/tfrecord.h"
#include "elasticdl/data/recordio.h"

namespace elasticdl {

std::string_view RecordFormatName(RecordFormat format) {
  return format == RecordFormat::kRecordIO ? "recordio" : "tfrecord";
}

StatusOr<RecordFormat> ParseRecordFormat(std::string_view name) {
  if (name == "recordio") return RecordFormat::kRecordIO;
  if (name == "tfrecord") return RecordFormat::kTFRecord;
  return absl::InvalidArgumentError(
      StrCat("unknown record format '", name, "', expected recordio or tfrecord"));
}

StatusOr<RecordFormat> RecordFormatFromPath(std::string_view path) {
  if (HasSuffix(path, ".recordio") || HasSuffix(path, ".rio")) {
    return RecordFormat::kRecordIO;
  }
  if (HasSuffix(path, ".tfrecord") || HasSuffix(path, ".tfrecords")) {
    return RecordFormat::kTFRecord;
  }
  return absl::InvalidArgumentError(
      StrCat(path,
             ": cannot tell the record format from the name; expected a "
             ".recordio or .tfrecord extension (or a data command's --format); "
             "`elasticdl data convert` turns a .csv file into records"));
}

std::string_view CompressorName(Compressor compressor) {
  switch (compressor) {
    case Compressor::kNone:
      return "none";
    case Compressor::kSnappy:
      return "snappy";
    case Compressor::kGzip:
      return "gzip";
  }
  return "unknown";
}

StatusOr<Compressor> ParseCompressor(std::string_view name) {
  if (name == "none") return Compressor::kNone;
  if (name == "snappy") return Compressor::kSnappy;
  if (name == "gzip") return Compressor::kGzip;
  return absl::InvalidArgumentError(
      StrCat("unknown compressor '", name, "', expected none, snappy or gzip"));
}

StatusOr<std::unique_ptr<RecordFile>> RecordFile::Open(const std::string& path,
                                                       std::optional<RecordFormat> format,
                                                       const Options& options) {
  RecordFormat f;
  if (format.has_value()) {
    f = *format;
  } else {
    EDL_ASSIGN_OR_RETURN(f, RecordFormatFromPath(path));
  }
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  if (f == RecordFormat::kTFRecord) return tfrecord::OpenFile(std::move(file));
  EDL_ASSIGN_OR_RETURN(auto recordio, recordio::OpenFile(std::move(file), options));
  return std::unique_ptr<RecordFile>(std::move(recordio));
}

StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(const std::string& path,
                                                             const Options& options) {
  if (options.format == RecordFormat::kTFRecord) return tfrecord::CreateWriter(path);
  EDL_ASSIGN_OR_RETURN(auto writer, RecordIOWriter::Create(path, options));
  return std::unique_ptr<RecordWriter>(std::move(writer));
}

}  // namespace elasticdl
