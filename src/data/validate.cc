#include "data/validate.h"

#include <cstring>

#include "common/crc.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/example_wire.h"
#include "data/recordio_chunk.h"
#include "data/tfrecord.h"

namespace elasticdl {
namespace {

void CheckExample(std::string_view record, uint64_t index, uint64_t offset,
                  ValidateReport* report) {
  std::vector<example::DecodedFeature> features;
  Status s = example::DecodeAll(record, &features);
  if (!s.ok()) report->findings.push_back({offset, StrCat("record ", index, ": ", s.message())});
}

// Whether a plausible RecordIO chunk starts at `offset`: a header that passes
// its checks, a payload inside the file, and a matching checksum.
bool IsRecordIOChunkAt(const RandomAccessFile& file, uint64_t offset, std::string* stored) {
  char buf[recordio::kHeaderSize];
  if (file.size() - offset < recordio::kHeaderSize) return false;
  if (!file.ReadExactly(offset, recordio::kHeaderSize, buf, "chunk header").ok()) return false;
  recordio::ChunkHeader h = recordio::DecodeHeader(buf);
  if (!recordio::CheckHeader(h).ok()) return false;
  if (h.stored_size > file.size() - offset - recordio::kHeaderSize) return false;
  stored->resize(h.stored_size);
  if (!file.ReadExactly(offset + recordio::kHeaderSize, h.stored_size, stored->data(), "payload")
           .ok()) {
    return false;
  }
  return crc::Crc32Ieee(*stored) == h.checksum;
}

// The offset of the next plausible chunk after `from`, or the file size.
uint64_t ResyncRecordIO(const RandomAccessFile& file, uint64_t from) {
  static constexpr char kMagicBytes[4] = {0x04, 0x03, 0x02, 0x01};
  std::string window(1 << 20, '\0'), stored;
  for (uint64_t base = from; base < file.size();) {
    size_t got = 0;
    if (!file.Read(base, window.size(), window.data(), &got).ok() || got < 4) break;
    for (size_t i = 0; i + 4 <= got; ++i) {
      if (std::memcmp(window.data() + i, kMagicBytes, 4) == 0 &&
          IsRecordIOChunkAt(file, base + i, &stored)) {
        return base + i;
      }
    }
    base += got - 3;  // a magic may straddle windows
  }
  return file.size();
}

void ValidateRecordIO(const RandomAccessFile& file, const ValidateOptions& options,
                      ValidateReport* report) {
  std::string stored, scratch;
  std::vector<std::string_view> records;
  uint64_t offset = 0;
  uint64_t next_index = 0;  // index of the next intact record
  auto resync = [&](uint64_t from, std::string problem) {
    uint64_t next = ResyncRecordIO(file, from);
    if (next < file.size()) {
      problem += StrCat("; next intact chunk at offset ", next);
    } else {
      problem += "; no intact chunk follows";
    }
    report->findings.push_back({offset, std::move(problem)});
    offset = next;
  };
  while (offset < file.size()) {
    uint64_t left = file.size() - offset;
    if (left < recordio::kHeaderSize) {
      report->findings.push_back(
          {offset, StrCat("truncated chunk header: needs ", recordio::kHeaderSize,
                          " bytes, file has ", left)});
      break;
    }
    char buf[recordio::kHeaderSize];
    Status s = file.ReadExactly(offset, recordio::kHeaderSize, buf, "chunk header");
    if (!s.ok()) {
      report->findings.push_back({offset, std::string(s.message())});
      break;
    }
    recordio::ChunkHeader h = recordio::DecodeHeader(buf);
    ++report->chunks;
    s = recordio::CheckHeader(h);
    if (!s.ok()) {
      resync(offset + 1, StrCat("chunk header: ", s.message()));
      continue;
    }
    if (h.stored_size > left - recordio::kHeaderSize) {
      resync(offset + 1, StrCat("truncated chunk: header says ", h.stored_size,
                                " payload bytes, file has ", left - recordio::kHeaderSize));
      continue;
    }
    stored.resize(h.stored_size);
    s = file.ReadExactly(offset + recordio::kHeaderSize, h.stored_size, stored.data(), "payload");
    if (s.ok()) {
      s = recordio::DecodePayload(h, stored, options.max_chunk_bytes, next_index, &scratch,
                                  &records);
    }
    if (!s.ok()) {
      std::string problem = StrCat("chunk of records [", next_index, ", ",
                                   next_index + h.num_records, "): ", s.message());
      next_index += h.num_records;
      // If no chunk follows where this one claims to end, its header is the
      // damaged part: look for the next intact chunk instead of trusting it.
      uint64_t end = offset + recordio::kHeaderSize + h.stored_size;
      std::string next_payload;
      if (end < file.size() && !IsRecordIOChunkAt(file, end, &next_payload)) {
        resync(offset + 1, std::move(problem));
      } else {
        report->findings.push_back({offset, std::move(problem)});
        offset = end;
      }
      continue;
    }
    if (options.examples) {
      for (size_t i = 0; i < records.size(); ++i) {
        CheckExample(records[i], next_index + i, offset, report);
      }
    }
    report->good_records += records.size();
    next_index += h.num_records;
    offset += recordio::kHeaderSize + h.stored_size;
  }
}

// The offset of the next position from `from` holding a TFRecord header
// whose length checksum holds and whose record fits in the file.
uint64_t ResyncTFRecord(const RandomAccessFile& file, uint64_t from) {
  for (uint64_t p = from; p + tfrecord::kHeaderSize <= file.size(); ++p) {
    char header[tfrecord::kHeaderSize];
    if (!file.ReadExactly(p, tfrecord::kHeaderSize, header, "header").ok()) break;
    uint64_t length = 0;
    if (tfrecord::DecodeHeader(std::string_view(header, sizeof(header)), &length).ok() &&
        length <= file.size() - p - tfrecord::kHeaderSize &&
        file.size() - p - tfrecord::kHeaderSize - length >= tfrecord::kFooterSize) {
      return p;
    }
  }
  return file.size();
}

void ValidateTFRecord(const RandomAccessFile& file, const ValidateOptions& options,
                      ValidateReport* report) {
  SequentialReader reader(&file);
  uint64_t index = 0;
  while (!reader.AtEnd()) {
    uint64_t offset = reader.offset();
    std::string_view header;
    if (reader.remaining() < tfrecord::kHeaderSize) {
      report->findings.push_back(
          {offset, StrCat("truncated record header: needs ", tfrecord::kHeaderSize,
                          " bytes, file has ", reader.remaining())});
      break;
    }
    (void)reader.Read(tfrecord::kHeaderSize, &header, "header");
    uint64_t length = 0;
    Status s = tfrecord::DecodeHeader(header, &length);
    if (!s.ok()) {
      uint64_t next = ResyncTFRecord(file, offset + 1);
      report->findings.push_back(
          {offset, StrCat("record ", index, ": ", s.message(),
                          next < file.size() ? StrCat("; next intact header at offset ", next)
                                             : std::string("; no intact record follows"))});
      if (next >= file.size()) break;
      reader = SequentialReader(&file, next);
      continue;
    }
    if (length > reader.remaining() || reader.remaining() - length < tfrecord::kFooterSize) {
      report->findings.push_back({offset, StrCat("record ", index, ": truncated: length ", length,
                                                 " needs ", length + tfrecord::kFooterSize,
                                                 " more bytes, file has ", reader.remaining())});
      break;
    }
    std::string_view body;
    (void)reader.Read(length + tfrecord::kFooterSize, &body, "record");
    s = tfrecord::CheckData(body.substr(0, length), body.substr(length));
    if (!s.ok()) {
      report->findings.push_back({offset, StrCat("record ", index, ": ", s.message())});
    } else {
      if (options.examples) CheckExample(body.substr(0, length), index, offset, report);
      ++report->good_records;
    }
    ++index;
  }
}

}  // namespace

StatusOr<ValidateReport> ValidateFile(const std::string& path, const ValidateOptions& options) {
  RecordFormat format;
  if (options.format.has_value()) {
    format = *options.format;
  } else {
    EDL_ASSIGN_OR_RETURN(format, RecordFormatFromPath(path));
  }
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  ValidateReport report;
  report.path = path;
  report.size = file->size();
  if (format == RecordFormat::kRecordIO) {
    ValidateRecordIO(*file, options, &report);
  } else {
    ValidateTFRecord(*file, options, &report);
  }
  return report;
}

}  // namespace elasticdl
