// Fuzzes the TFRecord reader (data/tfrecord.h).
//
// Input: a TFRecord file followed by three control bytes (FuzzedDataProvider
// takes them from the end): flags, then a 16-bit seed for the sub-range that
// is scanned besides the whole file. Flag bit 0 repairs the length and data
// checksums first, so mutations reach the framing logic behind them.
// The file is opened, the whole file and the sub-range scanned
// (record_scan_check.h). When it scans cleanly its records are framed again
// with EncodeRecord, which must give back the same bytes (once the checksums
// are right, the framing has a single form) and read back unchanged.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "checksum_fixup.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/tfrecord.h"
#include "fuzz_check.h"
#include "record_scan_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

constexpr size_t kRoundTripBytes = size_t{256} << 10;

void RoundTrip(const std::vector<std::string>& records, const std::string& original) {
  std::string file;
  for (const std::string& r : records) tfrecord::EncodeRecord(r, &file);
  EDL_FUZZ_CHECK(file == original, "re-framing {} records gives {} bytes, the file had {}",
                 records.size(), file.size(), original.size());
  auto reopened = tfrecord::OpenFile(RandomAccessFile::FromString("roundtrip.tfrecord", file));
  EDL_FUZZ_CHECK(reopened.ok(), "reopening what EncodeRecord wrote: {}",
                 reopened.status().ToString());
  EDL_FUZZ_CHECK((*reopened)->num_records() == records.size(), "wrote {} records, read {}",
                 records.size(), (*reopened)->num_records());
  auto scanner = (*reopened)->Scan(0, records.size());
  EDL_FUZZ_CHECK(scanner.ok(), "Scan: {}", scanner.status().ToString());
  size_t i = 0;
  while ((*scanner)->Next()) {
    EDL_FUZZ_CHECK(i < records.size() && (*scanner)->record() == records[i],
                   "round trip: record {} differs", i);
    ++i;
  }
  EDL_FUZZ_CHECK((*scanner)->status().ok() && i == records.size(),
                 "round trip: read {} of {} records: {}", i, records.size(),
                 (*scanner)->status().ToString());
}

std::string WithControls(std::string file, uint8_t flags, uint16_t range_seed) {
  // FuzzedDataProvider reads integers from the end, last byte first.
  file.push_back(static_cast<char>(range_seed >> 8));
  file.push_back(static_cast<char>(range_seed & 0xff));
  file.push_back(static_cast<char>(flags));
  return file;
}

Status WriteSeeds(const std::string& dir) {
  const std::vector<std::vector<std::string>> files = {
      {"", "a", "hello tfrecord", std::string(300, 'x'), std::string("\0\x01\x02\xff", 4)},
      {std::string(20, '\0')},
  };
  for (size_t i = 0; i < files.size(); ++i) {
    RecordWriterOptions options;
    options.format = RecordFormat::kTFRecord;
    const std::string tmp = dir + "/.tmp";
    EDL_ASSIGN_OR_RETURN(auto writer, RecordWriter::Create(tmp, options));
    for (const std::string& r : files[i]) EDL_RETURN_IF_ERROR(writer->Write(r));
    EDL_RETURN_IF_ERROR(writer->Close());
    EDL_ASSIGN_OR_RETURN(std::string file, ReadFileToString(tmp));
    std::remove(tmp.c_str());
    EDL_RETURN_IF_ERROR(WriteSeed(dir, StrCat("writer_", i), WithControls(file, 1, 0x0102)));
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
  if (flags & 1) FixTFRecordChecksums(&bytes);
  const std::string original = bytes;

  auto file = tfrecord::OpenFile(RandomAccessFile::FromString("fuzz.tfrecord", std::move(bytes)));
  if (!file.ok()) {
    CheckDataLoss(file.status(), "tfrecord::OpenFile");
    return 0;
  }
  auto records = CheckScans(**file, range_seed, kRoundTripBytes);
  if (records.has_value()) RoundTrip(*records, original);
  return 0;
}
