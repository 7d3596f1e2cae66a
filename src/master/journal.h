// The master's journal: its durable state (proto::MasterJournal) in one file,
// <job_dir>/journal.pb, rewritten whole after every change so that a
// restarted master resumes the job.
#ifndef ELASTICDL_MASTER_JOURNAL_H_
#define ELASTICDL_MASTER_JOURNAL_H_

#include <optional>
#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

// <job_dir>/journal.pb.
std::string JournalPath(const std::string& job_dir);

// Replaces the journal with `journal`, atomically and durably: the bytes go
// to a temporary file beside it, which is synced and renamed over the
// journal, and the directory is synced. After a crash at any point the file
// holds the old or the new journal, never a part. Errors name the file.
Status WriteJournal(const std::string& job_dir, const proto::MasterJournal& journal);

// The journal of `job_dir`; nullopt when there is none (a job's first
// master). DATA_LOSS naming the file when it cannot be parsed.
StatusOr<std::optional<proto::MasterJournal>> ReadJournal(const std::string& job_dir);

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_JOURNAL_H_
