// Checksums used by the record formats, computed by ISA-L (SIMD / carry-less
// multiply where the CPU has it).
#ifndef ELASTICDL_COMMON_CRC_H_
#define ELASTICDL_COMMON_CRC_H_

#include <cstdint>
#include <string_view>

namespace elasticdl::crc {

// CRC-32 (IEEE 802.3, the polynomial of zlib and Go's crc32.ChecksumIEEE).
uint32_t Crc32Ieee(std::string_view data);

// CRC-32C (Castagnoli), with the usual pre- and post-inversion.
uint32_t Crc32c(std::string_view data);
// Continues a CRC-32C: Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, std::string_view data);

// The masking TFRecord and the snappy framing format apply to stored CRC-32C
// values, so that a CRC of data containing CRCs stays well distributed.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace elasticdl::crc

#endif  // ELASTICDL_COMMON_CRC_H_
