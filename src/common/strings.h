// String building for messages. (Debian's abseil is built with its own
// string_view, so absl::StrCat does not take std::string_view; this one does.)
#ifndef ELASTICDL_COMMON_STRINGS_H_
#define ELASTICDL_COMMON_STRINGS_H_

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace elasticdl {

namespace strings_internal {
// Only ever an argument of the formatting call that made it.
template <typename T>
const T& Formattable(const T& v) {
  return v;  // NOLINT(bugprone-return-const-ref-from-parameter)
}
// Status messages are absl::string_view, which fmt does not know.
inline std::string_view Formattable(absl::string_view v) { return {v.data(), v.size()}; }
}  // namespace strings_internal

// Concatenates the fmt "{}" form of each argument.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", strings_internal::Formattable(args)), ...);
  return out;
}

inline bool HasSuffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

inline bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "0x0123abcd".
inline std::string Hex32(uint32_t v) { return fmt::format("0x{:08x}", v); }

// A CSV field: quoted (RFC 4180) when it holds a comma, a quote or a newline.
inline std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// "host:port" (the port after the last colon) -> host and port; the port is
// 0 when there is none or it is not a number.
struct HostPort {
  std::string host;
  int port = 0;
};
inline HostPort SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, 0};
  HostPort out{address.substr(0, colon), 0};
  const std::string port = address.substr(colon + 1);
  if (!port.empty() && port.size() <= 5 &&
      port.find_first_not_of("0123456789") == std::string::npos) {
    out.port = std::stoi(port);
  }
  return out;
}

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_STRINGS_H_
