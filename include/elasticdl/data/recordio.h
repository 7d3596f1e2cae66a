// RecordIO, the record format of the original ElasticDL (wangkuiyi/recordio).
//
// A file is a sequence of chunks. Each chunk is a 20-byte header of five
// little-endian uint32 -- magic 0x01020304, CRC-32 (IEEE) of the stored
// payload, compressor (0 none, 1 snappy framing format, 2 gzip), stored
// payload size, record count -- followed by the stored payload. Uncompressed,
// the payload is each record as a little-endian uint32 length and its bytes.
// Files are appendable: concatenating RecordIO files gives a RecordIO file.
#ifndef ELASTICDL_DATA_RECORDIO_H_
#define ELASTICDL_DATA_RECORDIO_H_

#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

// One chunk as its header describes it.
struct RecordIOChunkInfo {
  uint64_t offset = 0;    // of the header in the file
  uint32_t checksum = 0;  // CRC-32 of the stored payload
  Compressor compressor = Compressor::kNone;
  uint32_t stored_size = 0;  // payload bytes on disk
  uint32_t num_records = 0;
  uint64_t first_record = 0;  // index in the file of the chunk's first record
};

// A RecordIO file with its chunk index. Scan() reads and decompresses only the
// chunks that hold the requested range, one at a time.
class RecordIOFile : public RecordFile {
 public:
  static StatusOr<std::unique_ptr<RecordIOFile>> Open(const std::string& path,
                                                      const Options& options = Options());
  virtual const std::vector<RecordIOChunkInfo>& chunks() const = 0;
};

// Writes RecordIO. A chunk is written when it reaches max_chunk_bytes of
// record data, on FinishChunk(), and on Close().
class RecordIOWriter : public RecordWriter {
 public:
  static StatusOr<std::unique_ptr<RecordIOWriter>> Create(const std::string& path,
                                                          const Options& options = Options());
  // Writes the records buffered so far as one chunk (nothing if none are).
  virtual Status FinishChunk() = 0;
  // Compressor for the chunks written from now on.
  virtual void set_compressor(Compressor compressor) = 0;
};

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_RECORDIO_H_
