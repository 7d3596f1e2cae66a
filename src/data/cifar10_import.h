// CIFAR-10 ("CIFAR-10 binary version") to shards of tf.train.Example records.
//
// The source directory holds data_batch_1.bin ... data_batch_5.bin (training)
// and test_batch.bin (test). Each file is a sequence of 3073-byte records: a
// label byte 0-9, then 3072 pixel bytes, the 1024 red values of the 32x32
// image in row-major order, then the 1024 green, then the 1024 blue.
// batches.meta.txt (the class names) is not needed.
//
// Every record becomes an Example with `image` float_list[3072] holding the
// pixels 0-255 in HWC order (row, column, channel: red, green, blue; read it
// as shape [32, 32, 3], Keras' channels-last layout) and `label`
// int64_list[1].
#ifndef ELASTICDL_DATA_CIFAR10_IMPORT_H_
#define ELASTICDL_DATA_CIFAR10_IMPORT_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

inline constexpr int kCifar10Side = 32;
inline constexpr int kCifar10Channels = 3;
inline constexpr size_t kCifar10Pixels = kCifar10Side * kCifar10Side * kCifar10Channels;
// A record of the binary files: the label byte and the pixels.
inline constexpr size_t kCifar10RecordBytes = 1 + kCifar10Pixels;
inline constexpr int kCifar10Classes = 10;

// The binary files' names, training files first, in the order they are read.
inline constexpr std::array<std::string_view, 5> kCifar10TrainFiles = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
    "data_batch_5.bin"};
inline constexpr std::string_view kCifar10TestFile = "test_batch.bin";

struct Cifar10ImportOptions {
  // Holds the six *.bin files (the cifar-10-batches-bin directory of
  // cifar-10-binary.tar.gz). Required.
  std::string source_dir;
  // Output: <output_dir>/train/data-0000K-of-0000N.<ext> and .../test/...
  std::string output_dir;
  RecordWriterOptions writer;
  // Records per shard. Default 10000 (5 training shards, 1 test shard). 0
  // writes one file per split.
  uint64_t records_per_shard = 10000;
  // If > 0, only the first N images of each split (for quick tries and tests).
  uint64_t limit = 0;
};

struct Cifar10ImportResult {
  uint64_t train_records = 0;
  uint64_t test_records = 0;
  std::vector<std::string> outputs;
};

// Converts both splits. All six files must be there (NOT_FOUND names the
// missing ones). DATA_LOSS names the file and record for a file that is empty
// or not a whole number of records (a truncated file) and for a label byte
// above 9. On any error no output file is left behind.
StatusOr<Cifar10ImportResult> ImportCifar10(const Cifar10ImportOptions& options);

// The serialized Example of one 3073-byte record of the binary format
// (`record.size()` must be kCifar10RecordBytes). DATA_LOSS naming `file` and
// the 0-based `index` if the label is not 0-9.
StatusOr<std::string> Cifar10Example(std::string_view file, uint64_t index,
                                     std::string_view record);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_CIFAR10_IMPORT_H_
