// The byte layout of one RecordIO chunk, shared by the reader, the writer and
// the validator. Functions here work on memory and report errors without the
// file name; callers add it.
#ifndef ELASTICDL_DATA_RECORDIO_CHUNK_H_
#define ELASTICDL_DATA_RECORDIO_CHUNK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/data/recordio.h"
#include "elasticdl/status.h"

namespace elasticdl::recordio {

constexpr uint32_t kMagic = 0x01020304;
constexpr size_t kHeaderSize = 20;

struct ChunkHeader {
  uint32_t magic = kMagic;
  uint32_t checksum = 0;
  uint32_t compressor = 0;
  uint32_t stored_size = 0;
  uint32_t num_records = 0;
};

ChunkHeader DecodeHeader(const char* src);
void EncodeHeader(const ChunkHeader& header, char* dst);

// Checks what a header alone can tell: magic, compressor code, and that an
// uncompressed payload is large enough for its record count.
Status CheckHeader(const ChunkHeader& header);

// Verifies the payload checksum, decompresses it (into `*scratch` unless it is
// stored uncompressed) and splits it into exactly header.num_records records,
// which point into `stored` or `*scratch`. `first_record` is only used in
// error messages (the file index of the chunk's first record).
Status DecodePayload(const ChunkHeader& header, std::string_view stored, size_t max_raw_bytes,
                     uint64_t first_record, std::string* scratch,
                     std::vector<std::string_view>* records);

// Builds a chunk (header + stored payload) from a raw payload holding
// `num_records` length-prefixed records, appending it to `*out`.
Status EncodeChunk(std::string_view raw, uint32_t num_records, Compressor compressor,
                   std::string* out);

}  // namespace elasticdl::recordio

#endif  // ELASTICDL_DATA_RECORDIO_CHUNK_H_
