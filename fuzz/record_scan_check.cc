#include "record_scan_check.h"

#include <algorithm>

#include "fuzz_check.h"

namespace elasticdl::fuzz {
namespace {

// Scans [start, end), checking indices and the end of the scan, and calls
// on_record(index, bytes) for each record. Returns the scanner's final status.
template <typename Fn>
Status ScanRange(const RecordFile& file, uint64_t start, uint64_t end, Fn on_record) {
  auto scanner = file.Scan(start, end);
  EDL_FUZZ_CHECK(scanner.ok(), "Scan({}, {}) of {} records: {}", start, end, file.num_records(),
                 scanner.status().ToString());
  RecordScanner& scan = **scanner;
  uint64_t expected = start;
  while (scan.Next()) {
    EDL_FUZZ_CHECK(expected < end, "scan of [{}, {}) yielded a record past its end", start, end);
    EDL_FUZZ_CHECK(scan.index() == expected, "scan of [{}, {}): index() {}, expected {}", start,
                   end, scan.index(), expected);
    on_record(expected, scan.record());
    ++expected;
  }
  EDL_FUZZ_CHECK(!scan.Next(), "Next() returned true again after returning false");
  if (scan.status().ok()) {
    EDL_FUZZ_CHECK(expected == end, "scan of [{}, {}) ended cleanly after {} records", start, end,
                   expected - start);
  } else {
    CheckDataLoss(scan.status(), "Next()");
  }
  return scan.status();
}

}  // namespace

void CheckDataLoss(const Status& status, const char* what) {
  EDL_FUZZ_CHECK(status.code() == StatusCode::kDataLoss, "{} failed with {}, expected DATA_LOSS",
                 what, status.ToString());
}

std::optional<std::vector<std::string>> CheckScans(const RecordFile& file, uint16_t range_seed,
                                                   size_t keep_bytes) {
  const uint64_t n = file.num_records();
  for (auto [start, end] : {std::pair<uint64_t, uint64_t>{1, 0}, {0, n + 1}, {n + 1, n + 1}}) {
    auto refused = file.Scan(start, end);
    EDL_FUZZ_CHECK(!refused.ok() && refused.status().code() == StatusCode::kInvalidArgument,
                   "Scan({}, {}) of {} records: {}", start, end, n, refused.status().ToString());
  }

  // A sub-range: its start from the high byte of the seed, its length (at
  // most 255) from the low byte.
  const uint64_t start = (range_seed >> 8) % (n + 1);
  const uint64_t end = start + std::min<uint64_t>(range_seed & 0xff, n - start);
  std::vector<std::string> range_records;
  const Status range_status = ScanRange(
      file, start, end, [&](uint64_t, std::string_view r) { range_records.emplace_back(r); });

  std::vector<std::string> kept;
  size_t kept_bytes = 0;
  bool keep = true;
  const Status full_status = ScanRange(file, 0, n, [&](uint64_t i, std::string_view r) {
    if (i >= start && i - start < range_records.size()) {
      EDL_FUZZ_CHECK(r == range_records[i - start],
                     "record {}: whole-file scan and scan of [{}, {}) disagree", i, start, end);
    }
    kept_bytes += r.size();
    keep = keep && kept_bytes <= keep_bytes;
    if (keep) kept.emplace_back(r);
  });
  if (!full_status.ok()) return std::nullopt;
  EDL_FUZZ_CHECK(range_status.ok(), "whole file scans cleanly but [{}, {}) fails: {}", start, end,
                 range_status.ToString());
  if (!keep) return std::nullopt;
  return kept;
}

}  // namespace elasticdl::fuzz
