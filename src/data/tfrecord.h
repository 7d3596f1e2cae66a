// TFRecord, TensorFlow's record format: each record is a little-endian uint64
// length, the masked CRC-32C of those 8 bytes, the data, and the masked
// CRC-32C of the data.
#ifndef ELASTICDL_DATA_TFRECORD_H_
#define ELASTICDL_DATA_TFRECORD_H_

#include <memory>

#include "common/file.h"
#include "elasticdl/data/record_file.h"

namespace elasticdl::tfrecord {

constexpr size_t kHeaderSize = 12;  // length + its CRC
constexpr size_t kFooterSize = 4;   // CRC of the data

// Opens and indexes a TFRecord file: walks the length fields (checking their
// CRCs) and remembers where each record starts.
StatusOr<std::unique_ptr<RecordFile>> OpenFile(std::unique_ptr<RandomAccessFile> file);

// Appends one framed record to `*out`.
void EncodeRecord(std::string_view data, std::string* out);

// Checks a 12-byte header; on success stores the data length.
Status DecodeHeader(std::string_view header, uint64_t* length);
// Checks the data against its stored footer.
Status CheckData(std::string_view data, std::string_view footer);

StatusOr<std::unique_ptr<RecordWriter>> CreateWriter(const std::string& path);

}  // namespace elasticdl::tfrecord

#endif  // ELASTICDL_DATA_TFRECORD_H_
