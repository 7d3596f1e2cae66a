// Writes a shard's checkpoints in the background, so that training never
// waits for the disk: the store hands over a snapshot (tensors already
// copied under its lock); one thread encodes it, writes it (checkpoint.h)
// and applies the retention policy. While a write is in flight, new
// snapshots are dropped (and logged): the next multiple of checkpoint_steps
// brings another.
//
// Thread-safe. The destructor waits for the write in flight.
#ifndef ELASTICDL_PS_CHECKPOINT_WRITER_H_
#define ELASTICDL_PS_CHECKPOINT_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/histogram.h"
#include "elasticdl/status.h"
#include "ps/shard_state.h"

namespace elasticdl::ps {

// What a writer did since it started.
struct CheckpointStats {
  Histogram seconds;    // of each checkpoint written: encoding, writing, retention
  int64_t failed = 0;   // writes that failed
  int64_t skipped = 0;  // snapshots dropped while a write was in flight
};

struct CheckpointWriterOptions {
  // Where checkpoints go (see checkpoint.h for the layout).
  std::string dir;
  // Shard identity, for file names, retention and log lines.
  int ps_id = 0;
  int num_ps = 1;
  // Keep the newest this many checkpoints of this shard; 0 keeps all.
  int keep_max = 0;
  // Who writes, for log lines and errors; empty: "parameter server <ps_id>".
  std::string owner;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(CheckpointWriterOptions options);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Queues `snapshot` for writing and returns true, unless a write is in
  // flight or its version is not newer than the last one written or queued
  // (then it is dropped and false returned).
  bool Offer(ShardSnapshot snapshot);

  // Waits until nothing is queued or being written.
  void Flush();

  // Writes `snapshot` (unless its version is written already) and waits
  // for it: the write's status.
  Status WriteNow(ShardSnapshot snapshot);

  // The outcome of the last write (OK before any), and its version (-1
  // before any succeeded).
  Status last_status() const;
  int64_t last_written_version() const;
  CheckpointStats stats() const;

 private:
  void Loop();
  Status Write(ShardSnapshot snapshot);

  const CheckpointWriterOptions options_;
  const std::string owner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<ShardSnapshot> queued_;
  bool writing_ = false;
  bool stop_ = false;
  int64_t newest_offered_ = -1;
  int64_t last_written_ = -1;
  Status last_status_;
  CheckpointStats stats_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_CHECKPOINT_WRITER_H_
