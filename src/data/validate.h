// `elasticdl data validate`: scans whole files and reports every corrupt spot,
// resynchronizing after each one instead of stopping at the first.
#ifndef ELASTICDL_DATA_VALIDATE_H_
#define ELASTICDL_DATA_VALIDATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

struct ValidateOptions {
  std::optional<RecordFormat> format;  // default: from the extension
  // Also check that every record parses as a tf.train.Example.
  bool examples = false;
  // Largest decompressed RecordIO chunk accepted.
  size_t max_chunk_bytes = size_t{1} << 30;
};

struct Finding {
  uint64_t offset = 0;  // byte offset in the file of the damaged chunk / record
  std::string problem;
};

struct ValidateReport {
  std::string path;
  uint64_t size = 0;
  uint64_t good_records = 0;  // records whose framing and checksums are intact
  uint64_t chunks = 0;        // RecordIO chunks found (intact or not)
  std::vector<Finding> findings;
};

// Fails only if the file cannot be read at all (missing, unreadable, unknown
// format); damage is reported in the report's findings.
StatusOr<ValidateReport> ValidateFile(const std::string& path, const ValidateOptions& options);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_VALIDATE_H_
