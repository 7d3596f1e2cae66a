// `elasticdl data convert`: copies records between RecordIO and TFRecord
// files byte for byte and in order, optionally re-compressing and sharding;
// CSV sources become tf.train.Example records.
#ifndef ELASTICDL_DATA_CONVERT_H_
#define ELASTICDL_DATA_CONVERT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/csv_import.h"
#include "elasticdl/data/record_file.h"

namespace elasticdl {

struct ConvertOptions {
  // Formats; when unset they come from the file extensions (.recordio,
  // .tfrecord; .csv for a CSV source).
  std::optional<RecordFormat> from;
  std::optional<RecordFormat> to;
  // How RecordIO output is compressed. Default snappy.
  Compressor compressor = Compressor::kSnappy;
  // RecordIO output chunk size; see RecordWriterOptions.
  size_t max_chunk_bytes = size_t{1} << 20;
  // 0: one output file. N > 0: shards of N records named DST-00000-of-0000K.
  uint64_t records_per_shard = 0;
  // For CSV sources.
  CsvOptions csv;
};

struct ConvertResult {
  uint64_t records = 0;
  std::vector<std::string> outputs;
};

StatusOr<ConvertResult> Convert(const std::string& src, const std::string& dst,
                                const ConvertOptions& options);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_CONVERT_H_
