// Fuzzes the SQL statement parser (sql/statement.h): the TRAIN / PREDICT
// clause found outside strings and comments, its model name, WITH
// attributes, COLUMN and LABEL, INTO.
//
// Input: statement text. Parsing either fails with INVALID_ARGUMENT or gives
// a statement whose SELECT is part of the text, with a model (TRAIN) or a
// table (PREDICT) named and every attribute keyed inside the text.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "seed_mode.h"
#include "sql/statement.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "train",
                                "SELECT x1, x2, species FROM flowers TRAIN classifier.Linear "
                                "WITH hidden_units=[10, 20], learning_rate=0.01 COLUMN x1, x2 "
                                "LABEL species INTO my_model;"));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "predict",
                                "SELECT * FROM \"my table\" -- a comment TRAIN\n"
                                "PREDICT \"my preds\".\"the class\" USING \"m; DROP TABLE x\";"));
  return WriteSeed(dir, "strings",
                   "SELECT 'TRAIN ''x''' AS a, /* PREDICT */ b FROM t TRAIN regressor.DNN "
                   "WITH train.num_workers=2, model.hidden_units=[32,16] LABEL b INTO \"a\"\"b\"");
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  const std::string text(reinterpret_cast<const char*>(data), size);
  StatusOr<sql::Statement> statement = sql::ParseStatement(text);
  if (!statement.ok()) {
    EDL_FUZZ_CHECK(statement.status().code() == StatusCode::kInvalidArgument,
                   "ParseStatement: unexpected status {}", statement.status().ToString());
    return 0;
  }
  EDL_FUZZ_CHECK(text.find(statement->select) != std::string::npos,
                 "the SELECT '{}' is not part of the text", statement->select);
  const auto& attributes = statement->kind == sql::Statement::Kind::kTrain
                               ? statement->train.attributes
                               : statement->predict.attributes;
  for (const sql::Attribute& a : attributes) {
    EDL_FUZZ_CHECK(!a.key.empty() && a.position < text.size(), "attribute at {} of {} bytes",
                   a.position, text.size());
    (void)a.value.ToString();
  }
  if (statement->kind == sql::Statement::Kind::kTrain) {
    EDL_FUZZ_CHECK(!statement->train.model.empty(), "TRAIN without a model was accepted");
  } else {
    EDL_FUZZ_CHECK(!statement->predict.table.empty(), "PREDICT without a table was accepted");
  }
  return 0;
}
