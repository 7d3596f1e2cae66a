// `elasticdl data inspect`: what a record file holds, for a person to read.
#ifndef ELASTICDL_DATA_INSPECT_H_
#define ELASTICDL_DATA_INSPECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

struct InspectOptions {
  std::optional<RecordFormat> format;  // default: from the extension
  // How many records to show, from the first. Default 3.
  uint64_t num_records = 3;
  // Values shown per feature before eliding. Default 8.
  size_t max_values = 8;
};

// Returns the report: format, record count, chunks and their compression
// (RecordIO), and the first records decoded as tf.train.Example (or shown as
// escaped bytes if they are not Examples).
StatusOr<std::string> Inspect(const std::string& path, const InspectOptions& options);

// What a data directory or glob holds, as --training_data reads it: one line
// per file (records, format, size on disk), the total, and the first records
// of the first file that opens. A file that cannot be read as a record file
// is listed with its error, which `problems` also holds.
struct FilesReport {
  std::string text;
  std::vector<Status> problems;
};
FilesReport InspectFiles(std::string_view spec, const std::vector<std::string>& files,
                         const InspectOptions& options);

// One record as readable text, one feature per line, each line starting with
// `indent`.
std::string DescribeRecord(std::string_view record, size_t max_values, std::string_view indent);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_INSPECT_H_
