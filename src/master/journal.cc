#include "master/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "common/crc.h"
#include "common/endian.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl::master {
namespace {

constexpr size_t kHeaderSize = 8;  // length, masked CRC-32C

// A journal written before the journal was a log: one MasterJournal,
// rewritten whole. Read (once) where there is no log.
std::string SnapshotFilePath(const std::string& job_dir) { return JournalSnapshotFile(job_dir); }

StatusOr<std::string> Frame(const proto::JournalRecord& record, const std::string& path) {
  std::string bytes(kHeaderSize, '\0');
  if (!record.AppendToString(&bytes)) {
    return absl::InternalError(StrCat(path, ": cannot serialize a journal record"));
  }
  const std::string_view payload(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
  EncodeFixed32(bytes.data(), static_cast<uint32_t>(payload.size()));
  EncodeFixed32(bytes.data() + 4, crc::MaskCrc(crc::Crc32c(payload)));
  return bytes;
}

// Orders a queue's tasks front to back.
void SortByOrder(std::vector<const proto::JournalTask*>* tasks) {
  std::sort(tasks->begin(), tasks->end(),
            [](const proto::JournalTask* a, const proto::JournalTask* b) {
              return a->order() < b->order();
            });
}

}  // namespace

std::string JournalPath(const std::string& job_dir) { return JournalFile(job_dir); }

JournalLog::JournalLog(std::string path, int fd, int64_t size)
    : path_(std::move(path)), fd_(fd), snapshot_size_(size), size_(size) {}

JournalLog::~JournalLog() { ::close(fd_); }

StatusOr<std::unique_ptr<JournalLog>> JournalLog::Create(const std::string& job_dir,
                                                         const proto::MasterJournal& snapshot) {
  const std::string path = JournalPath(job_dir);
  proto::JournalRecord record;
  *record.mutable_snapshot() = snapshot;
  EDL_ASSIGN_OR_RETURN(std::string bytes, Frame(record, path));
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, StrCat(tmp, ": cannot create"));
  auto fail = [&](Status status) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return status;
  };
  if (Status written = WriteAll(fd, bytes, tmp); !written.ok()) return fail(written);
  if (::fsync(fd) != 0) return fail(ErrnoToStatus(errno, StrCat(tmp, ": fsync failed")));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(ErrnoToStatus(errno, StrCat(path, ": rename from ", tmp, " failed")));
  }
  // The descriptor now names the journal itself: records are appended to it.
  if (Status synced = SyncDirectory(job_dir); !synced.ok()) {
    ::close(fd);
    return synced;
  }
  return std::unique_ptr<JournalLog>(new JournalLog(path, fd, static_cast<int64_t>(bytes.size())));
}

Status JournalLog::Append(const proto::JournalChanges& changes) {
  proto::JournalRecord record;
  *record.mutable_changes() = changes;
  EDL_ASSIGN_OR_RETURN(std::string bytes, Frame(record, path_));
  EDL_RETURN_IF_ERROR(WriteAll(fd_, bytes, path_));
  if (::fdatasync(fd_) != 0) return ErrnoToStatus(errno, StrCat(path_, ": fdatasync failed"));
  size_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

JournalFold::JournalFold(proto::MasterJournal snapshot) : scalars_(std::move(snapshot)) {
  proto::TaskLedger* ledger = scalars_.mutable_ledger();
  for (proto::JournalTask& t : *ledger->mutable_tasks()) {
    const int64_t id = t.task().task_id();
    tasks_[id] = std::move(t);
  }
  ledger->clear_tasks();
  for (proto::Task& t : *ledger->mutable_finished_training()) {
    const int64_t id = t.task_id();
    finished_[id] = std::move(t);
  }
  ledger->clear_finished_training();
  for (proto::JournalProcess& p : *scalars_.mutable_workers()) {
    const int32_t id = p.id();
    workers_[id] = std::move(p);
  }
  scalars_.clear_workers();
}

void JournalFold::Apply(proto::JournalChanges changes) {
  // The fields a record leaves out keep their values.
  proto::TaskLedger ledger = std::move(*scalars_.mutable_ledger());
  scalars_ = std::move(*changes.mutable_scalars());
  scalars_.clear_workers();
  proto::LedgerChanges* lc = changes.mutable_ledger();
  proto::TaskLedger* next = scalars_.mutable_ledger();
  *next = std::move(*lc->mutable_scalars());
  next->set_rng_state(lc->rng_state().empty() ? std::move(*ledger.mutable_rng_state())
                                              : std::move(*lc->mutable_rng_state()));
  *next->mutable_evaluations() = std::move(*ledger.mutable_evaluations());
  for (proto::JournalEvaluation& e : *lc->mutable_evaluations()) {
    *next->add_evaluations() = std::move(e);
  }
  *next->mutable_prediction_task_ids() = std::move(*ledger.mutable_prediction_task_ids());

  for (proto::JournalTask& t : *lc->mutable_tasks()) {
    const int64_t id = t.task().task_id();
    tasks_[id] = std::move(t);
  }
  for (int64_t id : lc->tasks_gone()) tasks_.erase(id);
  for (proto::Task& t : *lc->mutable_finished_training()) {
    const int64_t id = t.task_id();
    finished_[id] = std::move(t);
  }
  for (int64_t id : lc->finished_gone()) finished_.erase(id);
  for (proto::JournalProcess& p : *changes.mutable_workers()) {
    const int32_t id = p.id();
    workers_[id] = std::move(p);
  }
  for (int32_t id : changes.workers_gone()) workers_.erase(id);
}

proto::MasterJournal JournalFold::Result() const {
  proto::MasterJournal journal = scalars_;
  std::vector<const proto::JournalTask*> training, other, held;
  for (const auto& [id, t] : tasks_) {
    if (t.holder() >= 0) {
      held.push_back(&t);
    } else {
      (t.training() ? training : other).push_back(&t);
    }
  }
  SortByOrder(&training);
  SortByOrder(&other);
  proto::TaskLedger* ledger = journal.mutable_ledger();
  for (const auto* list : {&training, &other, &held}) {
    for (const proto::JournalTask* t : *list) *ledger->add_tasks() = *t;
  }
  for (const auto& [id, t] : finished_) *ledger->add_finished_training() = t;
  for (const auto& [id, p] : workers_) *journal.add_workers() = p;
  return journal;
}

StatusOr<std::optional<proto::MasterJournal>> ReadJournal(const std::string& job_dir) {
  const std::string path = JournalPath(job_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoToStatus(errno, path);
    const std::string old = SnapshotFilePath(job_dir);
    if (::stat(old.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::optional<proto::MasterJournal>();
      return ErrnoToStatus(errno, old);
    }
    EDL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(old));
    proto::MasterJournal journal;
    if (!journal.ParseFromString(bytes)) {
      return absl::DataLossError(
          StrCat(old, ": not a valid master journal (", bytes.size(), " bytes)"));
    }
    return std::optional<proto::MasterJournal>(std::move(journal));
  }
  EDL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  std::optional<JournalFold> fold;
  size_t offset = 0;
  while (offset < bytes.size()) {
    const size_t left = bytes.size() - offset;
    if (left < kHeaderSize) break;  // a header cut short: the last append's
    const uint32_t length = DecodeFixed32(bytes.data() + offset);
    const uint32_t crc = crc::UnmaskCrc(DecodeFixed32(bytes.data() + offset + 4));
    if (length > left - kHeaderSize) break;  // a record cut short
    const std::string_view payload(bytes.data() + offset + kHeaderSize, length);
    const bool last = offset + kHeaderSize + length == bytes.size();
    if (crc::Crc32c(payload) != crc) {
      if (last && fold) break;  // the last append, half on disk
      return absl::DataLossError(
          StrCat(path, ": the record at byte ", offset, " is damaged (checksum mismatch)"));
    }
    proto::JournalRecord record;
    if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      return absl::DataLossError(
          StrCat(path, ": the record at byte ", offset, " is not a journal record"));
    }
    if (record.has_snapshot()) {
      fold.emplace(std::move(*record.mutable_snapshot()));
    } else if (record.has_changes() && fold) {
      fold->Apply(std::move(*record.mutable_changes()));
    } else {
      return absl::DataLossError(
          StrCat(path, ": the record at byte ", offset, " has changes but no snapshot before it"));
    }
    offset += kHeaderSize + length;
  }
  if (!fold) {
    return absl::DataLossError(
        StrCat(path, ": holds no snapshot (", bytes.size(), " bytes); not a master journal"));
  }
  return std::optional<proto::MasterJournal>(fold->Result());
}

}  // namespace elasticdl::master
