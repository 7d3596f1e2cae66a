#include "common/crc.h"

#include <isa-l/crc.h>

#include <climits>

namespace elasticdl::crc {
namespace {

// ISA-L takes an int length; feed larger buffers in pieces.
constexpr size_t kMaxPiece = size_t{1} << 30;

}  // namespace

uint32_t Crc32Ieee(std::string_view data) {
  uint32_t crc = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t left = data.size();
  while (left > 0) {
    size_t n = left < kMaxPiece ? left : kMaxPiece;
    crc = crc32_gzip_refl(crc, p, n);
    p += n;
    left -= n;
  }
  return crc;
}

uint32_t Crc32cExtend(uint32_t crc, std::string_view data) {
  // crc32_iscsi neither pre- nor post-inverts.
  uint32_t state = ~crc;
  auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
  size_t left = data.size();
  while (left > 0) {
    size_t n = left < kMaxPiece ? left : kMaxPiece;
    state = crc32_iscsi(p, static_cast<int>(n), state);
    p += n;
    left -= n;
  }
  return ~state;
}

uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data); }

}  // namespace elasticdl::crc
