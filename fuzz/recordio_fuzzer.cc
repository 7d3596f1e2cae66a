// Fuzzes the RecordIO reader (data/recordio_file.h, data/recordio_chunk.h).
//
// Input: a RecordIO file followed by three control bytes (FuzzedDataProvider
// takes them from the end): flags, then a 16-bit seed for the sub-range that
// is scanned besides the whole file. Flag bits:
//   bit 0     repair the chunk and snappy-frame checksums first, so mutations
//             reach decompression and record splitting;
//   bits 1-2  the compressor of the round trip (0 none, 1 snappy, 2 gzip, 3 none);
//   bits 3-5  records per chunk in the round trip, minus one;
//   bit 6     put an empty chunk between the round trip's chunks.
// The file is opened, its index checked, the whole file and the sub-range
// scanned (record_scan_check.h). When it scans cleanly its records are written
// again with EncodeChunk and must read back unchanged.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "checksum_fixup.h"
#include "common/endian.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/recordio_chunk.h"
#include "data/recordio_file.h"
#include "elasticdl/data/recordio.h"
#include "fuzz_check.h"
#include "record_scan_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

// Keeps a hostile chunk from decompressing into more than the fuzzer's memory.
constexpr size_t kMaxChunkBytes = size_t{16} << 20;
// Round trips are done for files whose records total at most this.
constexpr size_t kRoundTripBytes = size_t{256} << 10;

RecordFileOptions FuzzOptions() {
  RecordFileOptions options;
  options.max_chunk_bytes = kMaxChunkBytes;
  return options;
}

void CheckIndex(const RecordIOFile& file, uint64_t size) {
  uint64_t next_offset = 0, next_record = 0;
  for (const RecordIOChunkInfo& c : file.chunks()) {
    EDL_FUZZ_CHECK(c.offset == next_offset, "chunk at {}, expected {}", c.offset, next_offset);
    EDL_FUZZ_CHECK(c.first_record == next_record, "chunk at {}: first record {}, expected {}",
                   c.offset, c.first_record, next_record);
    next_offset = c.offset + recordio::kHeaderSize + c.stored_size;
    next_record += c.num_records;
  }
  EDL_FUZZ_CHECK(next_offset == size, "chunks end at {}, file has {} bytes", next_offset, size);
  EDL_FUZZ_CHECK(next_record == file.num_records(), "chunks hold {} records, num_records() {}",
                 next_record, file.num_records());
}

// Writes `records` as RecordIO chunks in memory, reads them back and compares.
void RoundTrip(const std::vector<std::string>& records, uint8_t flags) {
  auto compressor = static_cast<Compressor>((flags >> 1) & 3);
  if (compressor != Compressor::kSnappy && compressor != Compressor::kGzip) {
    compressor = Compressor::kNone;
  }
  const size_t per_chunk = 1 + ((flags >> 3) & 7);
  const bool empty_chunks = (flags >> 6) & 1;
  std::string file, raw;
  for (size_t i = 0; i < records.size(); i += per_chunk) {
    raw.clear();
    const size_t n = std::min(per_chunk, records.size() - i);
    for (size_t j = i; j < i + n; ++j) {
      char len[4];
      EncodeFixed32(len, static_cast<uint32_t>(records[j].size()));
      raw.append(len, 4);
      raw += records[j];
    }
    Status s = recordio::EncodeChunk(raw, static_cast<uint32_t>(n), compressor, &file);
    EDL_FUZZ_CHECK(s.ok(), "EncodeChunk: {}", s.ToString());
    if (empty_chunks) {
      s = recordio::EncodeChunk("", 0, compressor, &file);
      EDL_FUZZ_CHECK(s.ok(), "EncodeChunk of no records: {}", s.ToString());
    }
  }
  auto reopened =
      recordio::OpenFile(RandomAccessFile::FromString("roundtrip.recordio", file), FuzzOptions());
  EDL_FUZZ_CHECK(reopened.ok(), "reopening what EncodeChunk wrote: {}",
                 reopened.status().ToString());
  EDL_FUZZ_CHECK((*reopened)->num_records() == records.size(), "wrote {} records, read {}",
                 records.size(), (*reopened)->num_records());
  auto scanner = (*reopened)->Scan(0, records.size());
  EDL_FUZZ_CHECK(scanner.ok(), "Scan: {}", scanner.status().ToString());
  size_t i = 0;
  while ((*scanner)->Next()) {
    EDL_FUZZ_CHECK(i < records.size() && (*scanner)->record() == records[i],
                   "round trip ({}): record {} differs", CompressorName(compressor), i);
    ++i;
  }
  EDL_FUZZ_CHECK((*scanner)->status().ok() && i == records.size(),
                 "round trip ({}): read {} of {} records: {}", CompressorName(compressor), i,
                 records.size(), (*scanner)->status().ToString());
}

// Appends the control bytes the fuzzer reads from the end of its input.
std::string WithControls(std::string file, uint8_t flags, uint16_t range_seed) {
  // FuzzedDataProvider reads integers from the end, last byte first.
  file.push_back(static_cast<char>(range_seed >> 8));
  file.push_back(static_cast<char>(range_seed & 0xff));
  file.push_back(static_cast<char>(flags));
  return file;
}

Status WriteSeeds(const std::string& dir) {
  const std::vector<std::string> records = {"", "a", "hello recordio", std::string(300, 'x'),
                                            std::string("\0\x01\x02\xff", 4)};
  int n = 0;
  for (Compressor c : {Compressor::kNone, Compressor::kSnappy, Compressor::kGzip}) {
    RecordWriterOptions options;
    options.format = RecordFormat::kRecordIO;
    options.compressor = c;
    options.max_chunk_bytes = 64;  // several chunks
    const std::string tmp = dir + "/.tmp";
    EDL_ASSIGN_OR_RETURN(auto writer, RecordWriter::Create(tmp, options));
    for (const std::string& r : records) EDL_RETURN_IF_ERROR(writer->Write(r));
    EDL_RETURN_IF_ERROR(writer->Close());
    EDL_ASSIGN_OR_RETURN(std::string file, ReadFileToString(tmp));
    std::remove(tmp.c_str());
    const auto flags = static_cast<uint8_t>(1 | (static_cast<uint8_t>(c) << 1) | (n << 3));
    EDL_RETURN_IF_ERROR(
        WriteSeed(dir, StrCat("writer_", CompressorName(c)), WithControls(file, flags, 0x0102)));
    ++n;
  }
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "empty", WithControls("", 0, 0)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  using namespace elasticdl::fuzz;
  FuzzedDataProvider in(data, size);
  const auto flags = in.ConsumeIntegral<uint8_t>();
  const auto range_seed = in.ConsumeIntegral<uint16_t>();
  std::string bytes = in.ConsumeRemainingBytesAsString();
  if (flags & 1) FixRecordIOChecksums(&bytes);
  const uint64_t size_on_disk = bytes.size();

  auto file = recordio::OpenFile(RandomAccessFile::FromString("fuzz.recordio", std::move(bytes)),
                                 FuzzOptions());
  if (!file.ok()) {
    CheckDataLoss(file.status(), "recordio::OpenFile");
    return 0;
  }
  CheckIndex(**file, size_on_disk);
  auto records = CheckScans(**file, range_seed, kRoundTripBytes);
  if (records.has_value()) RoundTrip(*records, flags);
  return 0;
}
