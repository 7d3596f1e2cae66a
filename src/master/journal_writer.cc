#include "master/journal_writer.h"

#include <algorithm>

#include "common/strings.h"

namespace elasticdl::master {

JournalWriter::JournalWriter(std::string job_dir, Source source, FailureCallback on_failure,
                             int64_t min_compaction_bytes)
    : job_dir_(std::move(job_dir)),
      source_(std::move(source)),
      min_compaction_bytes_(min_compaction_bytes),
      on_failure_(std::move(on_failure)),
      thread_([this] { Loop(); }) {}

JournalWriter::~JournalWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  requested_cv_.notify_all();
  thread_.join();
}

void JournalWriter::Request(uint64_t change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (change <= requested_) return;
    requested_ = change;
  }
  requested_cv_.notify_one();
}

Status JournalWriter::WaitDurable(uint64_t change) {
  std::unique_lock<std::mutex> lock(mu_);
  durable_cv_.wait(lock, [&] { return durable_ >= change || !failure_.ok(); });
  return failure_;
}

Status JournalWriter::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

int64_t JournalWriter::writes() {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

int64_t JournalWriter::snapshots() {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshots_;
}

StatusOr<uint64_t> JournalWriter::Write() {
  const bool compact =
      log_ == nullptr ||
      log_->size() - log_->snapshot_size() > std::max(log_->snapshot_size(), min_compaction_bytes_);
  if (compact) {
    auto [journal, holds] = source_.snapshot();
    log_.reset();
    EDL_ASSIGN_OR_RETURN(log_, JournalLog::Create(job_dir_, journal));
    std::lock_guard<std::mutex> lock(mu_);
    ++snapshots_;
    return holds;
  }
  auto [changes, holds] = source_.changes();
  EDL_RETURN_IF_ERROR(log_->Append(changes));
  return holds;
}

void JournalWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    requested_cv_.wait(lock, [&] { return requested_ > durable_ || stopping_; });
    if (requested_ <= durable_) return;  // stopping, everything written
    lock.unlock();
    // The record holds every change numbered up to the one Write returns,
    // the ones asked for since this loop woke included.
    StatusOr<uint64_t> written = Write();
    lock.lock();
    ++writes_;
    if (!written.ok()) {
      const Status& error = written.status();
      Status failure(error.code(),
                     StrCat("cannot write the job's journal: ", error.message(),
                            "; the job stops here rather than answer past what the journal "
                            "holds (once the journal can be written, the same command on the "
                            "same job directory resumes it)"));
      // The job learns first; then the waiters, and every later one.
      lock.unlock();
      if (on_failure_) on_failure_(failure);
      lock.lock();
      failure_ = failure;
      durable_cv_.notify_all();
      requested_cv_.wait(lock, [&] { return stopping_; });
      return;
    }
    durable_ = std::max(durable_, *written);
    durable_cv_.notify_all();
  }
}

}  // namespace elasticdl::master
