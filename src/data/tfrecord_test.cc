#include "data/tfrecord.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "elasticdl/data/record_file.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<std::string> Records() {
  return {"alpha", "", std::string(100000, 'x'), "delta", std::string("\0\1\2", 3)};
}

std::string WriteTFRecord(const testing::TempDir& dir, const std::vector<std::string>& records) {
  std::string path = dir.File("t.tfrecord");
  RecordWriterOptions options;
  options.format = RecordFormat::kTFRecord;
  auto writer = RecordWriter::Create(path, options);
  EXPECT_TRUE(writer.ok());
  for (const auto& r : records) EXPECT_TRUE((*writer)->Write(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

Status ScanAll(const std::string& path, std::vector<std::string>* out) {
  auto file = RecordFile::Open(path);
  if (!file.ok()) return file.status();
  auto scan = (*file)->Scan(0, (*file)->num_records());
  if (!scan.ok()) return scan.status();
  while ((*scan)->Next()) out->emplace_back((*scan)->record());
  return (*scan)->status();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(TFRecordTest, RoundTripAndRanges) {
  testing::TempDir dir;
  auto records = Records();
  std::string path = WriteTFRecord(dir, records);
  std::vector<std::string> got;
  ASSERT_TRUE(ScanAll(path, &got).ok());
  EXPECT_EQ(got, records);
  auto file = RecordFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->format(), RecordFormat::kTFRecord);
  auto scan = (*file)->Scan(2, 4);
  ASSERT_TRUE(scan.ok());
  ASSERT_TRUE((*scan)->Next());
  EXPECT_EQ((*scan)->index(), 2u);
  EXPECT_EQ((*scan)->record(), records[2]);
  ASSERT_TRUE((*scan)->Next());
  EXPECT_EQ((*scan)->record(), "delta");
  EXPECT_FALSE((*scan)->Next());
  EXPECT_TRUE((*scan)->status().ok());
}

TEST(TFRecordTest, FramingMatchesTheFormat) {
  std::string framed;
  tfrecord::EncodeRecord("abc", &framed);
  ASSERT_EQ(framed.size(), 12u + 3 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(12, 3), "abc");
}

TEST(TFRecordTest, DataCorruptionNamesRecordAndOffset) {
  testing::TempDir dir;
  std::string path = WriteTFRecord(dir, Records());
  std::string bytes = Slurp(path);
  size_t record3 = (12 + 5 + 4) + (12 + 0 + 4) + (12 + 100000 + 4);
  bytes[record3 + 12 + 1] ^= 0x20;  // inside "delta"
  Spit(path, bytes);
  std::vector<std::string> got;
  Status s = ScanAll(path, &got);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path), HasSubstr("record 3 at offset " + std::to_string(record3)),
                    HasSubstr("data checksum mismatch")));
  EXPECT_EQ(got.size(), 3u);
}

TEST(TFRecordTest, LengthCorruptionAndTruncation) {
  testing::TempDir dir;
  std::string path = WriteTFRecord(dir, Records());
  std::string good = Slurp(path);
  std::string bytes = good;
  bytes[12 + 5 + 4] ^= 0x01;  // length of record 1
  Spit(path, bytes);
  std::vector<std::string> got;
  EXPECT_THAT(ScanAll(path, &got).message(),
              AllOf(HasSubstr("record 1 at offset 21"), HasSubstr("length checksum mismatch")));
  Spit(path, good.substr(0, good.size() - 2));
  EXPECT_THAT(ScanAll(path, &got).message(), AllOf(HasSubstr("record 4"), HasSubstr("truncated")));
  Spit(path, good.substr(0, good.size() - 10));
  EXPECT_THAT(ScanAll(path, &got).message(), HasSubstr("truncated"));
}

}  // namespace
}  // namespace elasticdl
