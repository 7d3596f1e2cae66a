// The files of a job directory, named in one place (as LevelDB's
// filename.h names a database's). The job directory is how the client, the
// master, its restarts, the dashboard and experiments find one another and
// what a job left behind; these are its contract.
#ifndef ELASTICDL_COMMON_JOB_DIR_H_
#define ELASTICDL_COMMON_JOB_DIR_H_

#include <unistd.h>

#include <string>

#include "common/environment.h"
#include "common/file.h"

namespace elasticdl {

// The job as submitted (proto::JobSpec, text format).
inline std::string JobSpecFile(const std::string& job_dir) { return job_dir + "/job.pbtxt"; }
// The job's token, certificate, key and CA, readable by its owner only
// (rpc/job_credentials.h).
inline std::string CredentialsFile(const std::string& job_dir) { return job_dir + "/credentials"; }
// The master's journal (master/journal.h), and the single snapshot file an
// older master kept instead.
inline std::string JournalFile(const std::string& job_dir) { return job_dir + "/journal.log"; }
inline std::string JournalSnapshotFile(const std::string& job_dir) {
  return job_dir + "/journal.pb";
}
// The master's address, written once it serves.
inline std::string MasterAddressFile(const std::string& job_dir) {
  return job_dir + "/master.addr";
}
// Where the master serves now: the address its newest start wrote in the
// job directory (a master started again on another node serves elsewhere),
// else `fallback` (none written yet, or a job directory this host cannot
// read).
inline std::string CurrentMasterAddress(const std::string& job_dir, const std::string& fallback) {
  if (job_dir.empty()) return fallback;
  StatusOr<std::string> address = ReadFileToString(MasterAddressFile(job_dir));
  return address.ok() && !address->empty() ? *address : fallback;
}
// The dashboard's URL, written once it serves.
inline std::string DashboardUrlFile(const std::string& job_dir) {
  return job_dir + "/dashboard.url";
}
// The job's outcome (proto::GetJobStatusResponse, text format), written by
// the master as it ends.
inline std::string FinalStatusFile(const std::string& job_dir) { return job_dir + "/status.pbtxt"; }
// The event log (master/event_log.h).
inline std::string EventLogFile(const std::string& job_dir) { return job_dir + "/events.jsonl"; }
// The parameter servers' checkpoints, unless the job names another folder.
inline std::string CheckpointsDir(const std::string& job_dir) { return job_dir + "/checkpoints"; }
// The Unix sockets the job's servers also listen on, for callers on the same
// machine (rpc/job_credentials.h).
inline std::string SocketsDir(const std::string& job_dir) { return job_dir + "/sockets"; }
// The processes' logs, on backends that write them to files.
inline std::string LogsDir(const std::string& job_dir) { return job_dir + "/logs"; }
// Why a server or worker process ended in error, in its own words, for the
// master to say (where the job directory is shared with it): `process` is
// its label, e.g. "worker-3".
inline std::string ExitReasonFile(const std::string& job_dir, const std::string& process) {
  return job_dir + "/exits/" + process;
}

// Where jobs given no --job_dir get theirs (and where `elasticdl job`
// looks for the newest): <temp_dir>/elasticdl-jobs-<uid>, this user's alone
// (CreatePrivateDirectory).
inline std::string DefaultJobsRoot(const Environment& env) {
  return env.temp_dir + "/elasticdl-jobs-" + std::to_string(::getuid());
}

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_JOB_DIR_H_
