#include "sql/database.h"

#include <absl/strings/ascii.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace elasticdl::sql {

namespace {

// OK when nothing but blanks and semicolons follows the statement SQLite
// compiled from `text` (it stopped at `tail`).
Status OneStatement(std::string_view text, const char* tail) {
  for (const char* p = tail; p != nullptr && p < text.data() + text.size(); ++p) {
    if (!std::isspace(static_cast<unsigned char>(*p)) && *p != ';') {
      return absl::InvalidArgumentError(StrCat("one statement expected, found more after it: '",
                                               std::string_view(p, text.data() + text.size() - p),
                                               "'"));
    }
  }
  return absl::OkStatus();
}

// SQLite's type affinity of a declared type (https://sqlite.org/datatype3.html,
// 3.1): what the column's values are converted to on the way in.
ColumnType SqliteAffinity(const char* declared) {
  if (declared == nullptr) return ColumnType::kUnknown;
  const std::string type = absl::AsciiStrToUpper(declared);
  if (type.find("INT") != std::string::npos) return ColumnType::kInteger;
  if (type.find("CHAR") != std::string::npos || type.find("CLOB") != std::string::npos ||
      type.find("TEXT") != std::string::npos) {
    return ColumnType::kText;
  }
  if (type.empty() || type.find("BLOB") != std::string::npos) return ColumnType::kUnknown;
  if (type.find("REAL") != std::string::npos || type.find("FLOA") != std::string::npos ||
      type.find("DOUB") != std::string::npos) {
    return ColumnType::kReal;
  }
  // NUMERIC affinity: integers and reals both stay as they are.
  return ColumnType::kUnknown;
}

class SqliteDatabase final : public Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& url, const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return absl::NotFoundError(StrCat(url, ": no SQLite database at ", path));
    }
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
    std::unique_ptr<SqliteDatabase> database(new SqliteDatabase(db, url));
    if (rc != SQLITE_OK) {
      return absl::UnavailableError(
          StrCat(url, ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    }
    sqlite3_busy_timeout(db, 5000);
    return std::unique_ptr<Database>(std::move(database));
  }

  ~SqliteDatabase() override { sqlite3_close(db_); }

  Status Query(std::string_view select,
               const std::function<Status(const std::vector<ColumnInfo>&)>& on_columns,
               const std::function<Status(const std::vector<Cell>&)>& on_row) override {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    if (sqlite3_prepare_v2(db_, select.data(), static_cast<int>(select.size()), &stmt, &tail) !=
        SQLITE_OK) {
      return absl::InvalidArgumentError(StrCat(sqlite3_errmsg(db_)));
    }
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> owned(stmt, &sqlite3_finalize);
    if (stmt == nullptr) return absl::InvalidArgumentError("the query is empty");
    EDL_RETURN_IF_ERROR(OneStatement(select, tail));
    if (sqlite3_stmt_readonly(stmt) == 0) {
      return absl::InvalidArgumentError("not a query: it would change the database");
    }
    const int n = sqlite3_column_count(stmt);
    std::vector<ColumnInfo> columns(n);
    for (int i = 0; i < n; ++i) {
      columns[i].name = sqlite3_column_name(stmt, i);
      const char* declared = sqlite3_column_decltype(stmt, i);
      columns[i].declared = declared != nullptr ? declared : "";
      columns[i].type = SqliteAffinity(declared);
    }
    EDL_RETURN_IF_ERROR(on_columns(columns));
    std::vector<Cell> cells(n);
    for (;;) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) return absl::OkStatus();
      if (rc != SQLITE_ROW) return absl::InternalError(StrCat(sqlite3_errmsg(db_)));
      for (int i = 0; i < n; ++i) {
        Cell& cell = cells[i];
        cell = Cell{};
        switch (sqlite3_column_type(stmt, i)) {
          case SQLITE_INTEGER:
            cell.kind = Cell::Kind::kInteger;
            cell.integer = sqlite3_column_int64(stmt, i);
            break;
          case SQLITE_FLOAT:
            cell.kind = Cell::Kind::kReal;
            cell.real = sqlite3_column_double(stmt, i);
            break;
          case SQLITE_TEXT:
          case SQLITE_BLOB: {
            cell.kind = Cell::Kind::kText;
            const void* data = sqlite3_column_type(stmt, i) == SQLITE_TEXT
                                   ? static_cast<const void*>(sqlite3_column_text(stmt, i))
                                   : sqlite3_column_blob(stmt, i);
            cell.text = std::string_view(static_cast<const char*>(data),
                                         static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
            break;
          }
          default:
            break;
        }
      }
      EDL_RETURN_IF_ERROR(on_row(cells));
    }
  }

  Status Execute(std::string_view statement) override {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    if (sqlite3_prepare_v2(db_, statement.data(), static_cast<int>(statement.size()), &stmt,
                           &tail) != SQLITE_OK) {
      return absl::InvalidArgumentError(StrCat(sqlite3_errmsg(db_)));
    }
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> owned(stmt, &sqlite3_finalize);
    if (stmt == nullptr) return absl::InvalidArgumentError("the statement is empty");
    EDL_RETURN_IF_ERROR(OneStatement(statement, tail));
    for (;;) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) return absl::OkStatus();
      if (rc != SQLITE_ROW) return absl::InvalidArgumentError(StrCat(sqlite3_errmsg(db_)));
    }
  }

  Status CheckIdentifier(std::string_view) const override { return absl::OkStatus(); }

  std::string QuoteIdentifier(std::string_view name) const override {
    char* quoted = sqlite3_mprintf("\"%w\"", std::string(name).c_str());
    std::string out = quoted != nullptr ? quoted : "";
    sqlite3_free(quoted);
    return out;
  }

  Status ExecuteForEach(std::string_view statement,
                        const std::function<StatusOr<bool>(std::vector<Cell>*)>& next) override {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, statement.data(), static_cast<int>(statement.size()), &stmt,
                           nullptr) != SQLITE_OK) {
      return absl::InvalidArgumentError(StrCat(sqlite3_errmsg(db_)));
    }
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> owned(stmt, &sqlite3_finalize);
    std::vector<Cell> cells;
    for (uint64_t row = 1;; ++row) {
      cells.clear();
      EDL_ASSIGN_OR_RETURN(bool more, next(&cells));
      if (!more) return absl::OkStatus();
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
      for (size_t i = 0; i < cells.size(); ++i) {
        const Cell& c = cells[i];
        const int at = static_cast<int>(i) + 1;
        int rc = SQLITE_OK;
        switch (c.kind) {
          case Cell::Kind::kNull:
            rc = sqlite3_bind_null(stmt, at);
            break;
          case Cell::Kind::kInteger:
            rc = sqlite3_bind_int64(stmt, at, c.integer);
            break;
          case Cell::Kind::kReal:
            rc = sqlite3_bind_double(stmt, at, c.real);
            break;
          case Cell::Kind::kText:
            rc = sqlite3_bind_text64(stmt, at, c.text.data(), c.text.size(), SQLITE_STATIC,
                                     SQLITE_UTF8);
            break;
          case Cell::Kind::kBlob:
            rc = sqlite3_bind_blob64(stmt, at, c.text.data(), c.text.size(), SQLITE_STATIC);
            break;
        }
        if (rc != SQLITE_OK) {
          return absl::InvalidArgumentError(StrCat("row ", row, ": ", sqlite3_errmsg(db_)));
        }
      }
      if (sqlite3_step(stmt) != SQLITE_DONE) {
        return absl::InvalidArgumentError(StrCat("row ", row, ": ", sqlite3_errmsg(db_)));
      }
    }
  }

  std::string TypeName(ColumnType type) const override {
    switch (type) {
      case ColumnType::kInteger:
        return "INTEGER";
      case ColumnType::kReal:
        return "REAL";
      case ColumnType::kBlob:
        return "BLOB";
      default:
        return "TEXT";
    }
  }

  std::string Describe() const override { return url_; }

 private:
  SqliteDatabase(sqlite3* db, std::string url) : db_(db), url_(std::move(url)) {}
  sqlite3* db_;
  std::string url_;
};

// PostgreSQL's built-in type OIDs (catalog/pg_type.dat).
ColumnType PostgresType(Oid oid) {
  switch (oid) {
    case 16:  // bool: 't'/'f', as 1/0
    case 20:  // int8
    case 21:  // int2
    case 23:  // int4
      return ColumnType::kInteger;
    case 700:   // float4
    case 701:   // float8
    case 1700:  // numeric
      return ColumnType::kReal;
    case 17:  // bytea
      return ColumnType::kBlob;
    default:  // text, varchar, bpchar, dates, ...: their text form
      return ColumnType::kText;
  }
}

std::string RedactedMessage(std::string message, const std::string& url);

class PostgresDatabase final : public Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& url) {
    PGconn* conn = PQconnectdb(url.c_str());
    std::unique_ptr<PostgresDatabase> database(new PostgresDatabase(conn));
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      return absl::UnavailableError(
          StrCat("cannot connect to PostgreSQL at ", RedactedUrl(url), ": ",
                 conn != nullptr ? RedactedMessage(Trim(PQerrorMessage(conn)), url)
                                 : std::string("out of memory")));
    }
    // The server's notices ("table ... does not exist, skipping" of DROP
    // TABLE IF EXISTS) are not the user's business; libpq prints them.
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
    return std::unique_ptr<Database>(std::move(database));
  }

  ~PostgresDatabase() override { PQfinish(conn_); }

  Status Query(std::string_view select,
               const std::function<Status(const std::vector<ColumnInfo>&)>& on_columns,
               const std::function<Status(const std::vector<Cell>&)>& on_row) override {
    // In a read-only transaction of its own: a data-modifying WITH fails
    // before it changes anything.
    EDL_RETURN_IF_ERROR(Execute("BEGIN READ ONLY"));
    Status status = QueryOnce(select, on_columns, on_row);
    Status ended = Execute(status.ok() ? "COMMIT" : "ROLLBACK");
    return status.ok() ? ended : status;
  }

  // The extended protocol: one statement only.
  Status QueryOnce(std::string_view select,
                   const std::function<Status(const std::vector<ColumnInfo>&)>& on_columns,
                   const std::function<Status(const std::vector<Cell>&)>& on_row) {
    if (PQsendQueryParams(conn_, std::string(select).c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                          0) == 0) {
      return absl::UnavailableError(StrCat(Trim(PQerrorMessage(conn_))));
    }
    PQsetSingleRowMode(conn_);
    Status status;
    bool described = false;
    std::vector<ColumnInfo> columns;
    std::vector<Cell> cells;
    // Every result is read, even after an error, so that the connection is
    // ready for the next query.
    while (PGresult* result = PQgetResult(conn_)) {
      std::unique_ptr<PGresult, decltype(&PQclear)> owned(result, &PQclear);
      const ExecStatusType kind = PQresultStatus(result);
      if (!status.ok()) continue;
      if (kind != PGRES_SINGLE_TUPLE && kind != PGRES_TUPLES_OK) {
        status = kind == PGRES_COMMAND_OK
                     ? absl::InvalidArgumentError("not a query: it returns no rows")
                     : absl::InvalidArgumentError(StrCat(Trim(PQresultErrorMessage(result))));
        continue;
      }
      if (!described) {
        described = true;
        const int n = PQnfields(result);
        columns.resize(n);
        for (int i = 0; i < n; ++i) {
          columns[i].name = PQfname(result, i);
          columns[i].type = PostgresType(PQftype(result, i));
          columns[i].declared = StrCat("oid ", PQftype(result, i));
        }
        cells.resize(n);
        status = on_columns(columns);
        if (!status.ok()) continue;
      }
      if (kind == PGRES_SINGLE_TUPLE) status = Row(result, columns, &cells, on_row);
    }
    return status;
  }

  Status Execute(std::string_view statement) override {
    // The extended protocol: one statement only.
    std::unique_ptr<PGresult, decltype(&PQclear)> result(
        PQexecParams(conn_, std::string(statement).c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                     0),
        &PQclear);
    const ExecStatusType kind = PQresultStatus(result.get());
    if (kind != PGRES_COMMAND_OK && kind != PGRES_TUPLES_OK) {
      return absl::InvalidArgumentError(StrCat(Trim(PQresultErrorMessage(result.get()))));
    }
    return absl::OkStatus();
  }

  Status ExecuteForEach(std::string_view statement,
                        const std::function<StatusOr<bool>(std::vector<Cell>*)>& next) override {
    const std::string name = "elasticdl_execute_for_each";
    std::unique_ptr<PGresult, decltype(&PQclear)> prepared(
        PQprepare(conn_, name.c_str(), std::string(statement).c_str(), 0, nullptr), &PQclear);
    if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      return absl::InvalidArgumentError(StrCat(Trim(PQresultErrorMessage(prepared.get()))));
    }
    Status status;
    std::vector<Cell> cells;
    std::vector<std::string> text;  // numbers in their text form
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (uint64_t row = 1; status.ok(); ++row) {
      cells.clear();
      StatusOr<bool> more = next(&cells);
      if (!more.ok()) {
        status = more.status();
        break;
      }
      if (!*more) break;
      const size_t n = cells.size();
      text.assign(n, std::string());
      values.assign(n, nullptr);
      lengths.assign(n, 0);
      formats.assign(n, 0);
      for (size_t i = 0; i < n; ++i) {
        const Cell& c = cells[i];
        switch (c.kind) {
          case Cell::Kind::kNull:
            continue;
          case Cell::Kind::kInteger:
            text[i] = std::to_string(c.integer);
            break;
          case Cell::Kind::kReal:
            text[i] = fmt::format("{}", c.real);  // shortest text that reads back exactly
            break;
          case Cell::Kind::kText:
            text[i] = std::string(c.text);  // libpq wants it NUL-terminated
            break;
          case Cell::Kind::kBlob:
            values[i] = c.text.data();
            lengths[i] = static_cast<int>(c.text.size());
            formats[i] = 1;  // binary: the bytes as they are
            continue;
        }
        values[i] = text[i].c_str();
      }
      std::unique_ptr<PGresult, decltype(&PQclear)> result(
          PQexecPrepared(conn_, name.c_str(), static_cast<int>(n), values.data(), lengths.data(),
                         formats.data(), 0),
          &PQclear);
      if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
        status = absl::InvalidArgumentError(
            StrCat("row ", row, ": ", Trim(PQresultErrorMessage(result.get()))));
      }
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> deallocated(
        PQexec(conn_, StrCat("DEALLOCATE ", name).c_str()), &PQclear);
    return status;
  }

  Status CheckIdentifier(std::string_view name) const override {
    return CheckPostgresIdentifier(name);
  }

  std::string QuoteIdentifier(std::string_view name) const override {
    char* quoted = PQescapeIdentifier(conn_, name.data(), name.size());
    if (quoted != nullptr) {
      std::string out = quoted;
      PQfreemem(quoted);
      return out;
    }
    // Not valid in the connection's encoding: quoted as SQL does, which the
    // server then refuses as a name it cannot read.
    std::string out = "\"";
    for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  }

  std::string TypeName(ColumnType type) const override {
    switch (type) {
      case ColumnType::kInteger:
        return "BIGINT";
      case ColumnType::kReal:
        return "DOUBLE PRECISION";
      case ColumnType::kBlob:
        return "BYTEA";
      default:
        return "TEXT";
    }
  }

  std::string Describe() const override {
    return StrCat("postgresql://", PQuser(conn_), "@", PQhost(conn_), ":", PQport(conn_), "/",
                  PQdb(conn_));
  }

 private:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}

  static std::string Trim(const char* message) {
    std::string s = message != nullptr ? message : "";
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  }

  Status Row(const PGresult* result, const std::vector<ColumnInfo>& columns,
             std::vector<Cell>* cells,
             const std::function<Status(const std::vector<Cell>&)>& on_row) {
    blobs_.resize(columns.size());
    for (size_t i = 0; i < columns.size(); ++i) {
      Cell& cell = (*cells)[i];
      cell = Cell{};
      const int col = static_cast<int>(i);
      if (PQgetisnull(result, 0, col) != 0) continue;
      cell.text = std::string_view(PQgetvalue(result, 0, col),
                                   static_cast<size_t>(PQgetlength(result, 0, col)));
      const char* begin = cell.text.data();
      const char* end = begin + cell.text.size();
      switch (columns[i].type) {
        case ColumnType::kInteger:
          cell.kind = Cell::Kind::kInteger;
          if (cell.text == "t" || cell.text == "f") {
            cell.integer = cell.text == "t" ? 1 : 0;
          } else if (auto [ptr, ec] = std::from_chars(begin, end, cell.integer);
                     ec != std::errc() || ptr != end) {
            return absl::InternalError(StrCat("column '", columns[i].name, "': cannot read '",
                                              cell.text, "' as an integer"));
          }
          break;
        case ColumnType::kReal: {
          // numeric may be "NaN"; strtod reads it, and "Infinity", too.
          char* parsed = nullptr;
          const std::string text(cell.text);
          cell.kind = Cell::Kind::kReal;
          cell.real = std::strtod(text.c_str(), &parsed);
          if (parsed != text.c_str() + text.size()) {
            return absl::InternalError(StrCat("column '", columns[i].name, "': cannot read '",
                                              cell.text, "' as a number"));
          }
          break;
        }
        case ColumnType::kBlob: {
          // The text form "\\x<hex>", decoded.
          size_t size = 0;
          unsigned char* bytes =
              PQunescapeBytea(reinterpret_cast<const unsigned char*>(begin), &size);
          if (bytes == nullptr) return absl::ResourceExhaustedError("out of memory");
          blobs_[i].assign(reinterpret_cast<const char*>(bytes), size);
          PQfreemem(bytes);
          cell.kind = Cell::Kind::kText;
          cell.text = blobs_[i];
          break;
        }
        default:
          cell.kind = Cell::Kind::kText;
          break;
      }
    }
    return on_row(*cells);
  }

  PGconn* conn_;
  // The decoded bytea cells of the current row, by column.
  std::vector<std::string> blobs_;
};

}  // namespace

std::string CellText(const Cell& cell) {
  switch (cell.kind) {
    case Cell::Kind::kInteger:
      return std::to_string(cell.integer);
    case Cell::Kind::kReal:
      return fmt::format("{}", cell.real);
    default:
      return std::string(cell.text);
  }
}

Status CheckColumnNames(const std::vector<ColumnInfo>& columns) {
  if (columns.empty()) return absl::InvalidArgumentError("the query selects no columns");
  std::set<std::string> names;
  for (const ColumnInfo& column : columns) {
    if (!names.insert(column.name).second) {
      return absl::InvalidArgumentError(
          StrCat("the query selects two columns named '", column.name,
                 "': give one another name (AS) so that each feature has its own"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The length of `url`'s scheme with its "://" ("postgresql://": 13), 0 if it
// has none. A scheme is a letter, then letters, digits, '+', '-' or '.'
// (RFC 3986, section 3.1).
size_t SchemePrefixLength(std::string_view url) {
  if (url.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(url[0]))) return 0;
  size_t i = 1;
  while (i < url.size() && (absl::ascii_isalnum(static_cast<unsigned char>(url[i])) ||
                            url[i] == '+' || url[i] == '-' || url[i] == '.')) {
    ++i;
  }
  return url.substr(i, 3) == "://" ? i + 3 : 0;
}

// Where `url` holds a password: [begin, end) of the user information's
// (postgresql://user:PASSWORD@host, bounded by the last '@' before the
// query) and of every password= setting's value (in the query up to '&', in
// key=value settings quoted or up to a space).
std::vector<std::pair<size_t, size_t>> PasswordSpans(const std::string& url) {
  std::vector<std::pair<size_t, size_t>> spans;
  // The user information of a URL of any scheme (an unknown one is quoted
  // in errors too).
  if (const size_t start = SchemePrefixLength(url); start > 0) {
    const size_t query = std::min(url.find_first_of("?#", start), url.size());
    const size_t at = query > start ? url.rfind('@', query - 1) : std::string::npos;
    const size_t colon = url.find(':', start);
    if (at != std::string::npos && at >= start && colon < at) spans.emplace_back(colon + 1, at);
  }
  static const std::regex kPassword(R"((?:^|[?&\s])password\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]*))",
                                    std::regex::icase);
  for (auto it = std::sregex_iterator(url.begin(), url.end(), kPassword);
       it != std::sregex_iterator(); ++it) {
    const size_t begin = static_cast<size_t>(it->position(1));
    spans.emplace_back(begin, begin + static_cast<size_t>(it->length(1)));
  }
  std::sort(spans.begin(), spans.end());
  return spans;
}

// `text` with its %XX escapes decoded (a malformed one kept as it is).
std::string PercentDecoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr ==
            text.data() + i + 3) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// `message` (libpq's, which may quote the URL's parts) with every password
// of `url` in it, as written or decoded, replaced by "***".
std::string RedactedMessage(std::string message, const std::string& url) {
  for (const auto& [begin, end] : PasswordSpans(url)) {
    const std::string written = url.substr(begin, end - begin);
    for (const std::string& password : {written, PercentDecoded(written)}) {
      if (password.empty()) continue;
      for (size_t at = message.find(password); at != std::string::npos;
           at = message.find(password, at + 3)) {
        message.replace(at, password.size(), "***");
      }
    }
  }
  return message;
}

}  // namespace

Status CheckPostgresIdentifier(std::string_view name) {
  if (name.size() <= kPostgresMaxNameBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("the name '", name, "' is ", name.size(), " bytes; PostgreSQL keeps only the first ",
             kPostgresMaxNameBytes,
             " bytes of a table or column name (two longer names could name one table): "
             "name it in at most ",
             kPostgresMaxNameBytes, " bytes"));
}

std::string RedactedUrl(const std::string& url) {
  std::string out = url;
  const std::vector<std::pair<size_t, size_t>> spans = PasswordSpans(url);
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    out.replace(it->first, it->second - it->first, "***");
  }
  return out;
}

StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& given) {
  // Schemes are case-insensitive (RFC 3986): taken in lower case, as libpq
  // expects them.
  const size_t prefix = SchemePrefixLength(given);
  const std::string scheme = absl::AsciiStrToLower(given.substr(0, prefix));
  const std::string url = scheme + given.substr(prefix);
  if (scheme == "sqlite://") {
    const std::string path = url.substr(prefix);
    if (path.empty()) {
      return absl::InvalidArgumentError(StrCat(RedactedUrl(url), ": no database file named"));
    }
    return SqliteDatabase::Open(url, path);
  }
  if (scheme == "postgresql://" || scheme == "postgres://") {
    // libpq takes the user information up to the first '@', and only where
    // no '/' comes before it: a raw '@' or '/' in a password would split it
    // into a host, a port or a path that libpq's messages quote. Refused
    // before libpq reads it, without the password (PasswordSpans takes all
    // up to the last '@').
    const size_t start = prefix;
    const size_t query = std::min(url.find_first_of("?#", start), url.size());
    const size_t at = url.find('@', start);
    if (at < query && (url.find('@', at + 1) < query || url.find('/', start) < at)) {
      return absl::InvalidArgumentError(
          StrCat("database URL ", RedactedUrl(url),
                 ": an '@' or a '/' in the user name, the password or the database name must "
                 "be percent-encoded (%40, %2F)"));
    }
    return PostgresDatabase::Open(url);
  }
  return absl::InvalidArgumentError(
      StrCat("unknown database URL '", RedactedUrl(given),
             "': expected sqlite:///path/to.db or postgresql://user@host:port/db"));
}

}  // namespace elasticdl::sql
