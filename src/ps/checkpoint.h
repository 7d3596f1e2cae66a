// Parameter-server checkpoint files.
//
// Layout: `<dir>/version-<V>/ps-<i>-of-<n>.ckpt`, one file per shard i of a
// job with n shards, holding that shard's ShardCheckpoint at model version
// V. A file is
//
//   "EDLCKPT1" | frame | frame ...
//
// where a frame is: payload length (uint64 LE) | masked CRC-32C of the
// payload (uint32 LE) | payload. The first payload is the serialized
// ShardCheckpoint without its embedding_blocks; each of its
// embedding_block_count blocks follows in a frame of its own (a table may be
// larger than one protobuf message can be).
// so that truncation and corruption are detected (a protobuf alone may parse
// from a truncated prefix). Files are written atomically: a reader sees a
// whole file or none.
//
// No LibTorch here: files and protos only. Functions are thread-compatible:
// one writer per shard, any number of readers.
#ifndef ELASTICDL_PS_CHECKPOINT_H_
#define ELASTICDL_PS_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::ps {

// `<dir>/version-<version>`.
std::string CheckpointVersionDir(const std::string& dir, int64_t version);
// `<dir>/version-<version>/ps-<ps_id>-of-<num_ps>.ckpt`.
std::string CheckpointPath(const std::string& dir, int64_t version, int ps_id, int num_ps);

// Writes `*checkpoint` to CheckpointPath(dir, its version, ps_id, num_ps):
// a temporary file, fsynced, renamed over the final name, and the directory
// fsynced. Creates directories as needed. Sets embedding_block_count and
// leaves the rest as it was (the blocks are moved out and back, not copied).
Status WriteCheckpoint(const std::string& dir, proto::ShardCheckpoint* checkpoint);

// Reads one checkpoint file. DATA_LOSS naming the file when it is truncated,
// corrupt or not a checkpoint; NOT_FOUND when it does not exist.
StatusOr<proto::ShardCheckpoint> ReadCheckpoint(const std::string& path);

// Keeps the newest `keep_max` checkpoints of shard `ps_id` of `num_ps` in
// `dir` (0: all), deleting this shard's older files and the version
// directories left empty. Other shards' files are left alone.
Status RetainCheckpoints(const std::string& dir, int ps_id, int num_ps, int keep_max);

// Recovery: the newest readable checkpoint of shard `ps_id` of `num_ps`.
// A corrupt or truncated newest file is skipped for the next older one (its
// applied minibatches tell the master what to redo, so an older state is as
// exact as a newer one); the skipped files' errors go to `*skipped` when
// given. NOT_FOUND when there is none; the newest file's DATA_LOSS when all
// are unreadable.
StatusOr<proto::ShardCheckpoint> ReadNewestCheckpoint(const std::string& dir, int ps_id, int num_ps,
                                                      std::vector<std::string>* skipped = nullptr);

// Initializing a new job: the files of the newest version in `dir` holding a
// complete set ps-0..m-1-of-m for some m (the smallest m when several are
// complete), in shard order. No fallback: a corrupt file in that set is
// DATA_LOSS naming it. NOT_FOUND, naming `dir`, when no version is complete.
StatusOr<std::vector<proto::ShardCheckpoint>> ReadNewestCompleteCheckpoint(const std::string& dir);

// The parameters and buffers of `shards` (all the files of one version), at
// their version: what a trained model's parameters.pb holds.
proto::ModelValues ModelValuesOf(const std::vector<proto::ShardCheckpoint>& shards);

// ModelValuesOf the set ReadNewestCompleteCheckpoint reads, reading of each
// file only its first frame: the embedding tables' rows, which may be most
// of the files, are not read. Its errors are ReadNewestCompleteCheckpoint's.
StatusOr<proto::ModelValues> ReadNewestCompleteModelValues(const std::string& dir);

// Which set ReadNewestCompleteCheckpoint would read: its version and number
// of shards, from the file names alone. NOT_FOUND as there.
struct CompleteCheckpoint {
  int64_t version = 0;
  int num_ps = 0;
};
StatusOr<CompleteCheckpoint> FindNewestCompleteCheckpoint(const std::string& dir);

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_CHECKPOINT_H_
