// Runs a test's SQL set-up script statement by statement (Database::Execute
// takes one). Statements are split at semicolons: no ';' in literals.
#ifndef ELASTICDL_TESTING_SQL_SCRIPT_H_
#define ELASTICDL_TESTING_SQL_SCRIPT_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "sql/database.h"

namespace elasticdl::testing {

inline Status ExecuteScript(sql::Database* db, const std::string& script) {
  for (const std::string& statement : std::vector<std::string>(absl::StrSplit(script, ';'))) {
    if (statement.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (Status s = db->Execute(statement); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_SQL_SCRIPT_H_
