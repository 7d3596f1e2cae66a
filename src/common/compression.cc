#include "common/compression.h"

#include <snappy.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "common/crc.h"
#include "common/endian.h"
#include "common/strings.h"

namespace elasticdl::compression {
namespace {

constexpr char kStreamIdentifier[] = "\xff\x06\x00\x00sNaPpY";
constexpr size_t kStreamIdentifierSize = 10;
constexpr size_t kMaxBlockSize = 65536;
constexpr uint8_t kChunkCompressed = 0x00;
constexpr uint8_t kChunkUncompressed = 0x01;
constexpr uint8_t kChunkPadding = 0xfe;
constexpr uint8_t kChunkStreamIdentifier = 0xff;

Status SnappyError(size_t offset, std::string_view what) {
  return absl::DataLossError(StrCat("snappy stream offset ", offset, ": ", what));
}

Status OutputTooLarge(size_t max_output) {
  return absl::DataLossError(
      StrCat("decompressed size exceeds the limit of ", max_output, " bytes"));
}

}  // namespace

void SnappyFramedCompress(std::string_view input, std::string* out) {
  out->append(kStreamIdentifier, kStreamIdentifierSize);
  std::string block(snappy::MaxCompressedLength(kMaxBlockSize), '\0');
  for (size_t pos = 0; pos < input.size(); pos += kMaxBlockSize) {
    std::string_view piece = input.substr(pos, kMaxBlockSize);
    size_t compressed_len = 0;
    snappy::RawCompress(piece.data(), piece.size(), block.data(), &compressed_len);
    // Keep the compressed form only when it saves at least 1/8, as Go's writer does.
    bool use_compressed = compressed_len < piece.size() - piece.size() / 8;
    std::string_view body = use_compressed ? std::string_view(block.data(), compressed_len) : piece;
    char header[8];
    header[0] = static_cast<char>(use_compressed ? kChunkCompressed : kChunkUncompressed);
    uint32_t chunk_len = static_cast<uint32_t>(body.size() + 4);
    header[1] = static_cast<char>(chunk_len & 0xff);
    header[2] = static_cast<char>((chunk_len >> 8) & 0xff);
    header[3] = static_cast<char>((chunk_len >> 16) & 0xff);
    EncodeFixed32(header + 4, crc::MaskCrc(crc::Crc32c(piece)));
    out->append(header, sizeof(header));
    out->append(body.data(), body.size());
  }
}

namespace {

Status SnappyFramedUncompressTo(std::string_view input, size_t max_output, std::string* out) {
  const size_t base = out->size();  // the limit applies to what this call appends
  size_t pos = 0;
  bool seen_identifier = false;
  while (pos < input.size()) {
    if (input.size() - pos < 4) return SnappyError(pos, "truncated chunk header");
    auto type = static_cast<uint8_t>(input[pos]);
    size_t len = static_cast<uint8_t>(input[pos + 1]) |
                 (static_cast<size_t>(static_cast<uint8_t>(input[pos + 2])) << 8) |
                 (static_cast<size_t>(static_cast<uint8_t>(input[pos + 3])) << 16);
    if (input.size() - pos - 4 < len) {
      return SnappyError(
          pos, StrCat("truncated chunk: needs ", len, " bytes, has ", input.size() - pos - 4));
    }
    std::string_view body = input.substr(pos + 4, len);
    if (type == kChunkStreamIdentifier) {
      if (body != std::string_view(kStreamIdentifier + 4, 6)) {
        return SnappyError(pos, "bad stream identifier");
      }
      seen_identifier = true;
    } else if (!seen_identifier) {
      return SnappyError(pos, "missing stream identifier");
    } else if (type == kChunkCompressed || type == kChunkUncompressed) {
      if (len < 4) return SnappyError(pos, "chunk too short for its checksum");
      uint32_t expected = crc::UnmaskCrc(DecodeFixed32(body.data()));
      std::string_view data = body.substr(4);
      size_t start = out->size();
      if (type == kChunkCompressed) {
        size_t n = 0;
        if (!snappy::GetUncompressedLength(data.data(), data.size(), &n)) {
          return SnappyError(pos, "corrupt compressed chunk");
        }
        if (n > kMaxBlockSize) return SnappyError(pos, "chunk decompresses past 64 KiB");
        if (start - base + n > max_output) return OutputTooLarge(max_output);
        out->resize(start + n);
        if (!snappy::RawUncompress(data.data(), data.size(), out->data() + start)) {
          return SnappyError(pos, "corrupt compressed chunk");
        }
      } else {
        if (data.size() > kMaxBlockSize) return SnappyError(pos, "uncompressed chunk over 64 KiB");
        if (start - base + data.size() > max_output) return OutputTooLarge(max_output);
        out->append(data.data(), data.size());
      }
      uint32_t actual = crc::Crc32c(std::string_view(out->data() + start, out->size() - start));
      if (actual != expected) return SnappyError(pos, "chunk checksum mismatch");
    } else if (type >= 0x02 && type <= 0x7f) {
      return SnappyError(pos, StrCat("reserved unskippable chunk type ", Hex32(type)));
    }
    // 0x80-0xfd (reserved skippable) and 0xfe (padding) are skipped.
    static_assert(kChunkPadding == 0xfe);
    pos += 4 + len;
  }
  if (!seen_identifier && !input.empty()) return SnappyError(0, "missing stream identifier");
  return absl::OkStatus();
}

}  // namespace

Status SnappyFramedUncompress(std::string_view input, size_t max_output, std::string* out) {
  const size_t base = out->size();
  Status s = SnappyFramedUncompressTo(input, max_output, out);
  if (!s.ok()) out->resize(base);
  return s;
}

Status GzipCompress(std::string_view input, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return absl::InternalError("gzip: deflateInit2 failed");
  }
  size_t start = out->size();
  out->resize(start + deflateBound(&zs, input.size()) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  zs.avail_in = static_cast<uInt>(input.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data() + start);
  zs.avail_out = static_cast<uInt>(out->size() - start);
  int rc = deflate(&zs, Z_FINISH);
  size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InternalError("gzip: deflate did not finish");
  out->resize(start + produced);
  return absl::OkStatus();
}

Status GzipUncompress(std::string_view input, size_t max_output, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return absl::InternalError("gzip: inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  zs.avail_in = static_cast<uInt>(input.size());
  size_t start = out->size();
  Status status;
  char buf[64 * 1024];
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t produced = sizeof(buf) - zs.avail_out;
    if (out->size() - start + produced > max_output) {
      status = OutputTooLarge(max_output);
      break;
    }
    out->append(buf, produced);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      status =
          absl::DataLossError(StrCat("gzip stream offset ", zs.total_in, ": truncated stream"));
    } else {
      status = absl::DataLossError(
          StrCat("gzip stream offset ", zs.total_in, ": ", zs.msg ? zs.msg : "corrupt stream"));
    }
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) out->resize(start);
  return status;
}

}  // namespace elasticdl::compression
