#include "common/process_start.h"

#include <fstream>
#include <string>
#include <string_view>

#include "common/strings.h"

namespace elasticdl {

namespace {

// The fields of /proc/<pid>/stat after the command name, from field 3 (the
// state) on.
StatusOr<std::string> StatFieldsAfterName(pid_t pid) {
  const std::string path = StrCat("/proc/", pid, "/stat");
  // /proc files report size 0: read by stream, not by size.
  std::ifstream file(path);
  std::string stat;
  if (!file || !std::getline(file, stat)) return absl::NotFoundError(StrCat("no process ", pid));
  // The command name is in parentheses and may itself hold spaces and
  // parentheses: the fields start after the last ')'.
  size_t pos = stat.rfind(')');
  if (pos == std::string::npos) return absl::DataLossError(StrCat(path, ": unexpected format"));
  return stat.substr(pos + 1);
}

}  // namespace

StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  EDL_ASSIGN_OR_RETURN(const std::string fields, StatFieldsAfterName(pid));
  // The fields start with field 3 (state); the start time is 22.
  std::string_view rest(fields);
  int field = 2;
  size_t i = 0;
  while (i < rest.size() && field < 22) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    ++field;
    if (field == 22) break;
    while (i < rest.size() && rest[i] != ' ') ++i;
  }
  uint64_t start = 0;
  bool digits = false;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i, digits = true) {
    start = start * 10 + static_cast<uint64_t>(rest[i] - '0');
  }
  if (!digits) return absl::DataLossError(StrCat("/proc/", pid, "/stat: no start time"));
  return start;
}

bool ProcessRunning(pid_t pid, uint64_t start_time) {
  StatusOr<std::string> fields = StatFieldsAfterName(pid);
  if (!fields.ok()) return false;
  // Field 3, the state: Z a zombie, X dead.
  const size_t state = fields->find_first_not_of(' ');
  if (state == std::string::npos || (*fields)[state] == 'Z' || (*fields)[state] == 'X') {
    return false;
  }
  StatusOr<uint64_t> start = ProcessStartTime(pid);
  return start.ok() && *start == start_time;
}

}  // namespace elasticdl
