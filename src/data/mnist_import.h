// Fashion-MNIST / MNIST (gzipped IDX files) to shards of tf.train.Example
// records with seed 001's schema: `image` float[28,28] holding 0-255 and
// `label` int64[1].
#ifndef ELASTICDL_DATA_MNIST_IMPORT_H_
#define ELASTICDL_DATA_MNIST_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

struct MnistImportOptions {
  // Holds train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
  // t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz. Default: Debian's
  // dataset-fashion-mnist package.
  std::string source_dir = "/usr/share/datasets/fashion-mnist";
  // Output: <output_dir>/train/data-0000K-of-0000N.<ext> and .../test/...
  std::string output_dir;
  RecordWriterOptions writer;
  // Records per shard. Default 10000 (6 training shards, 1 test shard).
  uint64_t records_per_shard = 10000;
  // If > 0, only the first N images of each split (for quick tries and tests).
  uint64_t limit = 0;
};

struct MnistImportResult {
  uint64_t train_records = 0;
  uint64_t test_records = 0;
  std::vector<std::string> outputs;
};

StatusOr<MnistImportResult> ImportMnist(const MnistImportOptions& options);

// An IDX file: magic (0, 0, 0x08 = unsigned bytes, number of dimensions),
// big-endian dimension sizes, then the data.
struct Idx {
  std::vector<uint32_t> dims;
  std::string data;  // the whole file, header included
  size_t header_size = 0;
};

// Checks and takes apart the (decompressed) bytes of an IDX file with
// `want_dims` dimensions; `name` is used in error messages.
StatusOr<Idx> ParseIdx(std::string_view name, std::string data, uint32_t want_dims);

// The tf.train.Example for one 28x28 image (bytes 0-255) and its label.
std::string MnistExample(const uint8_t* pixels, int64_t label);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_MNIST_IMPORT_H_
