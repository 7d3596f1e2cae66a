// The two compressions a RecordIO chunk may use: snappy in its framing
// (stream) format, as Go's snappy.NewWriter writes it, and gzip.
//
// Decoders append to `out`, at most `max_output` bytes per call: a corrupt or
// hostile payload cannot make them allocate without bound. On error `out` is
// left as it was. Errors
// are DATA_LOSS with the offset inside the compressed input; callers add the
// file and chunk.
#ifndef ELASTICDL_COMMON_COMPRESSION_H_
#define ELASTICDL_COMMON_COMPRESSION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl::compression {

// Snappy framing format: a stream identifier, then chunks of at most 64 KiB of
// uncompressed data, each with a masked CRC-32C of its uncompressed bytes.
void SnappyFramedCompress(std::string_view input, std::string* out);
Status SnappyFramedUncompress(std::string_view input, size_t max_output, std::string* out);

// gzip (RFC 1952); the decoder also accepts several concatenated members.
Status GzipCompress(std::string_view input, std::string* out);
Status GzipUncompress(std::string_view input, size_t max_output, std::string* out);

}  // namespace elasticdl::compression

#endif  // ELASTICDL_COMMON_COMPRESSION_H_
