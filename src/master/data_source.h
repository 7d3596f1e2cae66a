// The record files behind --training_data, --validation_data and
// --prediction_data, and their division into tasks.
#ifndef ELASTICDL_MASTER_DATA_SOURCE_H_
#define ELASTICDL_MASTER_DATA_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::master {

// A record file and how many records it holds.
struct Shard {
  std::string file;
  int64_t num_records = 0;
};

// The files named by `spec`: a record file, a directory (its regular files,
// hidden and unfinished `.partial` ones skipped), or a glob pattern. Sorted,
// so every process agrees on the order. NOT_FOUND when nothing matches.
StatusOr<std::vector<std::string>> ExpandDataPath(const std::string& spec);

// Opens and indexes each file (RecordIO or TFRecord, by extension or
// contents). A corrupt file is an error naming it: data is checked before a
// job starts, not halfway through.
StatusOr<std::vector<Shard>> OpenShards(const std::vector<std::string>& files,
                                        const std::string& flag);

// Records [start, end) of one file.
struct Range {
  std::string file;
  int64_t start = 0;
  int64_t end = 0;
};

// Cuts every shard into ranges of at most `records_per_task` records.
std::vector<Range> SplitIntoTasks(const std::vector<Shard>& shards, int64_t records_per_task);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_DATA_SOURCE_H_
