// CSV to tf.train.Example: the header row names the features; each column
// becomes an int64_list, float_list or bytes_list feature of one value.
// Column types are inferred (int64 if every value is an integer, float if
// every value is a number, bytes otherwise) unless given. Empty fields are
// left out of that record's Example (a spec default then applies).
#ifndef ELASTICDL_DATA_CSV_IMPORT_H_
#define ELASTICDL_DATA_CSV_IMPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/example_wire.h"
#include "elasticdl/status.h"

namespace elasticdl {

struct CsvOptions {
  // Field separator. Default ','.
  char delimiter = ',';
  // Column types by name ("int64", "float" or "bytes"), overriding inference.
  std::map<std::string, example::Kind> column_types;
};

// Parses "name:type,name:type" (types int64, float, bytes).
StatusOr<std::map<std::string, example::Kind>> ParseColumnTypes(std::string_view spec);

struct CsvSchema {
  std::vector<std::string> names;
  std::vector<example::Kind> kinds;
  uint64_t num_rows = 0;
};

// First pass: reads the header, counts rows, infers column types. Errors name
// the file and line.
StatusOr<CsvSchema> ScanCsv(const std::string& path, const CsvOptions& options);

// Second pass: calls `sink` with each row's serialized Example, in order.
Status ConvertCsv(const std::string& path, const CsvOptions& options, const CsvSchema& schema,
                  const std::function<Status(std::string_view)>& sink);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_CSV_IMPORT_H_
