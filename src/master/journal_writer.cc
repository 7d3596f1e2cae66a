#include "master/journal_writer.h"

#include <algorithm>

#include "common/strings.h"
#include "master/journal.h"

namespace elasticdl::master {

JournalWriter::JournalWriter(std::string job_dir, Snapshot snapshot, FailureCallback on_failure)
    : job_dir_(std::move(job_dir)),
      snapshot_(std::move(snapshot)),
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

void JournalWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    requested_cv_.wait(lock, [&] { return requested_ > durable_ || stopping_; });
    if (requested_ <= durable_) return;  // stopping, everything written
    lock.unlock();
    // The snapshot holds every change numbered up to `holds`, the ones
    // asked for since this loop woke included.
    auto [journal, holds] = snapshot_();
    Status written = WriteJournal(job_dir_, journal);
    lock.lock();
    ++writes_;
    if (!written.ok()) {
      Status failure(written.code(), StrCat("cannot write the job's journal: ", written.message(),
                                            "; a restarted master could not resume the job "
                                            "exactly, so it stops here"));
      // The job learns first; then the waiters, and every later one.
      lock.unlock();
      if (on_failure_) on_failure_(failure);
      lock.lock();
      failure_ = failure;
      durable_cv_.notify_all();
      requested_cv_.wait(lock, [&] { return stopping_; });
      return;
    }
    durable_ = std::max(durable_, holds);
    durable_cv_.notify_all();
  }
}

}  // namespace elasticdl::master
