// A query's rows as the inputs of the models SQL users train without a
// model zoo (share/sql_models: regressor.DNN, classifier.Linear, ...).
//
// DeriveTabular runs the training query once (recording its rows) and decides, from the column
// types the database reports and else from the values, how each column
// enters the model: numbers standardized (NULL as the mean), text as ids
// from a vocabulary built from the data or, past max_vocabulary distinct
// values, from hash buckets. A classifier's label classes are the label's
// distinct values; a regressor's label is standardized inside the model.
// EncodeTabular then writes one record per row in the layout
// share/sql_models/tabular.h reads, for training (with the label, from the
// recorded rows: the user's query runs once) or for prediction (the rows' own
// values kept beside, for the result table).
#ifndef ELASTICDL_SQL_TABULAR_H_
#define ELASTICDL_SQL_TABULAR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "sql/database.h"

namespace elasticdl::sql {

// A model SQL users name after TRAIN.
struct PrebuiltModel {
  const char* name;  // "regressor.DNN"
  bool classifier;
  // The WITH keys it takes, beside the feature handling's and the job's.
  std::vector<std::string> params;
};

// NOT_FOUND naming the models there are.
StatusOr<const PrebuiltModel*> FindPrebuiltModel(std::string_view name);

struct TabularOptions {
  // A text column with more distinct values is hashed into hash_buckets.
  int64_t max_vocabulary = 1000;
  int64_t hash_buckets = 1000;
};

// A query's result as read once: its columns, and its rows in a RecordIO file
// (one record per row, ParseSelectedRow), read again by EncodeTabular
// instead of running the query again.
struct QueryRecording {
  std::string rows_path;
  std::vector<ColumnInfo> columns;
};

// Runs `select` once; with `recording`, its rows go to
// recording->rows_path (removed on error). `features` are the COLUMN clause's names (empty:
// every selected column but the label). Errors name the column and, where
// one row is at fault, the row (from 1): a column that is not selected, a
// label with NULLs, text in a regressor's label, a label mixing numbers and
// text, a numeric column holding text, an empty result.
StatusOr<proto::SqlModel> DeriveTabular(Database* db, std::string_view select,
                                        const std::vector<std::string>& features,
                                        const std::string& label, const PrebuiltModel& model,
                                        const TabularOptions& options,
                                        QueryRecording* recording = nullptr);

// The --params of the model derived from the data: numeric_mean,
// numeric_std, categorical_sizes and label_mean/label_std or num_classes.
std::string TabularParams(const proto::SqlModel& model);

struct EncodeResult {
  uint64_t records = 0;
  // Prediction: the selected columns, typed by their values where the
  // database did not say (kText where a column holds no value at all).
  std::vector<ColumnInfo> columns;
};

// Runs `select` (or reads `recorded` back, when given) and writes a RecordIO
// file of one record per row to `records_path`. With `rows_path` (prediction), the query need not
// have the label, and each row's selected values go to `rows_path`, a RecordIO file of one record
// per row (ParseSelectedRow). Nothing is left at either path on error.
StatusOr<EncodeResult> EncodeTabular(Database* db, std::string_view select,
                                     const proto::SqlModel& model, const std::string& records_path,
                                     const std::string& rows_path,
                                     const QueryRecording* recorded = nullptr);

// One record of `rows_path` as the row's cells, which view into `record`.
Status ParseSelectedRow(std::string_view record, std::vector<Cell>* cells);

}  // namespace elasticdl::sql

#endif  // ELASTICDL_SQL_TABULAR_H_
