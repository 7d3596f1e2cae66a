// Checksum repair for structure-aware fuzzing. A random mutation almost never
// leaves a CRC matching its bytes, so without help a fuzzer stops at the first
// checksum check and never reaches the code behind it (decompression, record
// splitting). Each function rewrites, in place, the stored checksums of the
// framing it walks so that they match the bytes they cover. It follows the
// framing only as far as it is well formed and leaves everything else alone,
// so the parser still sees every other kind of corruption.
#ifndef ELASTICDL_FUZZ_CHECKSUM_FIXUP_H_
#define ELASTICDL_FUZZ_CHECKSUM_FIXUP_H_

#include <string>

namespace elasticdl::fuzz {

// RecordIO: each chunk's CRC-32 of its stored payload, after repairing the
// frame checksums inside snappy-compressed payloads. Stops at the first chunk
// with a bad magic number or a payload running past the end.
void FixRecordIOChecksums(std::string* file);

// TFRecord: each record's length CRC and data CRC. Stops at the first record
// whose data runs past the end (after repairing its length CRC).
void FixTFRecordChecksums(std::string* file);

// Snappy framing format: the CRC-32C of each data chunk's uncompressed bytes.
// Compressed chunks that do not decompress are left as they are.
void FixSnappyFramedChecksums(std::string* stream);

}  // namespace elasticdl::fuzz

#endif  // ELASTICDL_FUZZ_CHECKSUM_FIXUP_H_
