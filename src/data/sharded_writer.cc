#include "data/sharded_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl {
namespace {

constexpr char kPartial[] = ".partial";

}  // namespace

ShardedWriter::ShardedWriter(std::string path, const RecordWriterOptions& options,
                             uint64_t per_shard, uint64_t total)
    : path_(std::move(path)),
      options_(options),
      per_shard_(per_shard),
      total_(total),
      num_shards_(per_shard == 0 ? 1 : std::max<uint64_t>(1, (total + per_shard - 1) / per_shard)) {
}

StatusOr<std::unique_ptr<ShardedWriter>> ShardedWriter::Create(const std::string& path,
                                                               const RecordWriterOptions& options,
                                                               uint64_t records_per_shard,
                                                               uint64_t total_records) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) EDL_RETURN_IF_ERROR(CreateDirectories(parent.string()));
  std::unique_ptr<ShardedWriter> w(
      new ShardedWriter(path, options, records_per_shard, total_records));
  EDL_RETURN_IF_ERROR(w->OpenNext());
  return w;
}

ShardedWriter::~ShardedWriter() {
  if (!closed_ok_) {
    current_.reset();
    for (const std::string& p : paths_) std::remove((p + kPartial).c_str());
  }
}

std::string ShardedWriter::ShardPath(const std::string& path, uint64_t index, uint64_t count) {
  std::filesystem::path p(path);
  std::string name =
      fmt::format("{}-{:05d}-of-{:05d}{}", p.stem().string(), index, count, p.extension().string());
  return (p.parent_path() / name).string();
}

Status ShardedWriter::OpenNext() {
  if (current_ != nullptr) EDL_RETURN_IF_ERROR(current_->Close());
  std::string path = per_shard_ == 0 ? path_ : ShardPath(path_, paths_.size(), num_shards_);
  EDL_ASSIGN_OR_RETURN(current_, RecordWriter::Create(path + kPartial, options_));
  paths_.push_back(path);
  return absl::OkStatus();
}

Status ShardedWriter::Write(std::string_view record) {
  if (per_shard_ > 0 && written_ > 0 && written_ % per_shard_ == 0) {
    EDL_RETURN_IF_ERROR(OpenNext());
  }
  EDL_RETURN_IF_ERROR(current_->Write(record));
  ++written_;
  return absl::OkStatus();
}

Status ShardedWriter::Close() {
  if (current_ == nullptr) return absl::OkStatus();
  Status s = current_->Close();
  current_.reset();
  EDL_RETURN_IF_ERROR(s);
  if (per_shard_ > 0 && written_ != total_) {
    return absl::InternalError(StrCat(path_, ": wrote ", written_, " records, expected ", total_));
  }
  // Durable before they take their names: a shard under its final name is
  // whole, also after a power cut (a short RecordIO file would read as a
  // valid one of fewer records).
  for (const std::string& p : paths_) EDL_RETURN_IF_ERROR(SyncFile(p + kPartial));
  for (const std::string& p : paths_) {
    if (std::rename((p + kPartial).c_str(), p.c_str()) != 0) {
      return absl::InternalError(
          StrCat(p, ": cannot rename from ", p, kPartial, ": ", std::strerror(errno)));
    }
  }
  std::string parent = std::filesystem::path(path_).parent_path().string();
  EDL_RETURN_IF_ERROR(SyncDirectory(parent.empty() ? "." : parent));
  closed_ok_ = true;
  return absl::OkStatus();
}

}  // namespace elasticdl
