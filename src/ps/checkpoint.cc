#include "ps/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "common/crc.h"
#include "common/endian.h"
#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::ps {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "EDLCKPT1";
constexpr size_t kMagicSize = 8;
constexpr size_t kFrameHeaderSize = 8 + 4;  // length, masked CRC
constexpr char kVersionPrefix[] = "version-";

// Parses "version-<V>"; false for other names.
bool ParseVersionDir(const std::string& name, int64_t* version) {
  const std::string prefix = kVersionPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (name[i] - '0');
  }
  *version = v;
  return true;
}

// Parses "ps-<i>-of-<n>.ckpt".
bool ParseShardFile(const std::string& name, int* ps_id, int* num_ps) {
  int i = 0;
  int n = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "ps-%d-of-%d.ckpt%n", &i, &n, &consumed) != 2) return false;
  if (static_cast<size_t>(consumed) != name.size() || i < 0 || n <= 0 || i >= n) return false;
  *ps_id = i;
  *num_ps = n;
  return true;
}

// Version directories under `dir`, newest first. A missing `dir` has none.
StatusOr<std::vector<std::pair<int64_t, std::string>>> ListVersions(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> versions;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return versions;
  if (ec) return ErrnoToStatus(ec.value(), StrCat(dir, ": cannot list"));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    int64_t version = 0;
    if (it->is_directory(ec) && ParseVersionDir(it->path().filename().string(), &version)) {
      versions.emplace_back(version, it->path().string());
    }
  }
  if (ec) return ErrnoToStatus(ec.value(), StrCat(dir, ": cannot list"));
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

}  // namespace

std::string CheckpointVersionDir(const std::string& dir, int64_t version) {
  return StrCat(dir, "/", kVersionPrefix, version);
}

std::string CheckpointPath(const std::string& dir, int64_t version, int ps_id, int num_ps) {
  return StrCat(CheckpointVersionDir(dir, version), "/ps-", ps_id, "-of-", num_ps, ".ckpt");
}

Status WriteCheckpoint(const std::string& dir, proto::ShardCheckpoint* checkpoint) {
  const std::string version_dir = CheckpointVersionDir(dir, checkpoint->version());
  const std::string path =
      CheckpointPath(dir, checkpoint->version(), checkpoint->ps_id(), checkpoint->num_ps());
  EDL_RETURN_IF_ERROR(CreateDirectories(version_dir));
  // The first frame holds everything but the row blocks, each of which
  // gets a frame of its own (a table may exceed what one message holds).
  google::protobuf::RepeatedPtrField<proto::EmbeddingRowBlock> blocks;
  blocks.Swap(checkpoint->mutable_embedding_blocks());
  checkpoint->set_embedding_block_count(blocks.size());
  std::string header;
  const bool serialized = checkpoint->SerializeToString(&header);
  blocks.Swap(checkpoint->mutable_embedding_blocks());
  if (!serialized) return absl::InternalError(StrCat(path, ": cannot serialize the checkpoint"));

  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, StrCat(tmp, ": cannot create"));
  auto write_frame = [&](std::string_view payload) {
    char prefix[kFrameHeaderSize];
    EncodeFixed64(prefix, payload.size());
    EncodeFixed32(prefix + 8, crc::MaskCrc(crc::Crc32c(payload)));
    Status s = WriteAll(fd, std::string_view(prefix, sizeof prefix), tmp);
    return s.ok() ? WriteAll(fd, payload, tmp) : s;
  };
  Status s = WriteAll(fd, std::string_view(kMagic, kMagicSize), tmp);
  if (s.ok()) s = write_frame(header);
  std::string frame;
  for (int i = 0; s.ok() && i < checkpoint->embedding_blocks_size(); ++i) {
    frame.clear();
    if (!checkpoint->embedding_blocks(i).SerializeToString(&frame)) {
      s = absl::InternalError(StrCat(path, ": cannot serialize embedding rows"));
    } else {
      s = write_frame(frame);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoToStatus(errno, StrCat(tmp, ": fsync"));
  if (::close(fd) != 0 && s.ok()) s = ErrnoToStatus(errno, StrCat(tmp, ": close"));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = ErrnoToStatus(errno, StrCat(path, ": rename"));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable once the directory is, and the directory once
  // its entry in `dir` is.
  EDL_RETURN_IF_ERROR(SyncDirectory(version_dir));
  return SyncDirectory(dir);
}

StatusOr<proto::ShardCheckpoint> ReadCheckpoint(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
  if (data.size() < kMagicSize + kFrameHeaderSize || data.compare(0, kMagicSize, kMagic) != 0) {
    return absl::DataLossError(StrCat(path, ": not a checkpoint file (", data.size(), " bytes)"));
  }
  size_t offset = kMagicSize;
  // The next frame's payload; DATA_LOSS when truncated or corrupt.
  auto next_frame = [&](std::string_view* payload) -> Status {
    const size_t left = data.size() - offset;
    if (left < kFrameHeaderSize) {
      return absl::DataLossError(StrCat(path, ": truncated checkpoint: a frame header expected at ",
                                        offset, ", ", left, " bytes left"));
    }
    const uint64_t length = DecodeFixed64(data.data() + offset);
    const uint32_t crc = crc::UnmaskCrc(DecodeFixed32(data.data() + offset + 8));
    if (length > left - kFrameHeaderSize) {
      return absl::DataLossError(StrCat(path, ": truncated checkpoint: ", length,
                                        " payload bytes expected, ", left - kFrameHeaderSize,
                                        " found"));
    }
    *payload = std::string_view(data.data() + offset + kFrameHeaderSize, length);
    offset += kFrameHeaderSize + length;
    if (crc::Crc32c(*payload) != crc) {
      return absl::DataLossError(StrCat(path, ": corrupt checkpoint: checksum mismatch"));
    }
    return absl::OkStatus();
  };
  std::string_view payload;
  EDL_RETURN_IF_ERROR(next_frame(&payload));
  proto::ShardCheckpoint checkpoint;
  if (!checkpoint.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(StrCat(path, ": corrupt checkpoint: not a ShardCheckpoint"));
  }
  if (checkpoint.embedding_block_count() < 0 || checkpoint.embedding_blocks_size() != 0) {
    return absl::DataLossError(StrCat(path, ": corrupt checkpoint: bad embedding block count"));
  }
  for (int64_t i = 0; i < checkpoint.embedding_block_count(); ++i) {
    EDL_RETURN_IF_ERROR(next_frame(&payload));
    if (!checkpoint.add_embedding_blocks()->ParseFromArray(payload.data(),
                                                           static_cast<int>(payload.size()))) {
      return absl::DataLossError(
          StrCat(path, ": corrupt checkpoint: embedding block ", i, " does not parse"));
    }
  }
  if (offset != data.size()) {
    return absl::DataLossError(StrCat(path, ": corrupt checkpoint: ", data.size() - offset,
                                      " bytes after the last frame"));
  }
  return checkpoint;
}

Status RetainCheckpoints(const std::string& dir, int ps_id, int num_ps, int keep_max) {
  if (keep_max <= 0) return absl::OkStatus();
  EDL_ASSIGN_OR_RETURN(auto versions, ListVersions(dir));
  int kept = 0;
  for (const auto& [version, version_dir] : versions) {
    const std::string path = CheckpointPath(dir, version, ps_id, num_ps);
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    if (++kept <= keep_max) continue;
    if (!fs::remove(path, ec) && ec) {
      return ErrnoToStatus(ec.value(), StrCat(path, ": cannot delete an old checkpoint"));
    }
    // Removed only when empty: other shards may still keep theirs.
    if (fs::is_empty(version_dir, ec) && !ec) fs::remove(version_dir, ec);
  }
  return absl::OkStatus();
}

StatusOr<proto::ShardCheckpoint> ReadNewestCheckpoint(const std::string& dir, int ps_id, int num_ps,
                                                      std::vector<std::string>* skipped) {
  EDL_ASSIGN_OR_RETURN(auto versions, ListVersions(dir));
  Status first_error;
  for (const auto& [version, version_dir] : versions) {
    const std::string path = CheckpointPath(dir, version, ps_id, num_ps);
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    StatusOr<proto::ShardCheckpoint> checkpoint = ReadCheckpoint(path);
    if (checkpoint.ok()) {
      if (checkpoint->version() == version && checkpoint->ps_id() == ps_id &&
          checkpoint->num_ps() == num_ps) {
        return checkpoint;
      }
      checkpoint = absl::DataLossError(StrCat(path, ": holds version ", checkpoint->version(),
                                              " of parameter server ", checkpoint->ps_id(), " of ",
                                              checkpoint->num_ps()));
    }
    if (first_error.ok()) first_error = checkpoint.status();
    if (skipped != nullptr) skipped->push_back(std::string(checkpoint.status().message()));
  }
  if (!first_error.ok()) return first_error;
  return absl::NotFoundError(
      StrCat("no checkpoint of parameter server ", ps_id, " of ", num_ps, " in ", dir));
}

StatusOr<CompleteCheckpoint> FindNewestCompleteCheckpoint(const std::string& dir) {
  EDL_ASSIGN_OR_RETURN(auto versions, ListVersions(dir));
  for (const auto& [version, version_dir] : versions) {
    // num_ps -> shards present.
    std::map<int, std::set<int>> present;
    std::error_code ec;
    for (fs::directory_iterator it(version_dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      int i = 0;
      int n = 0;
      if (ParseShardFile(it->path().filename().string(), &i, &n)) present[n].insert(i);
    }
    for (const auto& [num_ps, shards] : present) {
      if (static_cast<int>(shards.size()) == num_ps) return CompleteCheckpoint{version, num_ps};
    }
  }
  return absl::NotFoundError(StrCat("no complete checkpoint in ", dir,
                                    " (a version-<V> directory with ps-0..m-1-of-m.ckpt)"));
}

StatusOr<std::vector<proto::ShardCheckpoint>> ReadNewestCompleteCheckpoint(const std::string& dir) {
  EDL_ASSIGN_OR_RETURN(CompleteCheckpoint found, FindNewestCompleteCheckpoint(dir));
  std::vector<proto::ShardCheckpoint> files;
  for (int i = 0; i < found.num_ps; ++i) {
    const std::string path = CheckpointPath(dir, found.version, i, found.num_ps);
    EDL_ASSIGN_OR_RETURN(proto::ShardCheckpoint checkpoint, ReadCheckpoint(path));
    if (checkpoint.version() != found.version || checkpoint.ps_id() != i ||
        checkpoint.num_ps() != found.num_ps) {
      return absl::DataLossError(StrCat(path, ": holds version ", checkpoint.version(),
                                        " of parameter server ", checkpoint.ps_id(), " of ",
                                        checkpoint.num_ps()));
    }
    files.push_back(std::move(checkpoint));
  }
  return files;
}

namespace {

// The first frame of the checkpoint file at `path`, the rest of the file
// left unread.
StatusOr<proto::ShardCheckpoint> ReadCheckpointHead(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, StrCat(path, ": cannot open"));
  char head[kMagicSize + kFrameHeaderSize];
  if (!in.read(head, sizeof head) || std::string_view(head, kMagicSize) != kMagic) {
    return absl::DataLossError(StrCat(path, ": not a checkpoint file"));
  }
  const uint64_t length = DecodeFixed64(head + kMagicSize);
  const uint32_t crc = crc::UnmaskCrc(DecodeFixed32(head + kMagicSize + 8));
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec || length > size - sizeof head) {
    return absl::DataLossError(
        StrCat(path, ": truncated checkpoint: ", length, " payload bytes expected"));
  }
  std::string payload(length, '\0');
  if (!in.read(payload.data(), static_cast<std::streamsize>(length))) {
    return absl::DataLossError(StrCat(path, ": truncated checkpoint"));
  }
  if (crc::Crc32c(payload) != crc) {
    return absl::DataLossError(StrCat(path, ": corrupt checkpoint: checksum mismatch"));
  }
  proto::ShardCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(payload)) {
    return absl::DataLossError(StrCat(path, ": corrupt checkpoint: not a ShardCheckpoint"));
  }
  return checkpoint;
}

}  // namespace

StatusOr<proto::ModelValues> ReadNewestCompleteModelValues(const std::string& dir) {
  EDL_ASSIGN_OR_RETURN(CompleteCheckpoint found, FindNewestCompleteCheckpoint(dir));
  std::vector<proto::ShardCheckpoint> heads;
  for (int i = 0; i < found.num_ps; ++i) {
    EDL_ASSIGN_OR_RETURN(proto::ShardCheckpoint head,
                         ReadCheckpointHead(CheckpointPath(dir, found.version, i, found.num_ps)));
    heads.push_back(std::move(head));
  }
  return ModelValuesOf(heads);
}

proto::ModelValues ModelValuesOf(const std::vector<proto::ShardCheckpoint>& shards) {
  proto::ModelValues values;
  if (!shards.empty()) values.set_version(shards[0].version());
  for (const proto::ShardCheckpoint& shard : shards) {
    for (const proto::ParameterState& p : shard.parameters()) *values.add_parameters() = p.value();
    for (const proto::Tensor& b : shard.buffers()) *values.add_buffers() = b;
  }
  return values;
}

}  // namespace elasticdl::ps
