#include "ps/checkpoint_writer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "common/strings.h"
#include "ps/checkpoint.h"

namespace elasticdl::ps {

CheckpointWriter::CheckpointWriter(CheckpointWriterOptions options)
    : options_(std::move(options)),
      owner_(options_.owner.empty() ? StrCat("parameter server ", options_.ps_id) : options_.owner),
      thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool CheckpointWriter::Offer(ShardSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshot.version <= newest_offered_) return false;
  if (writing_ || queued_.has_value()) {
    ++stats_.skipped;
    spdlog::warn("{}: checkpoint of version {} skipped: the previous one is still being written",
                 owner_, snapshot.version);
    return false;
  }
  newest_offered_ = snapshot.version;
  queued_ = std::move(snapshot);
  cv_.notify_all();
  return true;
}

void CheckpointWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !writing_ && !queued_.has_value(); });
}

Status CheckpointWriter::WriteNow(ShardSnapshot snapshot) {
  const int64_t version = snapshot.version;
  Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_written_ == version) return absl::OkStatus();
  }
  Offer(std::move(snapshot));
  Flush();
  std::lock_guard<std::mutex> lock(mu_);
  if (last_written_ == version) return absl::OkStatus();
  if (!last_status_.ok()) return last_status_;
  return absl::InternalError(StrCat(owner_, ": the checkpoint of version ", version,
                                    " was not written (an older version was offered?)"));
}

Status CheckpointWriter::last_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_status_;
}

int64_t CheckpointWriter::last_written_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_written_;
}

CheckpointStats CheckpointWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CheckpointWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || queued_.has_value(); });
    if (!queued_.has_value()) return;  // stopping with nothing queued
    ShardSnapshot snapshot = std::move(*queued_);
    queued_.reset();
    writing_ = true;
    lock.unlock();
    const int64_t version = snapshot.version;
    const auto start = std::chrono::steady_clock::now();
    Status s = Write(std::move(snapshot));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    writing_ = false;
    last_status_ = s;
    if (s.ok()) {
      last_written_ = version;
      stats_.seconds.Observe(seconds);
    } else {
      ++stats_.failed;
    }
    cv_.notify_all();
  }
}

Status CheckpointWriter::Write(ShardSnapshot snapshot) {
  const auto start = std::chrono::steady_clock::now();  // for the log line
  proto::ShardCheckpoint checkpoint;
  const int64_t version = snapshot.version;
  Status s = EncodeSnapshot(std::move(snapshot), &checkpoint);
  if (s.ok()) s = WriteCheckpoint(options_.dir, &checkpoint);
  if (s.ok())
    s = RetainCheckpoints(options_.dir, options_.ps_id, options_.num_ps, options_.keep_max);
  if (!s.ok()) {
    spdlog::error("{}: checkpoint of version {} failed: {}", owner_, version,
                  std::string(s.message()));
    return s;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  spdlog::info("{}: checkpoint of version {} written in {} ms ({})", owner_, version, ms,
               CheckpointPath(options_.dir, version, options_.ps_id, options_.num_ps));
  return absl::OkStatus();
}

}  // namespace elasticdl::ps
