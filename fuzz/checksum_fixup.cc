#include "checksum_fixup.h"

#include <snappy.h>

#include <string_view>

#include "common/crc.h"
#include "common/endian.h"
#include "data/recordio_chunk.h"

namespace elasticdl::fuzz {
namespace {

constexpr size_t kSnappyChunkHeader = 4;  // type byte, 24-bit length
constexpr size_t kSnappyMaxBlock = 65536;

}  // namespace

void FixRecordIOChecksums(std::string* file) {
  size_t offset = 0;
  while (file->size() - offset >= recordio::kHeaderSize) {
    char* header = file->data() + offset;
    if (DecodeFixed32(header) != recordio::kMagic) return;
    const uint32_t compressor = DecodeFixed32(header + 8);
    const uint32_t stored_size = DecodeFixed32(header + 12);
    const size_t payload_pos = offset + recordio::kHeaderSize;
    if (stored_size > file->size() - payload_pos) return;
    if (compressor == static_cast<uint32_t>(Compressor::kSnappy)) {
      std::string payload = file->substr(payload_pos, stored_size);
      FixSnappyFramedChecksums(&payload);
      file->replace(payload_pos, stored_size, payload);
    }
    header = file->data() + offset;  // replace() may have moved the buffer
    EncodeFixed32(header + 4,
                  crc::Crc32Ieee(std::string_view(file->data() + payload_pos, stored_size)));
    offset = payload_pos + stored_size;
  }
}

void FixTFRecordChecksums(std::string* file) {
  constexpr size_t kHeader = 12, kFooter = 4;
  size_t offset = 0;
  while (file->size() - offset >= kHeader) {
    char* header = file->data() + offset;
    EncodeFixed32(header + 8, crc::MaskCrc(crc::Crc32c(std::string_view(header, 8))));
    const uint64_t length = DecodeFixed64(header);
    const size_t left = file->size() - offset - kHeader;
    if (length > left || left - length < kFooter) return;
    const std::string_view data(header + kHeader, length);
    EncodeFixed32(header + kHeader + length, crc::MaskCrc(crc::Crc32c(data)));
    offset += kHeader + length + kFooter;
  }
}

void FixSnappyFramedChecksums(std::string* stream) {
  std::string uncompressed;
  size_t pos = 0;
  while (stream->size() - pos >= kSnappyChunkHeader) {
    char* chunk = stream->data() + pos;
    const auto type = static_cast<uint8_t>(chunk[0]);
    const size_t len = static_cast<uint8_t>(chunk[1]) |
                       static_cast<size_t>(static_cast<uint8_t>(chunk[2])) << 8 |
                       static_cast<size_t>(static_cast<uint8_t>(chunk[3])) << 16;
    if (len > stream->size() - pos - kSnappyChunkHeader) return;
    if ((type == 0x00 || type == 0x01) && len >= 4) {
      const std::string_view data(chunk + kSnappyChunkHeader + 4, len - 4);
      bool fixable = true;
      if (type == 0x00) {
        size_t n = 0;
        fixable =
            snappy::GetUncompressedLength(data.data(), data.size(), &n) && n <= kSnappyMaxBlock;
        if (fixable) {
          uncompressed.resize(n);
          fixable = snappy::RawUncompress(data.data(), data.size(), uncompressed.data());
        }
      } else {
        uncompressed.assign(data.data(), data.size());
      }
      if (fixable) {
        EncodeFixed32(chunk + kSnappyChunkHeader, crc::MaskCrc(crc::Crc32c(uncompressed)));
      }
    }
    pos += kSnappyChunkHeader + len;
  }
}

}  // namespace elasticdl::fuzz
