// The record files behind --training_data, --validation_data and
// --prediction_data, and their division into tasks.
#ifndef ELASTICDL_MASTER_DATA_SOURCE_H_
#define ELASTICDL_MASTER_DATA_SOURCE_H_

#include <cstdint>
#include <string>
#include <tuple>
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

  friend bool operator==(const Range& a, const Range& b) {
    return a.start == b.start && a.end == b.end && a.file == b.file;
  }
  // An order for sets and maps (the numbers first: ranges mostly share a file).
  friend bool operator<(const Range& a, const Range& b) {
    return std::tie(a.start, a.end, a.file) < std::tie(b.start, b.end, b.file);
  }
};

// How a shard's records are cut into tasks of at most `records_per_task`.
enum class TaskSizes {
  // `records_per_task` each, the shard's remainder as its last task.
  kFullFirst,
  // As few tasks, their records dealt evenly (sizes differ by at most one
  // record), so that the tasks of a file have the same number of
  // minibatches (one apart only where the smaller size is a whole number
  // of minibatches). Workers in lockstep (synchronous steps) then end their
  // tasks on the same step: a file's short last task would put one worker's
  // task boundaries steps away from the others', and each would wait for
  // the other's hand-over in turn.
  kEven,
};

// Cuts every shard into ranges of at most `records_per_task` records.
std::vector<Range> SplitIntoTasks(const std::vector<Shard>& shards, int64_t records_per_task,
                                  TaskSizes sizes = TaskSizes::kFullFirst);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_DATA_SOURCE_H_
