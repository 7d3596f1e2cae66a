// A query's rows as training data: each row one tf.train.Example, each
// column a feature of one value named as the column, written to RecordIO
// (or TFRecord) shards the job's tasks read.
//
// A column's feature type comes from the database where it says (INTEGER ->
// int64, REAL/NUMERIC -> float, text -> bytes); where it does not (SQLite
// expressions, untyped columns) from the values, as the CSV import infers:
// all integers -> int64, numbers -> float, any text -> bytes (numbers then
// written as their text). NULL leaves the feature out of that record.
#ifndef ELASTICDL_SQL_QUERY_EXPORT_H_
#define ELASTICDL_SQL_QUERY_EXPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/example_wire.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/status.h"
#include "sql/database.h"

namespace elasticdl::sql {

struct QueryExportOptions {
  // Output: <output_dir>/data-0000K-of-0000N.<ext>, or <output_dir>/data.<ext>
  // when records_per_shard is 0.
  std::string output_dir;
  RecordWriterOptions writer;
  uint64_t records_per_shard = 0;
};

struct ExportedColumn {
  std::string name;
  example::Kind kind = example::Kind::kBytes;
  // Rows where it was NULL.
  uint64_t nulls = 0;
};

struct QueryExportResult {
  uint64_t records = 0;
  std::vector<ExportedColumn> columns;
  std::vector<std::string> outputs;
  // How many times the query ran: 1, or 2 when it had to be read once to
  // learn its column types or row count first.
  int passes = 1;
};

// Runs `select` on `db` and writes its rows. A query without rows, two
// columns of one name, or a value that does not fit its column's declared
// type is an error naming the row and column; no output is left then.
StatusOr<QueryExportResult> ExportQuery(Database* db, std::string_view select,
                                        const QueryExportOptions& options);

}  // namespace elasticdl::sql

#endif  // ELASTICDL_SQL_QUERY_EXPORT_H_
