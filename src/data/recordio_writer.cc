#include <limits>

#include "common/endian.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/recordio_chunk.h"
#include "elasticdl/data/recordio.h"

namespace elasticdl {
namespace {

class RecordIOWriterImpl final : public RecordIOWriter {
 public:
  RecordIOWriterImpl(std::unique_ptr<WritableFile> file, const Options& options)
      : file_(std::move(file)), options_(options), compressor_(options.compressor) {}

  ~RecordIOWriterImpl() override { Close().IgnoreError(); }

  Status Write(std::string_view record) override {
    if (closed_) return absl::FailedPreconditionError(StrCat(file_->path(), ": closed"));
    if (record.size() > std::numeric_limits<uint32_t>::max() - 4) {
      return absl::InvalidArgumentError(StrCat(file_->path(), ": record of ", record.size(),
                                               " bytes exceeds RecordIO's uint32 length"));
    }
    // Keep each chunk's raw payload within max_chunk_bytes; a single record
    // larger than that gets a chunk of its own.
    if (num_buffered_ > 0 && raw_.size() + 4 + record.size() > options_.max_chunk_bytes) {
      EDL_RETURN_IF_ERROR(FinishChunk());
    }
    char len[4];
    EncodeFixed32(len, static_cast<uint32_t>(record.size()));
    raw_.append(len, 4);
    raw_.append(record.data(), record.size());
    ++num_buffered_;
    ++records_written_;
    return absl::OkStatus();
  }

  Status FinishChunk() override {
    if (num_buffered_ == 0) return absl::OkStatus();
    chunk_.clear();
    EDL_RETURN_IF_ERROR(
        Annotate(recordio::EncodeChunk(raw_, num_buffered_, compressor_, &chunk_), file_->path()));
    EDL_RETURN_IF_ERROR(file_->Append(chunk_));
    raw_.clear();
    num_buffered_ = 0;
    return absl::OkStatus();
  }

  void set_compressor(Compressor compressor) override { compressor_ = compressor; }

  Status Close() override {
    if (closed_) return absl::OkStatus();
    closed_ = true;
    Status s = FinishChunk();
    Status c = file_->Close();
    return s.ok() ? c : s;
  }

  uint64_t records_written() const override { return records_written_; }

 private:
  std::unique_ptr<WritableFile> file_;
  Options options_;
  Compressor compressor_;
  std::string raw_;    // length-prefixed records of the open chunk
  std::string chunk_;  // encoded chunk being written
  uint32_t num_buffered_ = 0;
  uint64_t records_written_ = 0;
  bool closed_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<RecordIOWriter>> RecordIOWriter::Create(const std::string& path,
                                                                 const Options& options) {
  if (options.max_chunk_bytes == 0) {
    return absl::InvalidArgumentError("RecordIO max_chunk_bytes must be positive");
  }
  EDL_ASSIGN_OR_RETURN(auto file, WritableFile::Create(path));
  return std::unique_ptr<RecordIOWriter>(new RecordIOWriterImpl(std::move(file), options));
}

}  // namespace elasticdl
