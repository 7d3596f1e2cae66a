#include "sql/tabular.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "common/crc.h"
#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/data/record_file.h"

namespace elasticdl::sql {

namespace {

const std::vector<PrebuiltModel>& Models() {
  static const auto* models = new std::vector<PrebuiltModel>{
      {"regressor.DNN",
       false,
       {"hidden_units", "embedding_dim", "dropout", "optimizer", "learning_rate"}},
      {"regressor.Linear", false, {"optimizer", "learning_rate"}},
      {"classifier.DNN",
       true,
       {"hidden_units", "embedding_dim", "dropout", "optimizer", "learning_rate"}},
      {"classifier.Linear", true, {"optimizer", "learning_rate"}},
  };
  return *models;
}

// More classes than this is not what a classifier of this kind is for.
constexpr size_t kMaxClasses = 1000;

double CellNumber(const Cell& cell) {
  return cell.kind == Cell::Kind::kInteger ? static_cast<double>(cell.integer) : cell.real;
}

bool IsNumber(const Cell& cell) {
  return cell.kind == Cell::Kind::kInteger || cell.kind == Cell::Kind::kReal;
}

// What the rows of one column held, for DeriveTabular.
struct ColumnStats {
  ColumnInfo info;
  uint64_t values = 0;  // not NULL
  uint64_t first_text_row = 0;
  std::string first_text;
  // Welford's running mean and sum of squared deviations.
  double mean = 0;
  double m2 = 0;
  std::set<std::string> distinct;  // up to max_distinct + 1 (none for the label)

  void Add(const Cell& cell, uint64_t row, size_t max_distinct) {
    if (cell.kind == Cell::Kind::kNull) return;
    ++values;
    if (IsNumber(cell)) {
      const double x = CellNumber(cell);
      const double delta = x - mean;
      mean += delta / static_cast<double>(values);
      m2 += delta * (x - mean);
    } else if (first_text_row == 0) {
      first_text_row = row;
      first_text = std::string(cell.text.substr(0, 80));
    }
    if (max_distinct > 0 && distinct.size() <= max_distinct) distinct.insert(CellText(cell));
  }
};

std::string Names(const std::vector<ColumnInfo>& columns) {
  return absl::StrJoin(columns, ", ",
                       [](std::string* out, const ColumnInfo& c) { out->append(c.name); });
}

StatusOr<size_t> FindColumn(const std::vector<ColumnInfo>& columns, const std::string& name,
                            std::string_view role) {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == name) return i;
  }
  return absl::InvalidArgumentError(
      StrCat(role, " '", name, "' is not a column of the query; it selects ", Names(columns)));
}

// The label's classes, kept as integers or as text (not both).
struct Classes {
  std::set<int64_t> integers;
  std::set<std::string> texts;
  uint64_t first_integer_row = 0, first_text_row = 0;
};

// How EncodeTabular turns a row into a record.
struct Encoder {
  std::vector<size_t> numeric;      // query column of each numeric feature
  std::vector<size_t> categorical;  // ... of each text feature
  std::vector<const proto::SqlColumn*> numeric_spec, categorical_spec;
  std::vector<absl::flat_hash_map<std::string, int64_t>> vocabularies;
  std::optional<size_t> label;
  absl::flat_hash_map<std::string, int64_t> class_index;
};

// A row of selected values: per cell a kind byte, then 8 bytes of an
// integer or a double, or a 4-byte length and the text.
void AppendRow(const std::vector<Cell>& cells, std::string* out) {
  out->clear();
  for (const Cell& cell : cells) {
    out->push_back(static_cast<char>(cell.kind));
    char bytes[8];
    switch (cell.kind) {
      case Cell::Kind::kInteger:
        std::memcpy(bytes, &cell.integer, 8);
        out->append(bytes, 8);
        break;
      case Cell::Kind::kReal:
        std::memcpy(bytes, &cell.real, 8);
        out->append(bytes, 8);
        break;
      case Cell::Kind::kText:
      case Cell::Kind::kBlob: {
        const auto size = static_cast<uint32_t>(cell.text.size());
        std::memcpy(bytes, &size, 4);
        out->append(bytes, 4);
        out->append(cell.text);
        break;
      }
      case Cell::Kind::kNull:
        break;
    }
  }
}

}  // namespace

Status ParseSelectedRow(std::string_view record, std::vector<Cell>* cells) {
  cells->clear();
  const auto truncated = [] { return absl::DataLossError("a saved row is truncated"); };
  while (!record.empty()) {
    Cell cell;
    cell.kind = static_cast<Cell::Kind>(record[0]);
    record.remove_prefix(1);
    switch (cell.kind) {
      case Cell::Kind::kInteger:
      case Cell::Kind::kReal:
        if (record.size() < 8) return truncated();
        std::memcpy(cell.kind == Cell::Kind::kInteger ? static_cast<void*>(&cell.integer)
                                                      : static_cast<void*>(&cell.real),
                    record.data(), 8);
        record.remove_prefix(8);
        break;
      case Cell::Kind::kText:
      case Cell::Kind::kBlob: {
        uint32_t size = 0;
        if (record.size() < 4) return truncated();
        std::memcpy(&size, record.data(), 4);
        record.remove_prefix(4);
        if (record.size() < size) return truncated();
        cell.text = record.substr(0, size);
        record.remove_prefix(size);
        break;
      }
      case Cell::Kind::kNull:
        break;
      default:
        return absl::DataLossError("a saved row holds an unknown kind of value");
    }
    cells->push_back(cell);
  }
  return absl::OkStatus();
}

namespace {

ColumnType Widen(ColumnType type, const Cell& cell) {
  switch (cell.kind) {
    case Cell::Kind::kNull:
      return type;
    case Cell::Kind::kInteger:
      return type == ColumnType::kUnknown ? ColumnType::kInteger : type;
    case Cell::Kind::kReal:
      return type == ColumnType::kUnknown || type == ColumnType::kInteger ? ColumnType::kReal
                                                                          : type;
    default:
      return type == ColumnType::kBlob ? type : ColumnType::kText;
  }
}

}  // namespace

namespace {

// Runs `select` on `db`, or reads `recorded` back when given, with
// Database::Query's callbacks.
Status ReadQuery(Database* db, std::string_view select, const QueryRecording* recorded,
                 const std::function<Status(const std::vector<ColumnInfo>&)>& on_columns,
                 const std::function<Status(const std::vector<Cell>&)>& on_row) {
  if (recorded == nullptr) return db->Query(select, on_columns, on_row);
  EDL_RETURN_IF_ERROR(on_columns(recorded->columns));
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordFile> file,
                       RecordFile::Open(recorded->rows_path, RecordFormat::kRecordIO));
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordScanner> scanner, file->Scan(0, file->num_records()));
  std::vector<Cell> cells;
  while (scanner->Next()) {
    EDL_RETURN_IF_ERROR(ParseSelectedRow(scanner->record(), &cells));
    EDL_RETURN_IF_ERROR(on_row(cells));
  }
  return scanner->status();
}

}  // namespace

StatusOr<const PrebuiltModel*> FindPrebuiltModel(std::string_view name) {
  std::vector<std::string> names;
  for (const PrebuiltModel& m : Models()) {
    if (m.name == name) return &m;
    names.push_back(m.name);
  }
  return absl::NotFoundError(
      StrCat("unknown model '", name, "': the models are ", absl::StrJoin(names, ", ")));
}

StatusOr<proto::SqlModel> DeriveTabular(Database* db, std::string_view select,
                                        const std::vector<std::string>& features,
                                        const std::string& label, const PrebuiltModel& model,
                                        const TabularOptions& options, QueryRecording* recording) {
  if (label.empty()) {
    return absl::InvalidArgumentError(
        StrCat("TRAIN ", model.name, " needs LABEL <column>: the column it learns to predict"));
  }
  if (options.max_vocabulary < 1 || options.hash_buckets < 1) {
    return absl::InvalidArgumentError("max_vocabulary and hash_buckets must be positive");
  }
  const auto max_distinct = static_cast<size_t>(options.max_vocabulary);
  std::vector<size_t> feature_index;
  size_t label_index = 0;
  std::vector<ColumnStats> stats;
  Classes classes;
  uint64_t row = 0;
  const auto in_query = [&](const Status& status) {
    return Annotate(status, StrCat(db->Describe(), ": query \"", select, "\""));
  };
  std::unique_ptr<RecordWriter> recorder;
  std::string recorded_row;
  const auto drop_recording = [&] {
    if (recording == nullptr) return;
    recorder.reset();
    std::error_code ec;
    std::filesystem::remove(recording->rows_path, ec);
  };
  Status read = db->Query(
      select,
      [&](const std::vector<ColumnInfo>& columns) -> Status {
        EDL_RETURN_IF_ERROR(CheckColumnNames(columns));
        if (recording != nullptr) {
          recording->columns = columns;
          EDL_ASSIGN_OR_RETURN(recorder, RecordWriter::Create(recording->rows_path, {}));
        }
        EDL_ASSIGN_OR_RETURN(label_index, FindColumn(columns, label, "LABEL"));
        if (features.empty()) {
          for (size_t i = 0; i < columns.size(); ++i) {
            if (i != label_index) feature_index.push_back(i);
          }
        }
        for (const std::string& name : features) {
          EDL_ASSIGN_OR_RETURN(size_t i, FindColumn(columns, name, "COLUMN"));
          if (i == label_index) {
            return absl::InvalidArgumentError(StrCat(
                "COLUMN '", name, "' is the label: a model cannot take its answer as input"));
          }
          feature_index.push_back(i);
        }
        if (feature_index.empty()) {
          return absl::InvalidArgumentError(StrCat("the query selects only the label '", label,
                                                   "': select the columns ", model.name,
                                                   " predicts it from"));
        }
        for (const ColumnInfo& c : columns) {
          stats.emplace_back();
          stats.back().info = c;
        }
        return absl::OkStatus();
      },
      [&](const std::vector<Cell>& cells) -> Status {
        ++row;
        if (recorder != nullptr) {
          recorded_row.clear();
          AppendRow(cells, &recorded_row);
          EDL_RETURN_IF_ERROR(recorder->Write(recorded_row));
        }
        for (size_t i : feature_index) stats[i].Add(cells[i], row, max_distinct);
        const Cell& y = cells[label_index];
        if (y.kind == Cell::Kind::kNull) {
          return absl::InvalidArgumentError(StrCat("row ", row, ": the label '", label,
                                                   "' is NULL; leave such rows out (WHERE ", label,
                                                   " IS NOT NULL)"));
        }
        if (!model.classifier) {
          if (!IsNumber(y)) {
            return absl::InvalidArgumentError(
                StrCat("row ", row, ": the label '", label, "' holds '", CellText(y), "'; ",
                       model.name, " predicts numbers (a classifier.* model predicts classes)"));
          }
          stats[label_index].Add(y, row, 0);
          return absl::OkStatus();
        }
        if (y.kind == Cell::Kind::kReal && y.real != std::floor(y.real)) {
          return absl::InvalidArgumentError(
              StrCat("row ", row, ": the label '", label, "' holds ", CellText(y), "; ", model.name,
                     "'s classes are integers or text (a regressor.* model ", "predicts numbers)"));
        }
        if (IsNumber(y)) {
          classes.integers.insert(static_cast<int64_t>(CellNumber(y)));
          if (classes.first_integer_row == 0) classes.first_integer_row = row;
        } else {
          classes.texts.insert(std::string(y.text));
          if (classes.first_text_row == 0) classes.first_text_row = row;
        }
        if (classes.first_integer_row != 0 && classes.first_text_row != 0) {
          return absl::InvalidArgumentError(
              StrCat("the label '", label, "' mixes types: row ", classes.first_integer_row,
                     " holds a number and row ", classes.first_text_row,
                     " text; make it one type (CAST it in the query)"));
        }
        if (classes.integers.size() + classes.texts.size() > kMaxClasses) {
          return absl::InvalidArgumentError(
              StrCat("the label '", label, "' has more than ", kMaxClasses,
                     " distinct values; a classifier of so many classes is not what ", model.name,
                     " is for"));
        }
        return absl::OkStatus();
      });
  if (read.ok() && row == 0) read = absl::InvalidArgumentError("the query returned no rows");
  if (read.ok() && recorder != nullptr) read = recorder->Close();
  if (!read.ok()) {
    drop_recording();
    return in_query(read);
  }

  proto::SqlModel result;
  result.set_model(model.name);
  result.set_select(std::string(select));
  result.set_label(label);
  result.set_classifier(model.classifier);
  result.set_rows(static_cast<int64_t>(row));
  std::vector<proto::SqlColumn> numeric, text;
  for (size_t i : feature_index) {
    const ColumnStats& s = stats[i];
    const std::string& name = s.info.name;
    if (s.values == 0) {
      return in_query(absl::InvalidArgumentError(
          StrCat("column '", name, "' is NULL in every row: leave it out of the query")));
    }
    const bool declared_number =
        s.info.type == ColumnType::kInteger || s.info.type == ColumnType::kReal;
    if (declared_number && s.first_text_row != 0) {
      return in_query(absl::InvalidArgumentError(
          StrCat("row ", s.first_text_row, ", column '", name, "': '", s.first_text,
                 "' is not a number as the column's type says")));
    }
    proto::SqlColumn column;
    column.set_name(name);
    if (declared_number || (s.info.type != ColumnType::kText && s.first_text_row == 0)) {
      column.set_numeric(true);
      column.set_mean(s.mean);
      column.set_std(std::sqrt(s.m2 / static_cast<double>(s.values)));
      numeric.push_back(std::move(column));
      continue;
    }
    if (s.distinct.size() <= max_distinct) {
      for (const std::string& v : s.distinct) column.add_vocabulary(v);
    } else {
      column.set_hash_buckets(options.hash_buckets);
    }
    text.push_back(std::move(column));
  }
  for (auto& c : numeric) *result.add_columns() = std::move(c);
  for (auto& c : text) *result.add_columns() = std::move(c);

  if (model.classifier) {
    for (int64_t v : classes.integers) result.add_classes(std::to_string(v));
    for (const std::string& v : classes.texts) result.add_classes(v);
    result.set_label_type(classes.texts.empty() ? "INTEGER" : "TEXT");
    if (result.classes_size() < 2) {
      return in_query(absl::InvalidArgumentError(
          StrCat("the label '", label, "' has one value (", result.classes(0),
                 ") in every row: there is nothing to classify")));
    }
  } else {
    const ColumnStats& y = stats[label_index];
    result.set_label_type("REAL");
    result.set_label_mean(y.mean);
    result.set_label_std(std::sqrt(y.m2 / static_cast<double>(y.values)));
  }
  return result;
}

std::string TabularParams(const proto::SqlModel& model) {
  std::vector<std::string> mean, std, sizes;
  for (const proto::SqlColumn& c : model.columns()) {
    if (c.numeric()) {
      mean.push_back(fmt::format("{}", c.mean()));
      std.push_back(fmt::format("{}", c.std()));
    } else {
      sizes.push_back(
          std::to_string(c.hash_buckets() > 0 ? c.hash_buckets() + 1 : c.vocabulary_size() + 1));
    }
  }
  std::string params =
      fmt::format("numeric_mean=[{}], numeric_std=[{}], categorical_sizes=[{}]",
                  absl::StrJoin(mean, ", "), absl::StrJoin(std, ", "), absl::StrJoin(sizes, ", "));
  if (model.classifier()) {
    params += fmt::format(", num_classes={}", model.classes_size());
  } else {
    params += fmt::format(", label_mean={}, label_std={}", model.label_mean(), model.label_std());
  }
  return params;
}

StatusOr<EncodeResult> EncodeTabular(Database* db, std::string_view select,
                                     const proto::SqlModel& model, const std::string& records_path,
                                     const std::string& rows_path, const QueryRecording* recorded) {
  const bool training = rows_path.empty();
  Encoder enc;
  EncodeResult result;
  std::unique_ptr<RecordWriter> records, rows;
  RecordWriterOptions writer_options;
  EDL_ASSIGN_OR_RETURN(records, RecordWriter::Create(records_path, writer_options));
  if (!training) {
    EDL_ASSIGN_OR_RETURN(rows, RecordWriter::Create(rows_path, writer_options));
  }
  const auto remove_outputs = [&] {
    std::error_code ec;
    std::filesystem::remove(records_path, ec);
    if (!training) std::filesystem::remove(rows_path, ec);
  };
  const auto in_query = [&](const Status& status) {
    return Annotate(status, StrCat(db->Describe(), ": query \"", select, "\""));
  };

  std::vector<float> numbers;
  std::vector<int64_t> ids;
  std::string record, row_bytes;
  uint64_t row = 0;
  Status status = ReadQuery(
      db, select, recorded,
      [&](const std::vector<ColumnInfo>& columns) -> Status {
        EDL_RETURN_IF_ERROR(CheckColumnNames(columns));
        for (const proto::SqlColumn& c : model.columns()) {
          StatusOr<size_t> i = FindColumn(columns, c.name(), "the model's input");
          if (!i.ok()) {
            return absl::InvalidArgumentError(StrCat(
                "the model's input '", c.name(), "' is not a column of the query; it ", "selects ",
                Names(columns), " (the model was trained on \"", model.select(), "\")"));
          }
          if (c.numeric()) {
            enc.numeric.push_back(*i);
            enc.numeric_spec.push_back(&c);
          } else {
            enc.categorical.push_back(*i);
            enc.categorical_spec.push_back(&c);
            auto& vocabulary = enc.vocabularies.emplace_back();
            for (int v = 0; v < c.vocabulary_size(); ++v) vocabulary[c.vocabulary(v)] = v + 1;
          }
        }
        if (training) {
          EDL_ASSIGN_OR_RETURN(enc.label, FindColumn(columns, model.label(), "LABEL"));
          for (int k = 0; k < model.classes_size(); ++k) enc.class_index[model.classes(k)] = k;
        }
        result.columns = columns;
        return absl::OkStatus();
      },
      [&](const std::vector<Cell>& cells) -> Status {
        ++row;
        numbers.clear();
        ids.clear();
        for (size_t k = 0; k < enc.numeric.size(); ++k) {
          const Cell& cell = cells[enc.numeric[k]];
          if (cell.kind == Cell::Kind::kNull) {
            numbers.push_back(static_cast<float>(enc.numeric_spec[k]->mean()));
          } else if (IsNumber(cell)) {
            numbers.push_back(static_cast<float>(CellNumber(cell)));
          } else {
            return absl::InvalidArgumentError(
                StrCat("row ", row, ", column '", enc.numeric_spec[k]->name(), "': '",
                       CellText(cell), "' is not a number, and the model reads it as one"));
          }
        }
        for (size_t k = 0; k < enc.categorical.size(); ++k) {
          const Cell& cell = cells[enc.categorical[k]];
          const proto::SqlColumn& spec = *enc.categorical_spec[k];
          if (cell.kind == Cell::Kind::kNull) {
            ids.push_back(0);
            continue;
          }
          const std::string text = CellText(cell);
          if (spec.hash_buckets() > 0) {
            ids.push_back(1 + static_cast<int64_t>(crc::Crc32c(text) % spec.hash_buckets()));
          } else {
            auto it = enc.vocabularies[k].find(text);
            ids.push_back(it == enc.vocabularies[k].end() ? 0 : it->second);
          }
        }
        example::ExampleEncoder encoder(&record);
        if (!ids.empty()) encoder.AddInt64s("categorical", ids);
        if (enc.label.has_value()) {
          const Cell& y = cells[*enc.label];
          if (model.classifier()) {
            auto it = enc.class_index.find(CellText(y));
            if (y.kind == Cell::Kind::kNull || it == enc.class_index.end()) {
              return absl::AbortedError(StrCat("row ", row, ": the label '", CellText(y),
                                               "' was not there when the query was first read: "
                                               "the data changed; run it again"));
            }
            encoder.AddInt64("label", it->second);
          } else {
            if (!IsNumber(y)) {
              return absl::AbortedError(StrCat("row ", row, ": the label '", CellText(y),
                                               "' is not a number, though it was when the query "
                                               "was first read: the data changed; run it again"));
            }
            encoder.AddFloat("label", static_cast<float>(CellNumber(y)));
          }
        }
        if (!numbers.empty()) encoder.AddFloats("numeric", numbers);
        encoder.Finish();
        EDL_RETURN_IF_ERROR(records->Write(record));
        if (!training) {
          for (size_t i = 0; i < cells.size(); ++i) {
            result.columns[i].type = Widen(result.columns[i].type, cells[i]);
          }
          AppendRow(cells, &row_bytes);
          EDL_RETURN_IF_ERROR(rows->Write(row_bytes));
        }
        return absl::OkStatus();
      });
  if (status.ok() && row == 0) status = absl::InvalidArgumentError("the query returned no rows");
  if (status.ok()) status = records->Close();
  if (status.ok() && !training) status = rows->Close();
  if (!status.ok()) {
    records.reset();
    rows.reset();
    remove_outputs();
    return in_query(status);
  }
  for (ColumnInfo& c : result.columns) {
    if (c.type == ColumnType::kUnknown) c.type = ColumnType::kText;
  }
  result.records = row;
  return result;
}

}  // namespace elasticdl::sql
