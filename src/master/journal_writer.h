// Writes the master's journal on a thread of its own (group commit).
//
// The job's state changes under its lock; each change takes the next
// sequence number and asks for a write (Request). This thread takes a
// snapshot of the state, with the newest change it holds, writes it
// durably (WriteJournal) and wakes whoever waits for any change up to that
// one. So no lock is held while the disk works, and the changes made while
// one write runs share the next: the cost of durability no longer grows
// with the number of callers. A call whose answer changes accounting waits
// for its change (WaitDurable), outside the lock, before it answers.
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
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

class JournalWriter {
 public:
  // The journal as of now, and the newest change (sequence number) it
  // holds. Called on the writer's thread; takes the state's lock itself.
  using Snapshot = std::function<std::pair<proto::MasterJournal, uint64_t>()>;
  // The first failed write's status, which names the journal.
  using FailureCallback = std::function<void(const Status&)>;

  // Writes <job_dir>/journal.pb (journal.h).
  JournalWriter(std::string job_dir, Snapshot snapshot, FailureCallback on_failure);
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
  // Journal writes done, for the benchmarks' and tests' accounting.
  int64_t writes();

 private:
  void Loop();

  const std::string job_dir_;
  const Snapshot snapshot_;
  const FailureCallback on_failure_;
  std::mutex mu_;
  std::condition_variable requested_cv_;
  std::condition_variable durable_cv_;
  uint64_t requested_ = 0;
  uint64_t durable_ = 0;
  int64_t writes_ = 0;
  bool stopping_ = false;
  Status failure_;
  std::thread thread_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOURNAL_WRITER_H_
