// The extended SQL of SQL users (seed 003): a standard SELECT, run by the
// database as written, followed by what ElasticDL does with its rows.
//
//   SELECT name, role, salary FROM employee
//   TRAIN regressor.DNN WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01
//   COLUMN name, role LABEL salary
//   INTO my_trained_model;
//
//   SELECT name, role FROM testdata
//   PREDICT testdata.predicted_salary USING my_trained_model;
//
// Clauses come in that order; WITH, COLUMN and LABEL are optional, and so is
// the final semicolon. In PREDICT, WITH goes before USING. Keywords are
// case-insensitive. A WITH value is a number, a string ('...' or "..."), a
// name (true, false, a dotted name) or a list of values in [...].
//
// ParseStatement finds the TRAIN or PREDICT clause outside strings,
// comments and parentheses; a column named like the keyword in the SELECT
// does not confuse it, since the clause must parse to the end. A syntax
// error says where, as line and column, and shows the line with a caret.
#ifndef ELASTICDL_SQL_STATEMENT_H_
#define ELASTICDL_SQL_STATEMENT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::sql {

struct Value {
  enum class Kind { kInt, kFloat, kString, kName, kList };
  Kind kind = Kind::kName;
  // Numbers and names as written; strings without their quotes.
  std::string text;
  // The items of a list.
  std::vector<Value> items;
  // Byte offset in the statement.
  size_t position = 0;

  // The value as it would be written: strings quoted, lists in brackets.
  std::string ToString() const;
};

struct Attribute {
  // A dotted name, as written: "hidden_units", "train.num_workers".
  std::string key;
  Value value;
  size_t position = 0;
};

struct TrainClause {
  // The model's name, "regressor.DNN".
  std::string model;
  std::vector<Attribute> attributes;
  // COLUMN: the feature columns; empty: every selected column but the label.
  std::vector<std::string> columns;
  // LABEL: the label column; empty when not given.
  std::string label;
  // INTO: the name the trained model is saved under.
  std::string into;
};

struct PredictClause {
  // PREDICT table.column: the result table and its column of predictions.
  std::string table;
  std::string column;
  std::vector<Attribute> attributes;
  // USING: the trained model's name.
  std::string model;
};

struct Statement {
  enum class Kind { kTrain, kPredict };
  Kind kind = Kind::kTrain;
  // The standard SQL before the clause, as written (trailing blanks removed).
  std::string select;
  TrainClause train;      // kTrain
  PredictClause predict;  // kPredict
};

// INVALID_ARGUMENT for a syntax error, naming its line and column.
StatusOr<Statement> ParseStatement(std::string_view text);

}  // namespace elasticdl::sql

#endif  // ELASTICDL_SQL_STATEMENT_H_
