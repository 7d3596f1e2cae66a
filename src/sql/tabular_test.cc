#include "sql/tabular.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/crc.h"
#include "common/file.h"
#include "data/example_wire.h"
#include "elasticdl/data/record_file.h"
#include "sql/database.h"
#include "testing/sql_script.h"
#include "testing/temp_dir.h"

namespace elasticdl::sql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TabularTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.File("data.db");
    std::ofstream(path).flush();
    auto db = Database::Open("sqlite://" + path);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    ASSERT_TRUE(testing::ExecuteScript(db_.get(), R"sql(
      CREATE TABLE t (age INTEGER, score, role TEXT, city TEXT, grade, pay REAL);
      INSERT INTO t VALUES (30, 1.5, 'eng', 'a', 'B', 10);
      INSERT INTO t VALUES (40, NULL, 'ops', 'b', 'A', 20);
      INSERT INTO t VALUES (NULL, 2.5, NULL, 'c', 'B', 30);
      INSERT INTO t VALUES (50, 3, 'eng', 'd', 'C', 40);
    )sql")
                    .ok());
  }

  const PrebuiltModel& Model(const std::string& name) {
    auto m = FindPrebuiltModel(name);
    EXPECT_TRUE(m.ok()) << m.status();
    return **m;
  }

  // Every record of `path`, decoded.
  static std::vector<std::vector<example::DecodedFeature>> Records(const std::string& path) {
    std::vector<std::vector<example::DecodedFeature>> out;
    auto file = RecordFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status();
    auto scan = (*file)->Scan(0, (*file)->num_records());
    while ((*scan)->Next()) {
      out.emplace_back();
      EXPECT_TRUE(example::DecodeAll((*scan)->record(), &out.back()).ok());
    }
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(TabularTest, ColumnsBecomeNumbersOrIdsFromTheirTypesAndValues) {
  TabularOptions options;
  options.max_vocabulary = 3;  // city has 4 values: hashed
  options.hash_buckets = 7;
  auto m = DeriveTabular(db_.get(), "SELECT * FROM t", {}, "pay", Model("regressor.DNN"), options);
  ASSERT_TRUE(m.ok()) << m.status();
  // Numbers first (declared INTEGER; untyped with numbers only), then text.
  ASSERT_EQ(m->columns_size(), 5);
  EXPECT_EQ(m->columns(0).name(), "age");
  EXPECT_TRUE(m->columns(0).numeric());
  EXPECT_DOUBLE_EQ(m->columns(0).mean(), 40);
  EXPECT_NEAR(m->columns(0).std(), std::sqrt(200.0 / 3), 1e-12);
  EXPECT_EQ(m->columns(1).name(), "score");
  EXPECT_TRUE(m->columns(1).numeric());
  EXPECT_EQ(m->columns(2).name(), "role");
  EXPECT_THAT(m->columns(2).vocabulary(), ElementsAre("eng", "ops"));
  EXPECT_EQ(m->columns(3).name(), "city");
  EXPECT_EQ(m->columns(3).hash_buckets(), 7);
  EXPECT_EQ(m->columns(4).name(), "grade");
  EXPECT_THAT(m->columns(4).vocabulary(), ElementsAre("A", "B", "C"));
  EXPECT_DOUBLE_EQ(m->label_mean(), 25);
  EXPECT_EQ(m->label_type(), "REAL");
  EXPECT_EQ(TabularParams(*m),
            "numeric_mean=[40, 2.3333333333333335], numeric_std=[8.16496580927726, "
            "0.6236095644623235], categorical_sizes=[3, 8, 4], label_mean=25, "
            "label_std=11.180339887498949");

  const std::string records = dir_.File("train.recordio");
  auto encoded = EncodeTabular(db_.get(), "SELECT * FROM t", *m, records, "");
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(encoded->records, 4u);
  auto rows = Records(records);
  ASSERT_EQ(rows.size(), 4u);
  // Keys in order: categorical, label, numeric.
  ASSERT_EQ(rows[2].size(), 3u);
  EXPECT_EQ(rows[2][0].key, "categorical");
  // NULL role: id 0; city 'c' hashed; grade B is the second word.
  const int64_t city = 1 + static_cast<int64_t>(crc::Crc32c("c") % 7);
  EXPECT_THAT(rows[2][0].int64s, ElementsAre(0, city, 2));
  EXPECT_THAT(rows[2][1].floats, ElementsAre(30));
  EXPECT_THAT(rows[2][2].floats, ElementsAre(40, 2.5));  // NULL age: the mean
  EXPECT_THAT(rows[1][2].floats, ElementsAre(40, static_cast<float>(7.0 / 3)));
}

// A database that counts the queries run on it.
class CountingDatabase final : public Database {
 public:
  explicit CountingDatabase(Database* db) : db_(db) {}
  Status Query(std::string_view select,
               const std::function<Status(const std::vector<ColumnInfo>&)>& columns,
               const std::function<Status(const std::vector<Cell>&)>& row) override {
    ++queries;
    return db_->Query(select, columns, row);
  }
  Status Execute(std::string_view statement) override { return db_->Execute(statement); }
  Status ExecuteForEach(std::string_view statement,
                        const std::function<StatusOr<bool>(std::vector<Cell>*)>& next) override {
    return db_->ExecuteForEach(statement, next);
  }
  std::string TypeName(ColumnType type) const override { return db_->TypeName(type); }
  std::string QuoteIdentifier(std::string_view name) const override {
    return db_->QuoteIdentifier(name);
  }
  Status CheckIdentifier(std::string_view name) const override {
    return db_->CheckIdentifier(name);
  }
  std::string Describe() const override { return db_->Describe(); }
  int queries = 0;

 private:
  Database* db_;
};

TEST_F(TabularTest, TrainingRunsTheQueryOnceAndEncodesWhatItRead) {
  CountingDatabase db(db_.get());
  QueryRecording recording;
  recording.rows_path = dir_.File("query.rows");
  auto m = DeriveTabular(&db, "SELECT * FROM t", {}, "pay", Model("regressor.DNN"), {}, &recording);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(recording.columns.size(), 6u);
  const std::string once = dir_.File("once.recordio");
  auto encoded = EncodeTabular(&db, "SELECT * FROM t", *m, once, "", &recording);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(db.queries, 1);
  EXPECT_EQ(encoded->records, 4u);
  // The same records as a second run of the query gives.
  const std::string twice = dir_.File("twice.recordio");
  ASSERT_TRUE(EncodeTabular(&db, "SELECT * FROM t", *m, twice, "").ok());
  EXPECT_EQ(db.queries, 2);
  EXPECT_EQ(*ReadFileToString(once), *ReadFileToString(twice));
  // A query that fails leaves no recording behind.
  QueryRecording failed;
  failed.rows_path = dir_.File("failed.rows");
  EXPECT_FALSE(
      DeriveTabular(&db, "SELECT * FROM t WHERE 0", {}, "pay", Model("regressor.DNN"), {}, &failed)
          .ok());
  EXPECT_FALSE(std::filesystem::exists(failed.rows_path));
}

TEST_F(TabularTest, AClassifiersLabelsAreTheirValuesSorted) {
  auto m = DeriveTabular(db_.get(), "SELECT age, grade FROM t", {}, "grade",
                         Model("classifier.Linear"), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->classes(), ElementsAre("A", "B", "C"));
  EXPECT_EQ(m->label_type(), "TEXT");
  EXPECT_THAT(TabularParams(*m), HasSubstr("num_classes=3"));
  const std::string records = dir_.File("c.recordio");
  ASSERT_TRUE(EncodeTabular(db_.get(), "SELECT age, grade FROM t", *m, records, "").ok());
  auto rows = Records(records);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][0].key, "label");
  EXPECT_THAT(rows[0][0].int64s, ElementsAre(1));
  EXPECT_THAT(rows[1][0].int64s, ElementsAre(0));
  EXPECT_THAT(rows[3][0].int64s, ElementsAre(2));
}

TEST_F(TabularTest, BadColumnsAndLabelsAreNamed) {
  const auto error = [&](const std::string& select, const std::string& label,
                         const std::string& model, std::vector<std::string> columns = {}) {
    auto m = DeriveTabular(db_.get(), select, columns, label, Model(model), {});
    EXPECT_FALSE(m.ok());
    return std::string(m.status().message());
  };
  ASSERT_TRUE(
      testing::ExecuteScript(db_.get(),
                             "CREATE TABLE mixed (x REAL, y); INSERT INTO mixed VALUES (1, 'a'), "
                             "(2, 3), (3, NULL); CREATE TABLE bad (x INTEGER, y REAL); "
                             "INSERT INTO bad VALUES (1, 1), ('two', 2);")
          .ok());
  EXPECT_THAT(error("SELECT * FROM t", "", "regressor.DNN"), HasSubstr("needs LABEL <column>"));
  EXPECT_THAT(error("SELECT * FROM t", "salary", "regressor.DNN"),
              HasSubstr("LABEL 'salary' is not a column of the query; it selects age, score, "
                        "role, city, grade, pay"));
  EXPECT_THAT(error("SELECT * FROM t", "pay", "regressor.DNN", {"pay"}),
              HasSubstr("COLUMN 'pay' is the label"));
  EXPECT_THAT(error("SELECT * FROM t", "role", "regressor.Linear"),
              HasSubstr("row 1: the label 'role' holds 'eng'; regressor.Linear predicts numbers"));
  EXPECT_THAT(error("SELECT * FROM t", "role", "classifier.DNN"),
              HasSubstr("row 3: the label 'role' is NULL"));
  EXPECT_THAT(error("SELECT * FROM t", "score", "classifier.DNN"),
              HasSubstr("row 1: the label 'score' holds 1.5"));
  EXPECT_THAT(error("SELECT x, y FROM mixed WHERE y IS NOT NULL", "y", "classifier.DNN"),
              HasSubstr("the label 'y' mixes types: row 2 holds a number and row 1 text"));
  EXPECT_THAT(error("SELECT * FROM bad", "y", "regressor.DNN"),
              HasSubstr("row 2, column 'x': 'two' is not a number as the column's type says"));
  EXPECT_THAT(error("SELECT * FROM t WHERE 0", "pay", "regressor.DNN"),
              HasSubstr("the query returned no rows"));
  EXPECT_THAT(error("SELECT grade, grade FROM t", "grade", "classifier.DNN"),
              HasSubstr("two columns named 'grade'"));
  EXPECT_THAT(error("SELECT NULL AS n, pay FROM t", "pay", "regressor.DNN"),
              HasSubstr("column 'n' is NULL in every row"));
  EXPECT_THAT(std::string(FindPrebuiltModel("regressor.Tree").status().message()),
              HasSubstr("unknown model 'regressor.Tree': the models are regressor.DNN"));
}

TEST_F(TabularTest, PredictionKeepsTheSelectedRowsAndNeedsTheModelsColumns) {
  auto m = DeriveTabular(db_.get(), "SELECT age, role, pay FROM t", {}, "pay",
                         Model("regressor.DNN"), {});
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string records = dir_.File("p.recordio"), rows = dir_.File("rows.recordio");
  auto encoded =
      EncodeTabular(db_.get(), "SELECT city, role, age, score FROM t", *m, records, rows);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  ASSERT_EQ(encoded->columns.size(), 4u);
  EXPECT_EQ(encoded->columns[0].type, ColumnType::kText);
  EXPECT_EQ(encoded->columns[2].type, ColumnType::kInteger);
  EXPECT_EQ(encoded->columns[3].type, ColumnType::kReal);  // untyped, 1.5 and 3
  auto file = RecordFile::Open(rows);
  ASSERT_TRUE(file.ok());
  auto scan = (*file)->Scan(0, (*file)->num_records());
  std::vector<std::vector<Cell>> read;
  while ((*scan)->Next()) {
    std::vector<Cell> cells;
    ASSERT_TRUE(ParseSelectedRow((*scan)->record(), &cells).ok());
    ASSERT_EQ(cells.size(), 4u);
    if (read.size() == 2) {
      EXPECT_EQ(cells[0].text, "c");
      EXPECT_EQ(cells[1].kind, Cell::Kind::kNull);
      EXPECT_EQ(cells[2].kind, Cell::Kind::kNull);
      EXPECT_EQ(cells[3].real, 2.5);
    }
    read.push_back(cells);
  }
  EXPECT_EQ(read.size(), 4u);
  EXPECT_EQ(Records(records)[0].size(), 2u);  // no label

  auto missing = EncodeTabular(db_.get(), "SELECT city, age FROM t", *m, records, rows);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("the model's input 'role' is not a column of the query; it selects "
                        "city, age"));
  EXPECT_FALSE(std::filesystem::exists(records));
  EXPECT_FALSE(std::filesystem::exists(rows));
  auto text = EncodeTabular(db_.get(), "SELECT role, city AS age FROM t", *m, records, rows);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("row 1, column 'age': 'a' is not a number"));
}

TEST_F(TabularTest, RowsAreInsertedWithBlobsAsTheyAre) {
  ASSERT_TRUE(db_->Execute("CREATE TABLE files (name TEXT, part INTEGER, content BLOB)").ok());
  const std::string bytes("a\0b\xff", 4);
  int n = 0;
  ASSERT_TRUE(db_->ExecuteForEach("INSERT INTO files VALUES ($1, $2, $3)",
                                  [&](std::vector<Cell>* cells) -> StatusOr<bool> {
                                    if (n == 2) return false;
                                    Cell name{Cell::Kind::kText}, part{Cell::Kind::kInteger},
                                        content{Cell::Kind::kBlob};
                                    name.text = "f";
                                    part.integer = n++;
                                    content.text = bytes;
                                    *cells = {name, part, content};
                                    return true;
                                  })
                  .ok());
  std::vector<std::string> contents;
  ASSERT_TRUE(db_->Query(
                     "SELECT content FROM files ORDER BY part",
                     [](const std::vector<ColumnInfo>&) { return absl::OkStatus(); },
                     [&](const std::vector<Cell>& cells) {
                       contents.emplace_back(cells[0].text);
                       return absl::OkStatus();
                     })
                  .ok());
  EXPECT_THAT(contents, ElementsAre(bytes, bytes));
  auto bad = db_->ExecuteForEach("INSERT INTO nowhere VALUES ($1)",
                                 [](std::vector<Cell>*) -> StatusOr<bool> { return false; });
  EXPECT_THAT(std::string(bad.message()), HasSubstr("no such table: nowhere"));
  EXPECT_EQ(db_->TypeName(ColumnType::kBlob), "BLOB");
}

}  // namespace
}  // namespace elasticdl::sql
