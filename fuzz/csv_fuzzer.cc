// Fuzzes CSV to tf.Example conversion (data/csv_import.h) on top of libcsv.
//
// Input: a CSV file; its first byte picks the delimiter (',' ';' '\t' '|').
// The file is written to a temporary path (the importer reads files). Both
// passes must fail with INVALID_ARGUMENT naming the file, or produce exactly
// one Example per counted row, each of which decodes with at most one value
// per column and the column's inferred kind.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "data/csv_import.h"
#include "data/example_wire.h"
#include "fuzz_check.h"
#include "seed_mode.h"
#include "temp_file.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "people", ",name,age,height\n\"Ada, C\",36,1.65\nBob,41,\n"));
  return WriteSeed(dir, "quoted", "\x01a;b\n\"x\"\"y\";-7\n\"multi\nline\";1e3\n");
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  if (size < 1) return 0;
  static const char kDelimiters[] = {',', ';', '\t', '|'};
  CsvOptions options;
  options.delimiter = kDelimiters[data[0] % 4];
  const std::string path = fuzz::WriteTempFile("csv_fuzzer", ".csv", data + 1, size - 1);
  StatusOr<CsvSchema> schema = ScanCsv(path, options);
  if (!schema.ok()) {
    EDL_FUZZ_CHECK(schema.status().code() == StatusCode::kInvalidArgument,
                   "ScanCsv: unexpected status {}", schema.status().ToString());
    EDL_FUZZ_CHECK(schema.status().message().find(path) != absl::string_view::npos,
                   "ScanCsv error does not name the file: {}", schema.status().ToString());
    return 0;
  }
  EDL_FUZZ_CHECK(schema->names.size() == schema->kinds.size(), "{} names, {} kinds",
                 schema->names.size(), schema->kinds.size());
  uint64_t rows = 0;
  Status s = ConvertCsv(path, options, *schema, [&](std::string_view record) -> Status {
    std::vector<example::DecodedFeature> features;
    EDL_FUZZ_CHECK(example::DecodeAll(record, &features).ok(), "row {} does not decode", rows);
    EDL_FUZZ_CHECK(features.size() <= schema->names.size(), "row {}: {} features for {} columns",
                   rows, features.size(), schema->names.size());
    for (const auto& f : features) {
      size_t values = f.floats.size() + f.int64s.size() + f.bytes.size();
      EDL_FUZZ_CHECK(values == 1, "row {}: feature has {} values", rows, values);
    }
    ++rows;
    return absl::OkStatus();
  });
  // The schema pass accepted the file, so conversion must succeed: the types
  // it inferred fit every value.
  EDL_FUZZ_CHECK(s.ok(), "ConvertCsv after a clean ScanCsv: {}", s.ToString());
  EDL_FUZZ_CHECK(rows == schema->num_rows, "converted {} rows, counted {}", rows, schema->num_rows);
  return 0;
}
