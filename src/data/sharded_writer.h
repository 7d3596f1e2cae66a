// Writes records to one file or to shards of a fixed number of records:
// DST "out/train.recordio" with 3 shards becomes out/train-00000-of-00003.recordio,
// out/train-00001-of-00003.recordio, ...
//
// Files are written under a ".partial" suffix, synced, and renamed only by a
// successful Close(); a writer destroyed before that removes them, so a failed
// conversion leaves no half-written output behind.
#ifndef ELASTICDL_DATA_SHARDED_WRITER_H_
#define ELASTICDL_DATA_SHARDED_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

class ShardedWriter {
 public:
  // `records_per_shard` 0 writes one file at `path`. `total_records` (needed
  // for the "-of-" count when sharding) must be the number of records that
  // will be written.
  static StatusOr<std::unique_ptr<ShardedWriter>> Create(const std::string& path,
                                                         const RecordWriterOptions& options,
                                                         uint64_t records_per_shard,
                                                         uint64_t total_records);

  Status Write(std::string_view record);
  // Closes the last shard; fails if fewer or more records than announced
  // were written.
  Status Close();
  // Final names of the files written, in order.
  const std::vector<std::string>& paths() const { return paths_; }

  // The name of shard `index` of `count` for `path`.
  static std::string ShardPath(const std::string& path, uint64_t index, uint64_t count);

  ~ShardedWriter();

 private:
  ShardedWriter(std::string path, const RecordWriterOptions& options, uint64_t per_shard,
                uint64_t total);
  Status OpenNext();

  std::string path_;
  RecordWriterOptions options_;
  uint64_t per_shard_;
  uint64_t total_;
  uint64_t num_shards_;
  uint64_t written_ = 0;
  std::unique_ptr<RecordWriter> current_;
  bool closed_ok_ = false;
  std::vector<std::string> paths_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_SHARDED_WRITER_H_
