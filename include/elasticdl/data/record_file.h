// Record files: ordered sequences of opaque records (usually serialized
// tf.train.Example messages), in RecordIO or TFRecord format.
//
// A RecordFile is opened once, indexed (so num_records() is known without
// reading the data), and then scanned by ranges of record indices, which is
// how the master's tasks address data. Everything that can go wrong with the
// bytes on disk is a DATA_LOSS status that names the file and the byte offset
// or record index; nothing is skipped silently and no read ends early without
// saying so.
//
//   EDL_ASSIGN_OR_RETURN(auto file, RecordFile::Open("train.recordio"));
//   EDL_ASSIGN_OR_RETURN(auto scan, file->Scan(100, 200));
//   while (scan->Next()) Use(scan->record());
//   if (!scan->status().ok()) return scan->status();
#ifndef ELASTICDL_DATA_RECORD_FILE_H_
#define ELASTICDL_DATA_RECORD_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl {

enum class RecordFormat { kRecordIO, kTFRecord };

// "recordio" or "tfrecord".
std::string_view RecordFormatName(RecordFormat format);
// Accepts the names above; INVALID_ARGUMENT otherwise.
StatusOr<RecordFormat> ParseRecordFormat(std::string_view name);
// From the file name's extension: .recordio / .rio, .tfrecord / .tfrecords.
StatusOr<RecordFormat> RecordFormatFromPath(std::string_view path);

// How RecordIO chunk payloads are stored; the values are the on-disk codes.
enum class Compressor : uint32_t { kNone = 0, kSnappy = 1, kGzip = 2 };

// "none", "snappy" or "gzip".
std::string_view CompressorName(Compressor compressor);
StatusOr<Compressor> ParseCompressor(std::string_view name);

// Iterates over one range of records. Not thread-safe; use one per thread.
class RecordScanner {
 public:
  virtual ~RecordScanner() = default;

  // Advances to the next record. Returns false at the end of the range or on
  // an error; status() tells which.
  virtual bool Next() = 0;
  // The current record; valid until the next call to Next().
  virtual std::string_view record() const = 0;
  // Index in the file of the current record.
  virtual uint64_t index() const = 0;
  // OK unless Next() stopped because of an error.
  virtual const Status& status() const = 0;
};

struct RecordFileOptions {
  // Refuse any RecordIO chunk that decompresses to more than this many bytes;
  // bounds memory against corrupt or hostile files. Default 1 GiB, far above
  // the chunks writers produce (1 MiB by default, 32 MiB in the original).
  size_t max_chunk_bytes = size_t{1} << 30;
};

// An open, indexed record file. Thread-safe: several scanners may run at once.
class RecordFile {
 public:
  using Options = RecordFileOptions;

  // Opens and indexes `path`. The format comes from `format` or, if not given,
  // from the extension. The index reads RecordIO chunk headers only; for
  // TFRecord it walks the length fields and skips the data.
  static StatusOr<std::unique_ptr<RecordFile>> Open(const std::string& path,
                                                    std::optional<RecordFormat> format = {},
                                                    const Options& options = Options());

  virtual ~RecordFile() = default;
  virtual RecordFormat format() const = 0;
  virtual const std::string& path() const = 0;
  virtual uint64_t num_records() const = 0;
  // Records [start, end); INVALID_ARGUMENT unless start <= end <= num_records().
  // The scanner must not outlive this file.
  virtual StatusOr<std::unique_ptr<RecordScanner>> Scan(uint64_t start, uint64_t end) const = 0;
};

struct RecordWriterOptions {
  RecordFormat format = RecordFormat::kRecordIO;
  // RecordIO only: how chunk payloads are compressed.
  Compressor compressor = Compressor::kSnappy;
  // RecordIO only: a chunk is closed before its raw payload (records with
  // their 4-byte lengths) would pass this many bytes. Bigger chunks compress
  // a little better; smaller ones make range reads cheaper: a task reading
  // records [a, b) decodes every chunk the range touches whole. Default
  // 1 MiB (a few hundred MNIST records).
  size_t max_chunk_bytes = size_t{1} << 20;
};

// Writes a record file. Not thread-safe.
class RecordWriter {
 public:
  using Options = RecordWriterOptions;

  // Creates (or truncates) `path`.
  static StatusOr<std::unique_ptr<RecordWriter>> Create(const std::string& path,
                                                        const Options& options);

  virtual ~RecordWriter() = default;
  virtual Status Write(std::string_view record) = 0;
  // Flushes everything and closes the file; the file is complete only once
  // Close() returned OK.
  virtual Status Close() = 0;
  virtual uint64_t records_written() const = 0;
};

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_RECORD_FILE_H_
