#include "data/tfrecord.h"

#include <vector>

#include "common/crc.h"
#include "common/endian.h"
#include "common/strings.h"

namespace elasticdl::tfrecord {
namespace {

class Scanner final : public RecordScanner {
 public:
  Scanner(const RandomAccessFile* file, uint64_t first_offset, uint64_t start, uint64_t end)
      : file_(file), reader_(file, first_offset), next_(start), end_(end) {}

  bool Next() override {
    if (!status_.ok() || next_ >= end_) return false;
    status_ = ReadOne();
    if (!status_.ok()) return false;
    ++next_;
    return true;
  }
  std::string_view record() const override { return record_; }
  uint64_t index() const override { return next_ - 1; }
  const Status& status() const override { return status_; }

 private:
  Status ReadOne() {
    uint64_t offset = reader_.offset();
    std::string_view header;
    EDL_RETURN_IF_ERROR(reader_.Read(kHeaderSize, &header, "record header"));
    uint64_t length = 0;
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(
        DecodeHeader(header, &length),
        StrCat(file_->path(), ": record ", next_, " at offset ", offset));
    std::string_view body;
    if (length > reader_.remaining()) {
      return absl::DataLossError(StrCat(file_->path(), ": record ", next_, " at offset ", offset,
                                        ": truncated: length ", length, " but only ",
                                        reader_.remaining(), " bytes follow"));
    }
    EDL_RETURN_IF_ERROR(reader_.Read(length + kFooterSize, &body, "record data"));
    record_ = body.substr(0, length);
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(
        CheckData(record_, body.substr(length)),
        StrCat(file_->path(), ": record ", next_, " at offset ", offset));
    return absl::OkStatus();
  }

  const RandomAccessFile* file_;
  SequentialReader reader_;
  uint64_t next_;
  uint64_t end_;
  std::string_view record_;
  Status status_;
};

class TFRecordFile final : public RecordFile {
 public:
  TFRecordFile(std::unique_ptr<RandomAccessFile> file, std::vector<uint64_t> offsets)
      : file_(std::move(file)), offsets_(std::move(offsets)) {}

  RecordFormat format() const override { return RecordFormat::kTFRecord; }
  const std::string& path() const override { return file_->path(); }
  uint64_t num_records() const override { return offsets_.size(); }

  StatusOr<std::unique_ptr<RecordScanner>> Scan(uint64_t start, uint64_t end) const override {
    if (start > end || end > offsets_.size()) {
      return absl::InvalidArgumentError(StrCat(path(), ": record range [", start, ", ", end,
                                               ") is outside the file's ", offsets_.size(),
                                               " records"));
    }
    uint64_t first = start < offsets_.size() ? offsets_[start] : file_->size();
    return std::unique_ptr<RecordScanner>(new Scanner(file_.get(), first, start, end));
  }

 private:
  std::unique_ptr<RandomAccessFile> file_;
  std::vector<uint64_t> offsets_;  // where each record's header starts
};

class TFRecordWriter final : public RecordWriter {
 public:
  explicit TFRecordWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  ~TFRecordWriter() override { Close().IgnoreError(); }

  Status Write(std::string_view record) override {
    framed_.clear();
    EncodeRecord(record, &framed_);
    EDL_RETURN_IF_ERROR(file_->Append(framed_));
    ++records_written_;
    return absl::OkStatus();
  }
  Status Close() override { return file_->Close(); }
  uint64_t records_written() const override { return records_written_; }

 private:
  std::unique_ptr<WritableFile> file_;
  std::string framed_;
  uint64_t records_written_ = 0;
};

}  // namespace

Status DecodeHeader(std::string_view header, uint64_t* length) {
  uint32_t expected = crc::UnmaskCrc(DecodeFixed32(header.data() + 8));
  uint32_t actual = crc::Crc32c(header.substr(0, 8));
  if (expected != actual) {
    return absl::DataLossError(
        StrCat("length checksum mismatch: stored ", Hex32(expected), ", computed ", Hex32(actual)));
  }
  *length = DecodeFixed64(header.data());
  return absl::OkStatus();
}

Status CheckData(std::string_view data, std::string_view footer) {
  uint32_t expected = crc::UnmaskCrc(DecodeFixed32(footer.data()));
  uint32_t actual = crc::Crc32c(data);
  if (expected != actual) {
    return absl::DataLossError(
        StrCat("data checksum mismatch: stored ", Hex32(expected), ", computed ", Hex32(actual)));
  }
  return absl::OkStatus();
}

void EncodeRecord(std::string_view data, std::string* out) {
  char header[kHeaderSize];
  EncodeFixed64(header, data.size());
  EncodeFixed32(header + 8, crc::MaskCrc(crc::Crc32c(std::string_view(header, 8))));
  out->append(header, kHeaderSize);
  out->append(data.data(), data.size());
  char footer[kFooterSize];
  EncodeFixed32(footer, crc::MaskCrc(crc::Crc32c(data)));
  out->append(footer, kFooterSize);
}

StatusOr<std::unique_ptr<RecordFile>> OpenFile(std::unique_ptr<RandomAccessFile> file) {
  std::vector<uint64_t> offsets;
  SequentialReader reader(file.get());
  while (!reader.AtEnd()) {
    uint64_t offset = reader.offset();
    std::string_view header;
    EDL_RETURN_IF_ERROR(reader.Read(kHeaderSize, &header, "record header"));
    uint64_t length = 0;
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(
        DecodeHeader(header, &length),
        StrCat(file->path(), ": record ", offsets.size(), " at offset ", offset));
    if (length > reader.remaining() || reader.remaining() - length < kFooterSize) {
      return absl::DataLossError(StrCat(
          file->path(), ": record ", offsets.size(), " at offset ", offset, ": truncated: length ",
          length, " needs ", length + kFooterSize, " more bytes, file has ", reader.remaining()));
    }
    EDL_RETURN_IF_ERROR(reader.Skip(length + kFooterSize, "record data"));
    offsets.push_back(offset);
  }
  return std::unique_ptr<RecordFile>(new TFRecordFile(std::move(file), std::move(offsets)));
}

StatusOr<std::unique_ptr<RecordWriter>> CreateWriter(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(auto file, WritableFile::Create(path));
  return std::unique_ptr<RecordWriter>(new TFRecordWriter(std::move(file)));
}

}  // namespace elasticdl::tfrecord
