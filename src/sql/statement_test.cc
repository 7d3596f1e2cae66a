#include "sql/statement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace elasticdl::sql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Statement Parse(std::string_view text) {
  StatusOr<Statement> statement = ParseStatement(text);
  EXPECT_TRUE(statement.ok()) << statement.status();
  return statement.ok() ? *statement : Statement{};
}

std::string Error(std::string_view text) {
  StatusOr<Statement> statement = ParseStatement(text);
  EXPECT_FALSE(statement.ok()) << "parsed: " << text;
  if (statement.ok()) return "";
  EXPECT_EQ(statement.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(statement.status().message());
}

TEST(ParseStatementTest, TheSeedsTrainStatement) {
  const Statement s = Parse(
      "SELECT name, role, salary FROM employee "
      "TRAIN regressor.DNN WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01 "
      "LABEL salary INTO my_trained_model;");
  EXPECT_EQ(s.kind, Statement::Kind::kTrain);
  EXPECT_EQ(s.select, "SELECT name, role, salary FROM employee");
  EXPECT_EQ(s.train.model, "regressor.DNN");
  ASSERT_EQ(s.train.attributes.size(), 2u);
  EXPECT_EQ(s.train.attributes[0].key, "hidden_units");
  const Value& units = s.train.attributes[0].value;
  ASSERT_EQ(units.kind, Value::Kind::kList);
  ASSERT_EQ(units.items.size(), 4u);
  EXPECT_EQ(units.items[1].kind, Value::Kind::kInt);
  EXPECT_EQ(units.items[1].text, "100");
  EXPECT_EQ(units.ToString(), "[10, 100, 20, 5]");
  EXPECT_EQ(s.train.attributes[1].key, "learning_rate");
  EXPECT_EQ(s.train.attributes[1].value.kind, Value::Kind::kFloat);
  EXPECT_EQ(s.train.attributes[1].value.text, "0.01");
  EXPECT_TRUE(s.train.columns.empty());
  EXPECT_EQ(s.train.label, "salary");
  EXPECT_EQ(s.train.into, "my_trained_model");
}

TEST(ParseStatementTest, TheSeedsPredictStatement) {
  const Statement s = Parse(
      "SELECT name, role FROM testdata PREDICT testdata.predicted_salary USING my_trained_model;");
  EXPECT_EQ(s.kind, Statement::Kind::kPredict);
  EXPECT_EQ(s.select, "SELECT name, role FROM testdata");
  EXPECT_EQ(s.predict.table, "testdata");
  EXPECT_EQ(s.predict.column, "predicted_salary");
  EXPECT_EQ(s.predict.model, "my_trained_model");
  EXPECT_TRUE(s.predict.attributes.empty());
}

TEST(ParseStatementTest, ColumnsJobFlagsValuesAndCase) {
  const Statement s = Parse(
      "select * from db.iris\n"
      "  train classifier.DNN\n"
      "  with train.num_workers = 2, n_classes=3, optimizer = 'adam', use_bias=true,\n"
      "       scale=-1.5e-3, names=['a', \"b\", 'it''s'], nested=[[1, 2], []]\n"
      "  column sepal_length, sepal_width\n"
      "  label class\n"
      "  into models.iris_dnn");
  EXPECT_EQ(s.select, "select * from db.iris");
  EXPECT_EQ(s.train.model, "classifier.DNN");
  ASSERT_EQ(s.train.attributes.size(), 7u);
  EXPECT_EQ(s.train.attributes[0].key, "train.num_workers");
  EXPECT_EQ(s.train.attributes[0].value.text, "2");
  EXPECT_EQ(s.train.attributes[2].value.kind, Value::Kind::kString);
  EXPECT_EQ(s.train.attributes[2].value.text, "adam");
  EXPECT_EQ(s.train.attributes[3].value.kind, Value::Kind::kName);
  EXPECT_EQ(s.train.attributes[3].value.text, "true");
  EXPECT_EQ(s.train.attributes[4].value.kind, Value::Kind::kFloat);
  EXPECT_EQ(s.train.attributes[4].value.text, "-1.5e-3");
  EXPECT_EQ(s.train.attributes[5].value.ToString(), "['a', 'b', 'it''s']");
  EXPECT_EQ(s.train.attributes[5].value.items[2].text, "it's");
  EXPECT_EQ(s.train.attributes[6].value.ToString(), "[[1, 2], []]");
  EXPECT_THAT(s.train.columns, ElementsAre("sepal_length", "sepal_width"));
  EXPECT_EQ(s.train.label, "class");
  EXPECT_EQ(s.train.into, "models.iris_dnn");
}

TEST(ParseStatementTest, KeywordsInsideTheSelectAreTheSelects) {
  // A column named train, a string and a comment that say PREDICT, a
  // subquery with a TRAIN in it: the clause is the one that parses.
  const Statement s = Parse(
      "SELECT train, 'x PREDICT y' AS p /* TRAIN a INTO b */ -- PREDICT t.c USING m\n"
      "FROM (SELECT 1 AS train) AS t WHERE t.train > 0 "
      "TRAIN regressor.Linear LABEL train INTO m");
  EXPECT_EQ(s.kind, Statement::Kind::kTrain);
  EXPECT_EQ(s.train.model, "regressor.Linear");
  EXPECT_EQ(s.train.label, "train");
  EXPECT_EQ(s.select,
            "SELECT train, 'x PREDICT y' AS p /* TRAIN a INTO b */ -- PREDICT t.c USING m\n"
            "FROM (SELECT 1 AS train) AS t WHERE t.train > 0");
}

TEST(ParseStatementTest, ClauseWordsMayNameColumns) {
  const Statement s =
      Parse("SELECT label, into FROM t TRAIN DNN COLUMN into LABEL label INTO into");
  EXPECT_THAT(s.train.columns, ElementsAre("into"));
  EXPECT_EQ(s.train.label, "label");
  EXPECT_EQ(s.train.into, "into");
}

TEST(ParseStatementTest, PredictTakesWithBeforeUsing) {
  const Statement s = Parse("SELECT a FROM t PREDICT out.y WITH predict.batch=64 USING m");
  ASSERT_EQ(s.predict.attributes.size(), 1u);
  EXPECT_EQ(s.predict.attributes[0].key, "predict.batch");
  EXPECT_EQ(s.predict.model, "m");
}

TEST(ParseStatementTest, SyntaxErrorsSayWhereAndWhat) {
  EXPECT_THAT(Error(""), HasSubstr("the statement is empty"));
  EXPECT_THAT(Error("TRAIN x INTO y"), HasSubstr("expected a SELECT statement, found 'TRAIN'"));
  EXPECT_THAT(Error("SELECT a FROM t"),
              HasSubstr("expected TRAIN or PREDICT after the SELECT statement, at line 1, "
                        "column 16"));
  // The caret sits under the problem, on its own line.
  const std::string missing_into = Error("SELECT a FROM t\nTRAIN DNN WITH x=1\nLABEL a INTO");
  EXPECT_THAT(missing_into, HasSubstr("expected the trained model's name after INTO, found the "
                                      "end of the statement, at line 3, column 13"));
  EXPECT_THAT(missing_into, HasSubstr("\n  LABEL a INTO\n              ^"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN WITH x=1 y=2 INTO m"),
              HasSubstr("expected LABEL or INTO, found 'y', at line 1, column 36"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN WITH x= INTO m"),
              HasSubstr("expected a value (a number, a 'string', a name or a [list]), found "
                        "'INTO', at line 1, column 35"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN WITH x=[1, 2 INTO m"),
              HasSubstr("expected ',' or ']' in the list, found 'INTO'"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN WITH x=1, x=2 INTO m"),
              HasSubstr("attribute 'x' is given twice, at line 1, column 37"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN INTO m extra"),
              HasSubstr("expected the end of the statement, found 'extra'"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN LABEL a COLUMN b INTO m"),
              HasSubstr("expected INTO, found 'COLUMN'"));
  EXPECT_THAT(Error("SELECT a FROM t PREDICT y USING m"),
              HasSubstr("PREDICT takes table.column (the result table and its column of "
                        "predictions), found 'y', at line 1, column 25"));
  EXPECT_THAT(Error("SELECT a FROM t PREDICT t.y m"),
              HasSubstr("expected WITH or USING, found 'm'"));
  EXPECT_THAT(Error("SELECT 'a FROM t TRAIN DNN INTO m"),
              HasSubstr("unterminated string, at line 1, column 8"));
  EXPECT_THAT(Error("SELECT a /* FROM t TRAIN DNN INTO m"), HasSubstr("unterminated comment"));
  EXPECT_THAT(Error("SELECT a FROM t TRAIN DNN WITH x=12ab INTO m"),
              HasSubstr("a number runs into a name, at line 1, column 34"));
}

TEST(ParseStatementTest, DeepListsAreRefusedNotRecursedInto) {
  const std::string deep = "SELECT a FROM t TRAIN DNN WITH x=" + std::string(10000, '[') + "INTO m";
  EXPECT_THAT(Error(deep), HasSubstr("lists nested too deep"));
}

}  // namespace
}  // namespace elasticdl::sql
