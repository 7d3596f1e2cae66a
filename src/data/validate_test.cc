#include "data/validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "data/recordio_chunk.h"
#include "elasticdl/data/recordio.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class ValidateTest : public ::testing::Test {
 protected:
  void Write(RecordFormat format) {
    path_ = dir_.File(format == RecordFormat::kRecordIO ? "v.recordio" : "v.tfrecord");
    RecordWriterOptions options;
    options.format = format;
    options.max_chunk_bytes = 1000;
    auto writer = RecordWriter::Create(path_, options);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE((*writer)->Write(std::string(90, 'a' + i % 26)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
    std::ifstream in(path_, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  ValidateReport Validate() {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes_;
    auto report = ValidateFile(path_, ValidateOptions());
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : ValidateReport();
  }

  testing::TempDir dir_;
  std::string path_;
  std::string bytes_;
};

TEST_F(ValidateTest, CleanFilesHaveNoFindings) {
  Write(RecordFormat::kRecordIO);
  ValidateReport r = Validate();
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.good_records, 100u);
  Write(RecordFormat::kTFRecord);
  r = Validate();
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.good_records, 100u);
}

TEST_F(ValidateTest, ReportsEveryDamagedRecordIOChunkAndResynchronizes) {
  Write(RecordFormat::kRecordIO);
  auto file = RecordIOFile::Open(path_);
  ASSERT_TRUE(file.ok());
  auto chunks = (*file)->chunks();
  ASSERT_GE(chunks.size(), 8u);
  bytes_[chunks[1].offset + 30] ^= 1;  // payload of chunk 1
  bytes_[chunks[4].offset] ^= 1;       // magic of chunk 4
  bytes_[chunks[6].offset + 12] ^= 1;  // stored size of chunk 6
  ValidateReport r = Validate();
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_EQ(r.findings[0].offset, chunks[1].offset);
  EXPECT_THAT(r.findings[0].problem, HasSubstr("checksum mismatch"));
  EXPECT_EQ(r.findings[1].offset, chunks[4].offset);
  EXPECT_THAT(r.findings[1].problem,
              HasSubstr("bad magic 0x01020305, expected 0x01020304; next intact chunk at offset " +
                        std::to_string(chunks[5].offset)));
  EXPECT_EQ(r.findings[2].offset, chunks[6].offset);
  uint64_t damaged = chunks[1].num_records + chunks[4].num_records + chunks[6].num_records;
  EXPECT_EQ(r.good_records, 100 - damaged);
}

TEST_F(ValidateTest, ReportsEveryDamagedTFRecordAndResynchronizes) {
  Write(RecordFormat::kTFRecord);
  const size_t framed = 12 + 90 + 4;
  bytes_[3 * framed + 20] ^= 1;  // data of record 3
  bytes_[7 * framed + 2] ^= 1;   // length of record 7
  ValidateReport r = Validate();
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].offset, 3 * framed);
  EXPECT_THAT(r.findings[0].problem, HasSubstr("record 3: data checksum mismatch"));
  EXPECT_EQ(r.findings[1].offset, 7 * framed);
  EXPECT_THAT(r.findings[1].problem,
              AllOf(HasSubstr("record 7: length checksum mismatch"),
                    HasSubstr("next intact header at offset " + std::to_string(8 * framed))));
  EXPECT_EQ(r.good_records, 98u);
}

TEST_F(ValidateTest, TruncationIsReported) {
  Write(RecordFormat::kRecordIO);
  bytes_.resize(bytes_.size() - 5);
  ValidateReport r = Validate();
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_THAT(r.findings[0].problem, HasSubstr("truncated"));
}

}  // namespace
}  // namespace elasticdl
