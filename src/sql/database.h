// The databases SQL users keep their data in: SQLite (embedded; the default
// for trying things) and PostgreSQL (a server, through libpq).
//
//   sqlite:///abs/path/to.db        sqlite://relative/path.db
//   postgresql://user@host:port/db  (any connection URI libpq takes)
//
// A query's rows are streamed to a callback, never held whole: PostgreSQL in
// libpq's single-row mode, SQLite step by step.
#ifndef ELASTICDL_SQL_DATABASE_H_
#define ELASTICDL_SQL_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::sql {

// What the database says a column holds; kUnknown where it does not say
// (SQLite expressions, columns declared without a type); PostgreSQL's bytea
// is kBlob, its cells kText holding the bytes.
enum class ColumnType { kUnknown, kInteger, kReal, kText, kBlob };

struct ColumnInfo {
  std::string name;
  ColumnType type = ColumnType::kUnknown;
  // The database's own name of the type ("INTEGER", "varchar"); may be empty.
  std::string declared;
};

// One value of a row, valid during the callback that gets it.
struct Cell {
  // kBlob only in what is written (Insert): bytes stored as a blob / bytea.
  // Queries give blobs as kText.
  enum class Kind { kNull, kInteger, kReal, kText, kBlob };
  Kind kind = Kind::kNull;
  int64_t integer = 0;
  double real = 0;
  // kText: the text (or blob bytes). Also set for numbers from PostgreSQL
  // (their text form).
  std::string_view text;
};

// `url` with any password in it (postgresql://user:PASSWORD@..., a
// password=PASSWORD setting) replaced by "***": what messages show.
std::string RedactedUrl(const std::string& url);

// The longest name, in bytes, PostgreSQL keeps (NAMEDATALEN - 1): it cuts a
// longer table or column name to this silently.
inline constexpr size_t kPostgresMaxNameBytes = 63;

// OK if PostgreSQL keeps `name` (a table or column name) as it is; else
// INVALID_ARGUMENT naming it and the limit: cut, two long names would name
// one table, and writing one would replace the other.
Status CheckPostgresIdentifier(std::string_view name);

// A cell's value as text: numbers in their shortest exact form, NULL empty.
std::string CellText(const Cell& cell);

// OK unless `columns` is empty or has two columns of one name.
Status CheckColumnNames(const std::vector<ColumnInfo>& columns);

class Database {
 public:
  // Connects to the database at `url`; a clear error when the URL's scheme
  // is unknown, the SQLite file does not exist or the server refuses.
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& url);

  virtual ~Database() = default;

  // Runs one SELECT, once, and read-only: a second statement, or a query
  // that would change the database (a data-modifying WITH), is refused
  // before anything changes. `columns` once, before the first row (also for
  // a result without rows), then `row` for each row. A callback's error stops the
  // query and is returned. Errors say what the database said; the caller
  // names the database and the statement.
  virtual Status Query(std::string_view select,
                       const std::function<Status(const std::vector<ColumnInfo>&)>& columns,
                       const std::function<Status(const std::vector<Cell>&)>& row) = 0;

  // Runs one statement that returns no rows (CREATE, INSERT, ...); text
  // holding a second statement is refused before anything runs.
  virtual Status Execute(std::string_view statement) = 0;
  // Runs `statement`, whose parameters are written $1, $2, ..., once for
  // every row `next` fills in (it returns false when there are none left);
  // the statement is prepared once. Errors name the row (from 1).
  virtual Status ExecuteForEach(std::string_view statement,
                                const std::function<StatusOr<bool>(std::vector<Cell>*)>& next) = 0;
  // The database's name of a column type for CREATE TABLE: INTEGER, REAL,
  // TEXT, BLOB in SQLite; BIGINT, DOUBLE PRECISION, TEXT, BYTEA in PostgreSQL.
  virtual std::string TypeName(ColumnType type) const = 0;
  // `name` as an identifier in the database's own quoting ("my model",
  // "a""b"): any table or column name is taken as a name, never as SQL.
  virtual std::string QuoteIdentifier(std::string_view name) const = 0;
  // OK if the database keeps `name` (a table or column name) as it is;
  // INVALID_ARGUMENT naming it where the database would change it
  // (PostgreSQL: CheckPostgresIdentifier). Checked before a name is written.
  virtual Status CheckIdentifier(std::string_view name) const = 0;

  // "sqlite:///tmp/a.db", "postgresql://…" without a password.
  virtual std::string Describe() const = 0;
};

}  // namespace elasticdl::sql

#endif  // ELASTICDL_SQL_DATABASE_H_
