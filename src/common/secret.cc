#include "common/secret.h"

#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "common/file.h"

namespace elasticdl {

StatusOr<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> random(bytes);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(random.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "getrandom");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char b : random) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace elasticdl
