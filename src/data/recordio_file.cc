#include "data/recordio_file.h"

#include <algorithm>
#include <mutex>

#include "common/strings.h"
#include "data/recordio_chunk.h"

namespace elasticdl {
namespace recordio {
namespace {

class RecordIOFileImpl;

// What a scanner needs to hold one chunk: the stored payload, the
// decompressed one, and the records' positions. Tens of MiB for default
// chunks, so files keep a few of them for the next scanner.
struct ChunkBuffers {
  std::string stored;
  std::string scratch;
  std::vector<std::string_view> records;
};

// Walks [start, end) chunk by chunk; holds one decoded chunk at a time.
class Scanner final : public RecordScanner {
 public:
  Scanner(const RecordIOFileImpl* file, uint64_t start, uint64_t end);
  ~Scanner() override;
  bool Next() override;
  std::string_view record() const override { return buffers_->records[pos_in_chunk_]; }
  uint64_t index() const override { return next_ - 1; }
  const Status& status() const override { return status_; }

 private:
  const RecordIOFileImpl* file_;
  uint64_t next_;  // index of the record the next Next() returns
  uint64_t end_;
  bool loaded_ = false;
  size_t pos_in_chunk_ = 0;
  std::unique_ptr<ChunkBuffers> buffers_;
  Status status_;
};

class RecordIOFileImpl final : public RecordIOFile {
 public:
  RecordIOFileImpl(std::unique_ptr<RandomAccessFile> file, const Options& options,
                   std::vector<RecordIOChunkInfo> chunks, uint64_t num_records)
      : file_(std::move(file)),
        options_(options),
        chunks_(std::move(chunks)),
        num_records_(num_records) {}

  RecordFormat format() const override { return RecordFormat::kRecordIO; }
  const std::string& path() const override { return file_->path(); }
  uint64_t num_records() const override { return num_records_; }
  const std::vector<RecordIOChunkInfo>& chunks() const override { return chunks_; }

  StatusOr<std::unique_ptr<RecordScanner>> Scan(uint64_t start, uint64_t end) const override {
    if (start > end || end > num_records_) {
      return absl::InvalidArgumentError(StrCat(path(), ": record range [", start, ", ", end,
                                               ") is outside the file's ", num_records_,
                                               " records"));
    }
    return std::unique_ptr<RecordScanner>(new Scanner(this, start, end));
  }

  // Index of the chunk that holds record `index` (< num_records()).
  size_t ChunkOf(uint64_t index) const {
    auto it =
        std::upper_bound(chunks_.begin(), chunks_.end(), index,
                         [](uint64_t i, const RecordIOChunkInfo& c) { return i < c.first_record; });
    size_t chunk = static_cast<size_t>(it - chunks_.begin()) - 1;
    while (chunks_[chunk].num_records == 0) ++chunk;  // empty chunks hold nothing
    return chunk;
  }

  Status ReadChunk(size_t i, ChunkBuffers* b) const {
    const RecordIOChunkInfo& c = chunks_[i];
    b->stored.resize(c.stored_size);
    EDL_RETURN_IF_ERROR(file_->ReadExactly(c.offset + kHeaderSize, c.stored_size, b->stored.data(),
                                           "chunk payload"));
    ChunkHeader h;
    h.checksum = c.checksum;
    h.compressor = static_cast<uint32_t>(c.compressor);
    h.stored_size = c.stored_size;
    h.num_records = c.num_records;
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(DecodePayload(h, b->stored, options_.max_chunk_bytes,
                                                   c.first_record, &b->scratch, &b->records),
                                     StrCat(path(), ": chunk at offset ", c.offset));
    return absl::OkStatus();
  }

  std::unique_ptr<ChunkBuffers> AcquireBuffers() const {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.empty()) return std::make_unique<ChunkBuffers>();
    std::unique_ptr<ChunkBuffers> b = std::move(pool_.back());
    pool_.pop_back();
    return b;
  }

  void ReleaseBuffers(std::unique_ptr<ChunkBuffers> b) const {
    b->records.clear();
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.size() < kMaxPooledBuffers) pool_.push_back(std::move(b));
  }

 private:
  // Enough for the scanners a worker runs at once (one per reading thread).
  static constexpr size_t kMaxPooledBuffers = 2;

  std::unique_ptr<RandomAccessFile> file_;
  Options options_;
  std::vector<RecordIOChunkInfo> chunks_;
  uint64_t num_records_;
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<ChunkBuffers>> pool_;
};

Scanner::Scanner(const RecordIOFileImpl* file, uint64_t start, uint64_t end)
    : file_(file), next_(start), end_(end), buffers_(file->AcquireBuffers()) {}

Scanner::~Scanner() { file_->ReleaseBuffers(std::move(buffers_)); }

bool Scanner::Next() {
  if (!status_.ok() || next_ >= end_) return false;
  if (!loaded_ || pos_in_chunk_ + 1 >= buffers_->records.size()) {
    // Move to the chunk holding next_.
    size_t chunk = file_->ChunkOf(next_);
    status_ = file_->ReadChunk(chunk, buffers_.get());
    if (!status_.ok()) return false;
    loaded_ = true;
    pos_in_chunk_ = static_cast<size_t>(next_ - file_->chunks()[chunk].first_record);
  } else {
    ++pos_in_chunk_;
  }
  ++next_;
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<RecordIOFile>> OpenFile(std::unique_ptr<RandomAccessFile> file,
                                                 const RecordFile::Options& options) {
  std::vector<RecordIOChunkInfo> chunks;
  uint64_t offset = 0;
  uint64_t num_records = 0;
  const uint64_t size = file->size();
  char buf[kHeaderSize];
  while (offset < size) {
    EDL_RETURN_IF_ERROR(file->ReadExactly(offset, kHeaderSize, buf, "chunk header"));
    ChunkHeader h = DecodeHeader(buf);
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(CheckHeader(h),
                                     StrCat(file->path(), ": chunk at offset ", offset));
    if (h.stored_size > size - offset - kHeaderSize) {
      return absl::DataLossError(StrCat(file->path(), ": chunk at offset ", offset,
                                        ": truncated payload: header says ", h.stored_size,
                                        " bytes, file has ", size - offset - kHeaderSize));
    }
    RecordIOChunkInfo c;
    c.offset = offset;
    c.checksum = h.checksum;
    c.compressor = static_cast<Compressor>(h.compressor);
    c.stored_size = h.stored_size;
    c.num_records = h.num_records;
    c.first_record = num_records;
    chunks.push_back(c);
    num_records += h.num_records;
    offset += kHeaderSize + h.stored_size;
  }
  return std::unique_ptr<RecordIOFile>(
      new RecordIOFileImpl(std::move(file), options, std::move(chunks), num_records));
}

}  // namespace recordio

StatusOr<std::unique_ptr<RecordIOFile>> RecordIOFile::Open(const std::string& path,
                                                           const Options& options) {
  EDL_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  return recordio::OpenFile(std::move(file), options);
}

}  // namespace elasticdl
