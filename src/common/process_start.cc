#include "common/process_start.h"

#include <fstream>
#include <string>
#include <string_view>

#include "common/strings.h"

namespace elasticdl {

StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  const std::string path = StrCat("/proc/", pid, "/stat");
  // /proc files report size 0: read by stream, not by size.
  std::ifstream file(path);
  std::string stat;
  if (!file || !std::getline(file, stat)) return absl::NotFoundError(StrCat("no process ", pid));
  // Fields after the command name, which is in parentheses and may itself
  // hold spaces and parentheses: start after the last ')'.
  size_t pos = stat.rfind(')');
  if (pos == std::string::npos) return absl::DataLossError(StrCat(path, ": unexpected format"));
  // The remaining fields start with field 3 (state); the start time is 22.
  std::string_view rest(stat);
  rest.remove_prefix(pos + 1);
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
  if (!digits) return absl::DataLossError(StrCat(path, ": no start time"));
  return start;
}

}  // namespace elasticdl
