#include "sql/query_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/strings.h"
#include "data/sharded_writer.h"

namespace elasticdl::sql {

namespace {

example::Kind KindOf(ColumnType type) {
  switch (type) {
    case ColumnType::kInteger:
      return example::Kind::kInt64;
    case ColumnType::kReal:
      return example::Kind::kFloat;
    case ColumnType::kText:
      return example::Kind::kBytes;
    default:
      return example::Kind::kNone;  // from the values
  }
}

// The kind that holds both a column's values so far and `cell`.
example::Kind Widen(example::Kind kind, Cell::Kind cell) {
  if (cell == Cell::Kind::kNull || kind == example::Kind::kBytes) return kind;
  if (cell == Cell::Kind::kText) return example::Kind::kBytes;
  if (cell == Cell::Kind::kReal || kind == example::Kind::kFloat) return example::Kind::kFloat;
  return example::Kind::kInt64;
}

// One row as an Example, its features in the order of their names (the
// bytes protobuf's deterministic serialization gives).
Status Encode(const std::vector<Cell>& cells, const std::vector<size_t>& by_name,
              std::vector<ExportedColumn>* columns, uint64_t row, std::string* out) {
  example::ExampleEncoder encoder(out);
  for (size_t i : by_name) {
    const Cell& cell = cells[i];
    ExportedColumn& column = (*columns)[i];
    if (cell.kind == Cell::Kind::kNull) {
      ++column.nulls;
      continue;
    }
    const auto mismatch = [&](std::string_view expected) {
      return absl::InvalidArgumentError(StrCat("row ", row, ", column '", column.name, "': '",
                                               CellText(cell), "' is not ", expected,
                                               " as the column's type says"));
    };
    switch (column.kind) {
      case example::Kind::kInt64:
        if (cell.kind == Cell::Kind::kInteger) {
          encoder.AddInt64(column.name, cell.integer);
        } else if (cell.kind == Cell::Kind::kReal &&
                   cell.real == static_cast<double>(static_cast<int64_t>(cell.real))) {
          encoder.AddInt64(column.name, static_cast<int64_t>(cell.real));
        } else {
          return mismatch("an integer");
        }
        break;
      case example::Kind::kFloat:
        if (cell.kind == Cell::Kind::kText) return mismatch("a number");
        encoder.AddFloat(column.name, static_cast<float>(cell.kind == Cell::Kind::kInteger
                                                             ? static_cast<double>(cell.integer)
                                                             : cell.real));
        break;
      default:
        if (cell.kind == Cell::Kind::kText) {
          encoder.AddBytes(column.name, cell.text);
        } else {
          encoder.AddBytes(column.name, CellText(cell));
        }
        break;
    }
  }
  encoder.Finish();
  return absl::OkStatus();
}

}  // namespace

StatusOr<QueryExportResult> ExportQuery(Database* db, std::string_view select,
                                        const QueryExportOptions& options) {
  if (options.output_dir.empty()) {
    return absl::InvalidArgumentError("an output directory is required");
  }
  const auto in_query = [&](const Status& status) {
    return Annotate(status, StrCat(db->Describe(), ": query \"", select, "\""));
  };
  QueryExportResult result;
  std::vector<bool> inferred;  // by column: the type comes from the values

  // A first pass when a column's type must be learned from its values, or
  // the shard names need the number of rows; otherwise the query stops
  // before its first row.
  bool first_pass = false;
  uint64_t total = 0;
  const Status scan = db->Query(
      select,
      [&](const std::vector<ColumnInfo>& columns) -> Status {
        EDL_RETURN_IF_ERROR(CheckColumnNames(columns));
        first_pass = options.records_per_shard > 0;
        for (const ColumnInfo& column : columns) {
          result.columns.push_back({column.name, KindOf(column.type), 0});
          inferred.push_back(result.columns.back().kind == example::Kind::kNone);
          first_pass = first_pass || inferred.back();
        }
        return first_pass ? absl::OkStatus() : absl::CancelledError();
      },
      [&](const std::vector<Cell>& cells) -> Status {
        ++total;
        for (size_t i = 0; i < cells.size(); ++i) {
          if (inferred[i]) result.columns[i].kind = Widen(result.columns[i].kind, cells[i].kind);
        }
        return absl::OkStatus();
      });
  if (first_pass || !absl::IsCancelled(scan)) EDL_RETURN_IF_ERROR(in_query(scan));
  if (first_pass) {
    if (total == 0) return in_query(absl::InvalidArgumentError("the query returned no rows"));
    for (ExportedColumn& column : result.columns) {
      // Only NULLs: never written; bytes as good as any.
      if (column.kind == example::Kind::kNone) column.kind = example::Kind::kBytes;
    }
    result.passes = 2;
  }

  const std::string ext =
      RecordFormatName(options.writer.format) == "recordio" ? ".recordio" : ".tfrecord";
  EDL_ASSIGN_OR_RETURN(
      auto writer, ShardedWriter::Create(StrCat(options.output_dir, "/data", ext), options.writer,
                                         options.records_per_shard, total));
  std::vector<size_t> by_name(result.columns.size());
  for (size_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  std::sort(by_name.begin(), by_name.end(),
            [&](size_t a, size_t b) { return result.columns[a].name < result.columns[b].name; });
  std::string record;
  uint64_t row = 0;
  EDL_RETURN_IF_ERROR(in_query(db->Query(
      select,
      [&](const std::vector<ColumnInfo>& columns) -> Status {
        if (columns.size() != result.columns.size()) {
          return absl::AbortedError("the query's columns changed between its two passes");
        }
        return absl::OkStatus();
      },
      [&](const std::vector<Cell>& cells) -> Status {
        ++row;
        EDL_RETURN_IF_ERROR(Encode(cells, by_name, &result.columns, row, &record));
        return writer->Write(record);
      })));
  if (row == 0) return in_query(absl::InvalidArgumentError("the query returned no rows"));
  if (first_pass && row != total) {
    return in_query(
        absl::AbortedError(StrCat("the query returned ", total, " rows, then ", row,
                                  ": the data changed while it was read; run it again")));
  }
  EDL_RETURN_IF_ERROR(writer->Close());
  result.records = row;
  result.outputs = writer->paths();
  return result;
}

}  // namespace elasticdl::sql
