#include "elasticdl/data/recordio.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/endian.h"
#include "data/recordio_chunk.h"
#include "elasticdl/data/record_file.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<std::string> SampleRecords(size_t n) {
  std::vector<std::string> records;
  for (size_t i = 0; i < n; ++i) {
    records.push_back(i % 7 == 3 ? std::string()
                                 : std::string(i % 50 + 1, static_cast<char>('a' + i % 26)) +
                                       std::to_string(i));
  }
  return records;
}

void WriteFile(const std::string& path, const std::vector<std::string>& records,
               RecordWriterOptions options) {
  auto writer = RecordWriter::Create(path, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& r : records) ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

std::vector<std::string> ReadRange(const RecordFile& file, uint64_t start, uint64_t end) {
  std::vector<std::string> out;
  auto scan = file.Scan(start, end);
  EXPECT_TRUE(scan.ok()) << scan.status();
  if (!scan.ok()) return out;
  uint64_t expected_index = start;
  while ((*scan)->Next()) {
    EXPECT_EQ((*scan)->index(), expected_index++);
    out.emplace_back((*scan)->record());
  }
  EXPECT_TRUE((*scan)->status().ok()) << (*scan)->status();
  return out;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class RecordIORoundTrip : public ::testing::TestWithParam<Compressor> {};

TEST_P(RecordIORoundTrip, WholeFileAndEveryRange) {
  testing::TempDir dir;
  const std::string path = dir.File("data.recordio");
  auto records = SampleRecords(300);
  RecordWriterOptions options;
  options.compressor = GetParam();
  options.max_chunk_bytes = 1000;  // many chunks
  WriteFile(path, records, options);

  auto file = RecordIOFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->num_records(), records.size());
  EXPECT_GT((*file)->chunks().size(), 5u);
  for (const auto& c : (*file)->chunks()) EXPECT_EQ(c.compressor, GetParam());
  EXPECT_EQ(ReadRange(**file, 0, records.size()), records);
  for (uint64_t start : {0, 1, 17, 150, 299, 300}) {
    for (uint64_t len : {0, 1, 5, 60}) {
      uint64_t end = std::min<uint64_t>(start + len, records.size());
      std::vector<std::string> want(records.begin() + start, records.begin() + end);
      EXPECT_EQ(ReadRange(**file, start, end), want) << start << ".." << end;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Compressors, RecordIORoundTrip,
                         ::testing::Values(Compressor::kNone, Compressor::kSnappy,
                                           Compressor::kGzip));

TEST(RecordIOTest, MixedCompressorsAcrossChunks) {
  testing::TempDir dir;
  const std::string path = dir.File("mixed.recordio");
  auto records = SampleRecords(90);
  auto writer = RecordIOWriter::Create(path);
  ASSERT_TRUE(writer.ok());
  const Compressor order[] = {Compressor::kGzip, Compressor::kNone, Compressor::kSnappy};
  for (size_t i = 0; i < records.size(); ++i) {
    if (i % 30 == 0) {
      ASSERT_TRUE((*writer)->FinishChunk().ok());
      (*writer)->set_compressor(order[i / 30]);
    }
    ASSERT_TRUE((*writer)->Write(records[i]).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  auto file = RecordIOFile::Open(path);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ((*file)->chunks().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*file)->chunks()[i].compressor, order[i]);
  EXPECT_EQ(ReadRange(**file, 0, 90), records);
  EXPECT_EQ(ReadRange(**file, 25, 65),
            std::vector<std::string>(records.begin() + 25, records.begin() + 65));
}

TEST(RecordIOTest, EmptyFileAndAllEmptyRecords) {
  testing::TempDir dir;
  WriteFile(dir.File("empty.recordio"), {}, {});
  auto empty = RecordFile::Open(dir.File("empty.recordio"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->num_records(), 0u);
  EXPECT_TRUE(ReadRange(**empty, 0, 0).empty());

  std::vector<std::string> blanks(1000, "");
  WriteFile(dir.File("blanks.recordio"), blanks, {});
  auto file = RecordFile::Open(dir.File("blanks.recordio"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadRange(**file, 0, 1000), blanks);
}

TEST(RecordIOTest, ConcatenatedFilesAreOneFile) {
  testing::TempDir dir;
  auto a = SampleRecords(10), b = SampleRecords(20);
  WriteFile(dir.File("a.recordio"), a, {});
  RecordWriterOptions gz;
  gz.compressor = Compressor::kGzip;
  WriteFile(dir.File("b.recordio"), b, gz);
  WriteBytes(dir.File("ab.recordio"),
             ReadBytes(dir.File("a.recordio")) + ReadBytes(dir.File("b.recordio")));
  auto file = RecordFile::Open(dir.File("ab.recordio"));
  ASSERT_TRUE(file.ok());
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(ReadRange(**file, 0, 30), a);
}

TEST(RecordIOTest, ScanRejectsRangesOutsideTheFile) {
  testing::TempDir dir;
  WriteFile(dir.File("x.recordio"), SampleRecords(5), {});
  auto file = RecordFile::Open(dir.File("x.recordio"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Scan(3, 6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->Scan(4, 2).status().code(), StatusCode::kInvalidArgument);
}

// Corruption: every case is DATA_LOSS naming the file and an offset.
class RecordIOCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("c.recordio");
    RecordWriterOptions options;
    options.compressor = Compressor::kNone;
    options.max_chunk_bytes = 200;
    WriteFile(path_, SampleRecords(40), options);
    bytes_ = ReadBytes(path_);
    auto file = RecordIOFile::Open(path_);
    ASSERT_TRUE(file.ok());
    chunks_ = (*file)->chunks();
    ASSERT_GE(chunks_.size(), 3u);
  }

  // Opens the file after `bytes_` was damaged and scans everything.
  Status OpenAndScan() {
    WriteBytes(path_, bytes_);
    auto file = RecordFile::Open(path_);
    if (!file.ok()) return file.status();
    auto scan = (*file)->Scan(0, (*file)->num_records());
    if (!scan.ok()) return scan.status();
    while ((*scan)->Next()) {
    }
    return (*scan)->status();
  }

  void PutU32(size_t offset, uint32_t v) { EncodeFixed32(bytes_.data() + offset, v); }

  testing::TempDir dir_;
  std::string path_;
  std::string bytes_;
  std::vector<RecordIOChunkInfo> chunks_;
};

TEST_F(RecordIOCorruption, FlippedPayloadByteIsAChecksumMismatch) {
  size_t at = chunks_[1].offset + recordio::kHeaderSize + 10;
  bytes_[at] ^= 0x01;
  Status s = OpenAndScan();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path_),
                                 HasSubstr("chunk at offset " + std::to_string(chunks_[1].offset)),
                                 HasSubstr("checksum mismatch")));
}

TEST_F(RecordIOCorruption, BadMagic) {
  bytes_[chunks_[2].offset] ^= 0xff;
  Status s = OpenAndScan();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("chunk at offset " + std::to_string(chunks_[2].offset)),
                                 HasSubstr("bad magic")));
}

TEST_F(RecordIOCorruption, UnknownCompressor) {
  PutU32(chunks_[0].offset + 8, 7);
  EXPECT_THAT(OpenAndScan().message(),
              AllOf(HasSubstr("chunk at offset 0"), HasSubstr("unknown compressor 7")));
}

TEST_F(RecordIOCorruption, TruncatedHeaderAndPayload) {
  bytes_.resize(chunks_.back().offset + 7);
  EXPECT_THAT(OpenAndScan().message(),
              AllOf(HasSubstr(path_), HasSubstr("offset " + std::to_string(chunks_.back().offset)),
                    HasSubstr("truncated chunk header")));
  SetUp();
  bytes_.resize(bytes_.size() - 1);
  EXPECT_THAT(OpenAndScan().message(),
              AllOf(HasSubstr("chunk at offset " + std::to_string(chunks_.back().offset)),
                    HasSubstr("truncated payload")));
}

TEST_F(RecordIOCorruption, AbsurdRecordCountAndLength) {
  PutU32(chunks_[0].offset + 16, 0xfffffff0u);  // record count
  EXPECT_THAT(OpenAndScan().message(), HasSubstr("header claims 4294967280 records"));
  SetUp();
  // A record length pointing past the chunk; fix the checksum so only the
  // framing is wrong.
  size_t payload = chunks_[0].offset + recordio::kHeaderSize;
  PutU32(payload, 1u << 30);
  recordio::ChunkHeader h = recordio::DecodeHeader(bytes_.data() + chunks_[0].offset);
  std::string stored = bytes_.substr(payload, h.stored_size);
  std::string rebuilt;
  ASSERT_TRUE(recordio::EncodeChunk(stored, h.num_records, Compressor::kNone, &rebuilt).ok());
  bytes_.replace(chunks_[0].offset, rebuilt.size(), rebuilt);
  Status s = OpenAndScan();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("record 0: length 1073741824"), HasSubstr("exceeds")));
}

}  // namespace
}  // namespace elasticdl
