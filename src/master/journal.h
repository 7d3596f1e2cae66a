// The master's journal: its durable state (proto::MasterJournal) as a log of
// records in <job_dir>/journal.log, so that a restarted master resumes the
// job. The first record is a snapshot of the whole state; each record after
// it holds what changed since the one before (proto::JournalChanges), so a
// write costs what changed, not what the job holds. Starting the log anew
// with a snapshot compacts it.
//
// A record is framed as its length (fixed32), the masked CRC-32C of its
// bytes (fixed32), then the bytes of a proto::JournalRecord. A record cut
// short at the end of the file (a crash in the middle of an append) was
// never acknowledged and is ignored; a damaged record before the last is
// DATA_LOSS.
#ifndef ELASTICDL_MASTER_JOURNAL_H_
#define ELASTICDL_MASTER_JOURNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

// <job_dir>/journal.log.
std::string JournalPath(const std::string& job_dir);

// The journal open for appending.
class JournalLog {
 public:
  // Starts the log anew with `snapshot` as its only record, atomically and
  // durably: the record goes to a temporary file beside the journal, which
  // is synced and renamed over it, and the directory is synced. After a
  // crash at any point the journal is the old log or the new one, whole.
  // Errors name the file.
  static StatusOr<std::unique_ptr<JournalLog>> Create(const std::string& job_dir,
                                                      const proto::MasterJournal& snapshot);
  ~JournalLog();
  JournalLog(const JournalLog&) = delete;
  JournalLog& operator=(const JournalLog&) = delete;

  // Appends `changes` as a record and syncs it: durable once OK. Errors
  // name the file.
  Status Append(const proto::JournalChanges& changes);

  // Bytes in the log, and in its snapshot.
  int64_t size() const { return size_; }
  int64_t snapshot_size() const { return snapshot_size_; }

 private:
  JournalLog(std::string path, int fd, int64_t size);

  const std::string path_;
  const int fd_;
  const int64_t snapshot_size_;
  int64_t size_;
};

// A log's records folded into the state they describe: a snapshot, then
// each record's changes in order.
class JournalFold {
 public:
  explicit JournalFold(proto::MasterJournal snapshot);
  void Apply(proto::JournalChanges changes);
  // The state: the ledger lists queued tasks in queue order (training,
  // then evaluation and prediction), then held tasks.
  proto::MasterJournal Result() const;

 private:
  // The snapshot's or the last record's scalar fields; the lists are below.
  proto::MasterJournal scalars_;
  std::map<int64_t, proto::JournalTask> tasks_;
  std::map<int64_t, proto::Task> finished_;
  std::map<int32_t, proto::JournalProcess> workers_;
};

// The journal of `job_dir`, folded; nullopt when there is none (a job's
// first master). DATA_LOSS naming the file and the record's offset when it
// cannot be read.
StatusOr<std::optional<proto::MasterJournal>> ReadJournal(const std::string& job_dir);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOURNAL_H_
