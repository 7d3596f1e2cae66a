// Little-endian fixed-width integers, as every on-disk format here stores them.
#ifndef ELASTICDL_COMMON_ENDIAN_H_
#define ELASTICDL_COMMON_ENDIAN_H_

#include <cstdint>
#include <cstring>

namespace elasticdl {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian hosts only");

inline void EncodeFixed32(char* dst, uint32_t v) { std::memcpy(dst, &v, sizeof(v)); }
inline void EncodeFixed64(char* dst, uint64_t v) { std::memcpy(dst, &v, sizeof(v)); }
inline uint32_t DecodeFixed32(const char* src) {
  uint32_t v;
  std::memcpy(&v, src, sizeof(v));
  return v;
}
inline uint64_t DecodeFixed64(const char* src) {
  uint64_t v;
  std::memcpy(&v, src, sizeof(v));
  return v;
}

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_ENDIAN_H_
