#include "data/recordio_chunk.h"

#include <limits>

#include "common/compression.h"
#include "common/crc.h"
#include "common/endian.h"
#include "common/strings.h"

namespace elasticdl::recordio {

ChunkHeader DecodeHeader(const char* src) {
  ChunkHeader h;
  h.magic = DecodeFixed32(src);
  h.checksum = DecodeFixed32(src + 4);
  h.compressor = DecodeFixed32(src + 8);
  h.stored_size = DecodeFixed32(src + 12);
  h.num_records = DecodeFixed32(src + 16);
  return h;
}

void EncodeHeader(const ChunkHeader& h, char* dst) {
  EncodeFixed32(dst, h.magic);
  EncodeFixed32(dst + 4, h.checksum);
  EncodeFixed32(dst + 8, h.compressor);
  EncodeFixed32(dst + 12, h.stored_size);
  EncodeFixed32(dst + 16, h.num_records);
}

Status CheckHeader(const ChunkHeader& h) {
  if (h.magic != kMagic) {
    return absl::DataLossError(StrCat("bad magic ", Hex32(h.magic), ", expected 0x01020304"));
  }
  if (h.compressor > static_cast<uint32_t>(Compressor::kGzip)) {
    return absl::DataLossError(
        StrCat("unknown compressor ", h.compressor, ", expected 0 (none), 1 (snappy) or 2 (gzip)"));
  }
  if (h.compressor == static_cast<uint32_t>(Compressor::kNone) &&
      uint64_t{h.num_records} * 4 > h.stored_size) {
    return absl::DataLossError(StrCat("header claims ", h.num_records, " records in a payload of ",
                                      h.stored_size, " bytes"));
  }
  return absl::OkStatus();
}

Status DecodePayload(const ChunkHeader& h, std::string_view stored, size_t max_raw_bytes,
                     uint64_t first_record, std::string* scratch,
                     std::vector<std::string_view>* records) {
  records->clear();
  uint32_t actual = crc::Crc32Ieee(stored);
  if (actual != h.checksum) {
    return absl::DataLossError(StrCat("checksum mismatch: header says ", Hex32(h.checksum),
                                      ", payload has ", Hex32(actual)));
  }
  std::string_view raw;
  switch (static_cast<Compressor>(h.compressor)) {
    case Compressor::kNone:
      raw = stored;
      break;
    case Compressor::kSnappy:
      scratch->clear();
      EDL_RETURN_IF_ERROR(compression::SnappyFramedUncompress(stored, max_raw_bytes, scratch));
      raw = *scratch;
      break;
    case Compressor::kGzip:
      scratch->clear();
      EDL_RETURN_IF_ERROR(compression::GzipUncompress(stored, max_raw_bytes, scratch));
      raw = *scratch;
      break;
    default:
      return CheckHeader(h);
  }
  if (uint64_t{h.num_records} * 4 > raw.size()) {
    return absl::DataLossError(
        StrCat("header claims ", h.num_records, " records in a payload of ", raw.size(), " bytes"));
  }
  records->reserve(h.num_records);
  size_t pos = 0;
  for (uint32_t i = 0; i < h.num_records; ++i) {
    if (raw.size() - pos < 4) {
      return absl::DataLossError(
          StrCat("record ", first_record + i, ": truncated length at payload offset ", pos));
    }
    uint32_t len = DecodeFixed32(raw.data() + pos);
    pos += 4;
    if (len > raw.size() - pos) {
      return absl::DataLossError(StrCat("record ", first_record + i, ": length ", len,
                                        " at payload offset ", pos - 4, " exceeds the ",
                                        raw.size() - pos, " bytes left in the chunk"));
    }
    records->emplace_back(raw.data() + pos, len);
    pos += len;
  }
  if (pos != raw.size()) {
    return absl::DataLossError(StrCat(raw.size() - pos, " bytes after the last of ", h.num_records,
                                      " records in the payload"));
  }
  return absl::OkStatus();
}

Status EncodeChunk(std::string_view raw, uint32_t num_records, Compressor compressor,
                   std::string* out) {
  size_t header_pos = out->size();
  out->resize(header_pos + kHeaderSize);
  switch (compressor) {
    case Compressor::kNone:
      out->append(raw.data(), raw.size());
      break;
    case Compressor::kSnappy:
      compression::SnappyFramedCompress(raw, out);
      break;
    case Compressor::kGzip:
      EDL_RETURN_IF_ERROR(compression::GzipCompress(raw, out));
      break;
  }
  size_t stored_size = out->size() - header_pos - kHeaderSize;
  if (stored_size > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        StrCat("chunk payload of ", stored_size, " bytes does not fit RecordIO's uint32"));
  }
  ChunkHeader h;
  h.compressor = static_cast<uint32_t>(compressor);
  h.stored_size = static_cast<uint32_t>(stored_size);
  h.num_records = num_records;
  h.checksum =
      crc::Crc32Ieee(std::string_view(out->data() + header_pos + kHeaderSize, stored_size));
  EncodeHeader(h, out->data() + header_pos);
  return absl::OkStatus();
}

}  // namespace elasticdl::recordio
