// Writes the master's journal (journal.h) on a thread of its own, with
// group commit.
//
// The job's state changes under its lock; each change takes the next
// sequence number and asks for a write (Request). This thread takes what
// changed since its last write, with the newest change that holds, appends
// it to the log as one record, syncs it, and wakes whoever waits for any
// change up to that one. So no lock is held while the disk works, the
// changes made while one write runs share the next, and a write costs what
// changed rather than what the job holds. A call whose answer changes
// accounting waits for its change (WaitDurable), outside the lock, before
// it answers.
//
// The first write starts the log with a snapshot of the whole state; once
// the records after it outgrow the snapshot (and a floor), the next write
// is a snapshot again, starting a new log: the log stays within a few times
// the state, and a restarted master reads little more than a snapshot.
//
// A write that fails is final: the first error fails that wait and every
// later one, and is handed to `on_failure` once, so that the job ends
// saying why rather than answering past a journal a restarted master could
// not resume from.
#ifndef ELASTICDL_MASTER_JOURNAL_WRITER_H_
#define ELASTICDL_MASTER_JOURNAL_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "master/journal.h"

namespace elasticdl::master {

class JournalWriter {
 public:
  // The state's records, each with the newest change (sequence number) it
  // holds. Called on the writer's thread; they take the state's lock
  // themselves.
  struct Source {
    // The whole state; the next changes are those after it.
    std::function<std::pair<proto::MasterJournal, uint64_t>()> snapshot;
    // What changed since the last snapshot or changes taken.
    std::function<std::pair<proto::JournalChanges, uint64_t>()> changes;
  };
  // The first failed write's status, which names the journal.
  using FailureCallback = std::function<void(const Status&)>;

  // Writes <job_dir>/journal.log (journal.h). Records after a snapshot
  // beyond max(snapshot's size, `min_compaction_bytes`) start a new log.
  JournalWriter(std::string job_dir, Source source, FailureCallback on_failure,
                int64_t min_compaction_bytes = 4 << 20);
  // Writes the changes asked for and not yet written, then stops.
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Change `change` (numbers only grow) wants writing. Does not block on
  // the disk: callers may hold the state's lock.
  void Request(uint64_t change);
  // Blocks until change `change` is durable, or a write has failed.
  Status WaitDurable(uint64_t change);
  // OK, or the first failed write's status.
  Status status();
  // Journal writes done, and of those the snapshots, for the benchmarks'
  // and tests' accounting.
  int64_t writes();
  int64_t snapshots();

 private:
  void Loop();
  // One write: a snapshot or the changes. Returns the newest change it holds.
  StatusOr<uint64_t> Write();

  const std::string job_dir_;
  const Source source_;
  const int64_t min_compaction_bytes_;
  // The writer thread's own.
  std::unique_ptr<JournalLog> log_;
  const FailureCallback on_failure_;
  std::mutex mu_;
  std::condition_variable requested_cv_;
  std::condition_variable durable_cv_;
  uint64_t requested_ = 0;
  uint64_t durable_ = 0;
  int64_t writes_ = 0;
  int64_t snapshots_ = 0;
  bool stopping_ = false;
  Status failure_;
  std::thread thread_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOURNAL_WRITER_H_
