#include "sql/query_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/data/record_file.h"
#include "sql/database.h"
#include "testing/sql_script.h"
#include "testing/temp_dir.h"

namespace elasticdl::sql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every record of the files, decoded.
std::vector<std::vector<example::DecodedFeature>> ReadAll(const std::vector<std::string>& paths) {
  std::vector<std::vector<example::DecodedFeature>> rows;
  for (const std::string& path : paths) {
    auto file = RecordFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return rows;
    auto scan = (*file)->Scan(0, (*file)->num_records());
    EXPECT_TRUE(scan.ok()) << scan.status();
    while ((*scan)->Next()) {
      rows.emplace_back();
      EXPECT_TRUE(example::DecodeAll((*scan)->record(), &rows.back()).ok());
    }
    EXPECT_TRUE((*scan)->status().ok()) << (*scan)->status();
  }
  return rows;
}

const example::DecodedFeature* Find(const std::vector<example::DecodedFeature>& row,
                                    const std::string& key) {
  for (const auto& f : row) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

class QueryExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("data.db");
    std::ofstream(path_).flush();  // an empty file is an empty SQLite database
    auto db = Database::Open("sqlite://" + path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    ASSERT_TRUE(testing::ExecuteScript(db_.get(), R"sql(
      CREATE TABLE employee (name TEXT, role VARCHAR(20), age INTEGER, salary REAL, note BLOB);
      INSERT INTO employee VALUES ('ann', 'eng', 31, 100.5, NULL);
      INSERT INTO employee VALUES ('bob', 'ops', 45, 80, 'x');
      INSERT INTO employee VALUES ('cy', NULL, 28, 95.25, 7);
    )sql")
                    .ok());
  }

  QueryExportOptions Options(uint64_t per_shard = 0) {
    QueryExportOptions options;
    options.output_dir = dir_.File("out");
    options.records_per_shard = per_shard;
    return options;
  }

  std::string Error(const std::string& select) {
    auto result = ExportQuery(db_.get(), select, Options());
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(std::filesystem::exists(dir_.File("out/data.recordio")));
    EXPECT_FALSE(std::filesystem::exists(dir_.File("out/data.recordio.partial")));
    return result.ok() ? "" : std::string(result.status().message());
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<Database> db_;
};

TEST_F(QueryExportTest, DeclaredColumnsInOnePass) {
  auto result = ExportQuery(db_.get(), "SELECT name, role, age, salary FROM employee", Options());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->records, 3u);
  EXPECT_EQ(result->passes, 1);
  ASSERT_EQ(result->columns.size(), 4u);
  EXPECT_EQ(result->columns[0].kind, example::Kind::kBytes);
  EXPECT_EQ(result->columns[1].kind, example::Kind::kBytes);
  EXPECT_EQ(result->columns[1].nulls, 1u);
  EXPECT_EQ(result->columns[2].kind, example::Kind::kInt64);
  EXPECT_EQ(result->columns[3].kind, example::Kind::kFloat);
  const auto rows = ReadAll(result->outputs);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(Find(rows[0], "name")->bytes, ElementsAre("ann"));
  EXPECT_THAT(Find(rows[1], "age")->int64s, ElementsAre(45));
  // 80 stored in a REAL column is a float.
  EXPECT_THAT(Find(rows[1], "salary")->floats, ElementsAre(80.0f));
  EXPECT_THAT(Find(rows[2], "salary")->floats, ElementsAre(95.25f));
  // NULL: the feature is left out.
  EXPECT_EQ(Find(rows[2], "role"), nullptr);
}

TEST_F(QueryExportTest, UndeclaredColumnsAreInferredFromTheirValuesInAFirstPass) {
  auto result = ExportQuery(db_.get(),
                            "SELECT age * 2 AS twice, age / 2.0 AS half, note, "
                            "CASE WHEN age > 30 THEN 1 ELSE 0.5 END AS mixed FROM employee",
                            Options());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->passes, 2);
  EXPECT_EQ(result->columns[0].kind, example::Kind::kInt64);
  EXPECT_EQ(result->columns[1].kind, example::Kind::kFloat);
  EXPECT_EQ(result->columns[2].kind, example::Kind::kBytes);  // 'x' and 7
  EXPECT_EQ(result->columns[3].kind, example::Kind::kFloat);  // 1 and 0.5
  const auto rows = ReadAll(result->outputs);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(Find(rows[0], "twice")->int64s, ElementsAre(62));
  EXPECT_THAT(Find(rows[2], "note")->bytes, ElementsAre("7"));
  EXPECT_THAT(Find(rows[0], "mixed")->floats, ElementsAre(1.0f));
  EXPECT_THAT(Find(rows[2], "mixed")->floats, ElementsAre(0.5f));
}

TEST_F(QueryExportTest, ShardsOfAGivenSize) {
  auto result = ExportQuery(db_.get(), "SELECT name, age FROM employee ORDER BY age", Options(2));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->outputs, ElementsAre(dir_.File("out/data-00000-of-00002.recordio"),
                                           dir_.File("out/data-00001-of-00002.recordio")));
  const auto rows = ReadAll(result->outputs);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(Find(rows[0], "name")->bytes, ElementsAre("cy"));
  EXPECT_THAT(Find(rows[2], "name")->bytes, ElementsAre("bob"));
}

TEST_F(QueryExportTest, BadQueriesAndValuesAreClearErrorsAndLeaveNothing) {
  EXPECT_THAT(Error("SELECT name FROM employee WHERE age > 99"),
              HasSubstr("the query returned no rows"));
  EXPECT_THAT(Error("SELECT name, age AS name FROM employee"),
              HasSubstr("two columns named 'name'"));
  EXPECT_THAT(Error("SELECT nme FROM employee"), HasSubstr("no such column: nme"));
  EXPECT_THAT(Error("SELECT name FROM employe"), HasSubstr("no such table: employe"));
  EXPECT_THAT(Error("DELETE FROM employee"), HasSubstr("not a query"));
  EXPECT_THAT(Error("SELECT name FROM employee; DROP TABLE employee"),
              HasSubstr("one statement expected"));
  // SQLite keeps what it is given: text in an INTEGER column.
  ASSERT_TRUE(db_->Execute("INSERT INTO employee VALUES ('dee', 'eng', 'forty', 70, NULL)").ok());
  EXPECT_THAT(Error("SELECT name, age FROM employee"),
              HasSubstr("row 4, column 'age': 'forty' is not an integer"));
  // Nothing was changed by the refused statements.
  auto count = ExportQuery(db_.get(), "SELECT name FROM employee", Options());
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(count->records, 4u);
}

TEST_F(QueryExportTest, NamesAreQuotedAndOneStatementRunsAtATime) {
  auto rows = [this](const std::string& select) {
    int n = 0;
    Status s = db_->Query(
        select, [](const std::vector<ColumnInfo>&) { return absl::OkStatus(); },
        [&n](const std::vector<Cell>&) {
          ++n;
          return absl::OkStatus();
        });
    return s.ok() ? n : -1;
  };
  // A name is a name, whatever it holds.
  for (const std::string name : {"my model", "m; DROP TABLE employee", "a\"b", "x\" --"}) {
    const std::string table = db_->QuoteIdentifier(name);
    ASSERT_TRUE(
        db_->Execute(StrCat("CREATE TABLE ", table, " (", db_->QuoteIdentifier("v w"), " INTEGER)"))
            .ok())
        << table;
    ASSERT_TRUE(db_->Execute(StrCat("INSERT INTO ", table, " VALUES (1)")).ok()) << table;
    EXPECT_EQ(rows(StrCat("SELECT * FROM ", table)), 1) << table;
  }
  EXPECT_EQ(db_->QuoteIdentifier("a\"b"), "\"a\"\"b\"");
  // Execute and Query run one statement, and refuse text holding a second.
  Status two = db_->Execute(
      "INSERT INTO employee VALUES ('eve', 'eng', 1, 1, NULL); DROP TABLE "
      "employee");
  EXPECT_THAT(std::string(two.message()), HasSubstr("one statement expected")) << two;
  EXPECT_EQ(rows("SELECT * FROM employee"), 3);
  EXPECT_EQ(rows("SELECT 1; DELETE FROM employee"), -1);
  EXPECT_EQ(rows("WITH d AS (SELECT 1) DELETE FROM employee"), -1);
  EXPECT_EQ(rows("SELECT * FROM employee"), 3);
}

TEST(DatabaseOpenTest, UnknownSchemesMissingFilesAndRefusedServersAreClear) {
  EXPECT_THAT(std::string(Database::Open("mysql://x/y").status().message()),
              HasSubstr("expected sqlite:///path/to.db or postgresql://user@host:port/db"));
  EXPECT_THAT(std::string(Database::Open("sqlite:///nonexistent/x.db").status().message()),
              HasSubstr("no SQLite database at /nonexistent/x.db"));
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  auto refused = Database::Open("postgresql://someone:secret@127.0.0.1:1/db?connect_timeout=5");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr("cannot connect to PostgreSQL at postgresql://someone:***@"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("secret")));
}

}  // namespace
}  // namespace elasticdl::sql
