#include "common/finite.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace elasticdl {
namespace {

// A value is a NaN or an infinity exactly when its exponent bits are all
// set. Blocks of integer tests without a branch (which the compiler
// vectorizes), and a stop at the first block holding one.
template <typename Bits>
bool AllFinite(const void* data, size_t count, Bits exponent) {
  constexpr size_t kBlock = 1024;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t end = std::min(count, start + kBlock);
    bool bad = false;
    for (size_t i = start; i < end; ++i) {
      Bits b;
      std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));
      bad |= (b & exponent) == exponent;
    }
    if (bad) return false;
  }
  return true;
}

}  // namespace

bool AllFiniteFloat32(const void* data, size_t count) {
  static_assert(sizeof(float) == sizeof(uint32_t));
  return AllFinite<uint32_t>(data, count, 0x7f800000u);
}

bool AllFiniteFloat64(const void* data, size_t count) {
  static_assert(sizeof(double) == sizeof(uint64_t));
  return AllFinite<uint64_t>(data, count, 0x7ff0000000000000ull);
}

}  // namespace elasticdl
