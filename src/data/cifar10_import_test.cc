#include "data/cifar10_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/strings.h"
#include "data/example_wire.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The pixel byte of record `r` at (row, column, channel) in the files written
// below: distinct per position and channel, and varying with the record.
uint8_t Pixel(int r, int row, int col, int channel) {
  return static_cast<uint8_t>(r * 7 + row * 5 + col * 3 + channel * 101);
}

// One record of the binary format: label, then the red, green and blue planes.
std::string Record(int r, int label) {
  std::string record(1, static_cast<char>(label));
  for (int c = 0; c < 3; ++c) {
    for (int row = 0; row < 32; ++row) {
      for (int col = 0; col < 32; ++col) record += static_cast<char>(Pixel(r, row, col, c));
    }
  }
  return record;
}

std::vector<example::DecodedFeature> Decode(const std::string& example) {
  std::vector<example::DecodedFeature> features;
  EXPECT_TRUE(example::DecodeAll(example, &features).ok());
  return features;
}

TEST(Cifar10ExampleTest, ImageIsHwcFloatsAndLabelInt64) {
  auto example = Cifar10Example("data_batch_1.bin", 0, Record(3, 7));
  ASSERT_TRUE(example.ok()) << example.status();
  auto features = Decode(*example);
  ASSERT_EQ(features.size(), 2u);
  EXPECT_EQ(features[0].key, "image");
  ASSERT_EQ(features[0].floats.size(), 3072u);
  for (int row : {0, 1, 17, 31}) {
    for (int col : {0, 2, 31}) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(features[0].floats[(row * 32 + col) * 3 + c], Pixel(3, row, col, c))
            << row << "," << col << "," << c;
      }
    }
  }
  EXPECT_EQ(features[1].key, "label");
  EXPECT_THAT(features[1].int64s, ElementsAre(7));
}

TEST(Cifar10ExampleTest, LabelAboveNineNamesFileRecordAndOffset) {
  auto example = Cifar10Example("/d/data_batch_2.bin", 4, Record(0, 10));
  EXPECT_EQ(example.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(example.status().message(),
            "/d/data_batch_2.bin: record 4 (byte offset 12292): label 10 is not in 0..9");
  EXPECT_FALSE(Cifar10Example("f", 0, Record(0, 1).substr(1)).ok());
}

class Cifar10ImportTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directory(dir_.File("src")); }

  // Writes `n` records to src/`name`; record i (numbered across the files
  // by `first`) has label (first + i) % 10.
  void WriteFile(std::string_view name, int first, int n) {
    std::ofstream out(dir_.File(StrCat("src/", name)), std::ios::binary);
    for (int i = first; i < first + n; ++i) out << Record(i, i % 10);
  }
  void WriteAll(int per_file = 3) {
    int first = 0;
    for (std::string_view name : kCifar10TrainFiles) {
      WriteFile(name, first, per_file);
      first += per_file;
    }
    WriteFile(kCifar10TestFile, 100, per_file);
  }
  StatusOr<Cifar10ImportResult> Import(uint64_t per_shard = 0, uint64_t limit = 0) {
    Cifar10ImportOptions options;
    options.source_dir = dir_.File("src");
    options.output_dir = dir_.File("out");
    options.records_per_shard = per_shard;
    options.limit = limit;
    return ImportCifar10(options);
  }
  // The labels and the pixel at (row 1, column 2, green) of every record in `paths`.
  void ReadBack(const std::vector<std::string>& paths, std::vector<int64_t>* labels,
                std::vector<float>* pixels) {
    for (const std::string& path : paths) {
      auto file = RecordFile::Open(path);
      ASSERT_TRUE(file.ok()) << file.status();
      auto scanner = (*file)->Scan(0, (*file)->num_records());
      ASSERT_TRUE(scanner.ok());
      while ((*scanner)->Next()) {
        auto features = Decode(std::string((*scanner)->record()));
        ASSERT_EQ(features.size(), 2u);
        pixels->push_back(features[0].floats.at((1 * 32 + 2) * 3 + 1));
        labels->push_back(features[1].int64s.at(0));
      }
    }
  }
  // No file under out/ (the writers may have made its directories).
  bool OutputIsEmpty() {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.File("out"), ec)) {
      if (e.is_regular_file()) return false;
    }
    return true;
  }

  testing::TempDir dir_;
};

TEST_F(Cifar10ImportTest, TrainFilesInOrderIntoShardsAndTestApart) {
  WriteAll();
  auto result = Import(/*per_shard=*/4);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->train_records, 15u);
  EXPECT_EQ(result->test_records, 3u);
  EXPECT_THAT(result->outputs, ElementsAre(dir_.File("out/train/data-00000-of-00004.recordio"),
                                           dir_.File("out/train/data-00001-of-00004.recordio"),
                                           dir_.File("out/train/data-00002-of-00004.recordio"),
                                           dir_.File("out/train/data-00003-of-00004.recordio"),
                                           dir_.File("out/test/data-00000-of-00001.recordio")));
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  ReadBack({result->outputs.begin(), result->outputs.end() - 1}, &labels, &pixels);
  ASSERT_EQ(labels.size(), 15u);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(labels[i], i % 10);
    EXPECT_EQ(pixels[i], Pixel(i, 1, 2, 1)) << i;
  }
  labels.clear();
  pixels.clear();
  ReadBack({result->outputs.back()}, &labels, &pixels);
  EXPECT_THAT(labels, ElementsAre(0, 1, 2));
  EXPECT_EQ(pixels[2], Pixel(102, 1, 2, 1));
}

TEST_F(Cifar10ImportTest, LimitTakesTheFirstRecordsOfEachSplit) {
  WriteAll();
  auto result = Import(/*per_shard=*/0, /*limit=*/5);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->train_records, 5u);
  EXPECT_EQ(result->test_records, 3u);
  EXPECT_THAT(result->outputs, ElementsAre(dir_.File("out/train/data.recordio"),
                                           dir_.File("out/test/data.recordio")));
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  ReadBack({result->outputs[0]}, &labels, &pixels);
  EXPECT_THAT(labels, ElementsAre(0, 1, 2, 3, 4));
}

TEST_F(Cifar10ImportTest, MissingFilesAreNamed) {
  WriteAll();
  std::filesystem::remove(dir_.File("src/data_batch_4.bin"));
  std::filesystem::remove(dir_.File("src/test_batch.bin"));
  auto result = Import();
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(),
              HasSubstr(StrCat(dir_.File("src"), ": missing data_batch_4.bin, test_batch.bin")));
  EXPECT_TRUE(OutputIsEmpty());

  Cifar10ImportOptions options;
  options.source_dir = dir_.File("nowhere");
  options.output_dir = dir_.File("out");
  EXPECT_EQ(ImportCifar10(options).status().message(),
            StrCat(dir_.File("nowhere"), ": no such directory"));
}

TEST_F(Cifar10ImportTest, TruncatedAndEmptyFilesAreNamedWithTheRecord) {
  WriteAll();
  std::filesystem::resize_file(dir_.File("src/data_batch_3.bin"), 2 * 3073 + 1000);
  auto result = Import();
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(result.status().message(),
            StrCat(dir_.File("src/data_batch_3.bin"),
                   ": truncated: 7146 bytes is not a whole number of 3073-byte records; "
                   "record 2 has only 1000 bytes"));
  EXPECT_TRUE(OutputIsEmpty());

  std::filesystem::resize_file(dir_.File("src/data_batch_3.bin"), 0);
  result = Import();
  EXPECT_EQ(result.status().message(),
            StrCat(dir_.File("src/data_batch_3.bin"), ": empty, holds no records"));
}

TEST_F(Cifar10ImportTest, BadLabelInTheTestFileLeavesNoOutput) {
  WriteAll();
  {
    std::fstream f(dir_.File("src/test_batch.bin"),
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(2 * 3073);
    f.put(static_cast<char>(200));
  }
  auto result = Import(/*per_shard=*/4);
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(result.status().message(),
            StrCat(dir_.File("src/test_batch.bin"),
                   ": record 2 (byte offset 6146): label 200 is not in 0..9"));
  EXPECT_TRUE(OutputIsEmpty());
}

}  // namespace
}  // namespace elasticdl
