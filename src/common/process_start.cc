#include "common/process_start.h"

#include <charconv>
#include <fstream>
#include <string>
#include <string_view>

#include "common/strings.h"

namespace elasticdl {
namespace {

// What /proc/<pid>/stat says of a process, read once.
struct Stat {
  char state = '?';         // field 3: R, S, ..., Z a zombie, X dead
  uint64_t start_time = 0;  // field 22
};

StatusOr<Stat> ReadStat(pid_t pid) {
  const std::string path = StrCat("/proc/", pid, "/stat");
  // /proc files report size 0: read by stream, not by size.
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return absl::NotFoundError(StrCat("no process ", pid));
  // The command name is in parentheses and may itself hold spaces and
  // parentheses: the fields start after the last ')', with field 3.
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos) {
    return absl::DataLossError(StrCat(path, ": unexpected format"));
  }
  std::string_view rest(line);
  rest.remove_prefix(name_end + 1);
  Stat stat;
  int field = 2;
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    ++field;
    if (field == 3 && i < rest.size()) stat.state = rest[i];
    if (field == 22) break;
    while (i < rest.size() && rest[i] != ' ') ++i;
  }
  const char* end = rest.data() + rest.size();
  auto [ptr, ec] = std::from_chars(rest.data() + i, end, stat.start_time);
  if (field != 22 || ec != std::errc() || (ptr != end && *ptr != ' ')) {
    return absl::DataLossError(StrCat(path, ": no start time"));
  }
  return stat;
}

}  // namespace

StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  EDL_ASSIGN_OR_RETURN(const Stat stat, ReadStat(pid));
  return stat.start_time;
}

bool ProcessRunning(pid_t pid, uint64_t start_time) {
  StatusOr<Stat> stat = ReadStat(pid);
  return stat.ok() && stat->start_time == start_time && stat->state != 'Z' && stat->state != 'X';
}

std::string ProcessToken(pid_t pid, uint64_t start_time) { return StrCat(pid, ":", start_time); }

std::optional<std::pair<pid_t, uint64_t>> ParseProcessToken(std::string_view token) {
  const char* const end = token.data() + token.size();
  pid_t pid = 0;
  uint64_t start_time = 0;
  const auto parsed_pid = std::from_chars(token.data(), end, pid);
  if (parsed_pid.ec != std::errc() || parsed_pid.ptr == end || *parsed_pid.ptr != ':' || pid <= 0) {
    return std::nullopt;
  }
  const auto parsed_start = std::from_chars(parsed_pid.ptr + 1, end, start_time);
  if (parsed_start.ec != std::errc() || parsed_start.ptr != end) return std::nullopt;
  return std::make_pair(pid, start_time);
}

}  // namespace elasticdl
