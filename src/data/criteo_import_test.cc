#include "data/criteo_import.h"

#include <gmock/gmock.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/proto/example.pb.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A line with label `label`, I<k> = k - 7 (so I1..I6 negative), C<k> = hex.
std::string Line(std::string_view label = "1") {
  std::string line(label);
  for (int k = 1; k <= kCriteoIntegerFeatures; ++k) line += StrCat("\t", k - 7);
  for (int k = 1; k <= kCriteoCategoricalFeatures; ++k) line += fmt::format("\t{:08x}", k * 4097);
  return line;
}

// `line` with field `index` (0: label) replaced by `value`.
std::string WithField(std::string line, int index, std::string_view value) {
  size_t start = 0;
  for (int i = 0; i < index; ++i) start = line.find('\t', start) + 1;
  size_t end = line.find('\t', start);
  return line.replace(start, end == std::string::npos ? end : end - start, value);
}

Status Parse(const std::string& line, CriteoRecord* record = nullptr) {
  CriteoRecord scratch;
  return ParseCriteoLine(line, "day_0", 12, record ? record : &scratch);
}

std::vector<example::DecodedFeature> Decode(const CriteoRecord& record) {
  std::string bytes;
  CriteoExample(record, &bytes);
  std::vector<example::DecodedFeature> features;
  EXPECT_TRUE(example::DecodeAll(bytes, &features).ok());
  return features;
}

TEST(CriteoImportTest, FieldNames) {
  EXPECT_EQ(CriteoFieldName(0), "label");
  EXPECT_EQ(CriteoFieldName(1), "I1");
  EXPECT_EQ(CriteoFieldName(13), "I13");
  EXPECT_EQ(CriteoFieldName(14), "C1");
  EXPECT_EQ(CriteoFieldName(39), "C26");
}

TEST(CriteoImportTest, ParsesNegativeIntegersAndHexStrings) {
  const std::string line = Line();  // the record's strings point into it
  CriteoRecord r;
  ASSERT_TRUE(Parse(line, &r).ok());
  EXPECT_EQ(r.label, 1);
  EXPECT_EQ(r.integers[0], -6);
  EXPECT_EQ(r.integers[12], 6);
  EXPECT_EQ(r.categories[0], "00001001");
  EXPECT_EQ(r.categories[25], "0001a01a");
  ASSERT_TRUE(Parse(WithField(line, 0, "0"), &r).ok());
  EXPECT_EQ(r.label, 0);
}

TEST(CriteoImportTest, MissingFieldsAreLeftOutOfTheExample) {
  std::string line = WithField(WithField(WithField(Line(), 2, ""), 13, ""), 39, "");
  line = WithField(line, 14, "");
  CriteoRecord r;
  ASSERT_TRUE(Parse(line, &r).ok());
  EXPECT_FALSE(r.integers[1].has_value());
  EXPECT_TRUE(r.categories[0].empty());
  auto features = Decode(r);
  std::vector<std::string> keys;
  keys.reserve(features.size());
  for (const auto& f : features) keys.push_back(f.key);
  EXPECT_EQ(keys.size(), 36u);
  for (const char* absent : {"I2", "I13", "C1", "C26"}) {
    EXPECT_EQ(std::count(keys.begin(), keys.end(), absent), 0) << absent;
  }
  for (const auto& f : features) {
    if (f.key == "label") {
      EXPECT_EQ(f.kind, example::Kind::kInt64);
      EXPECT_THAT(f.int64s, ElementsAre(1));
    } else if (f.key == "I1") {
      EXPECT_EQ(f.kind, example::Kind::kInt64);
      EXPECT_THAT(f.int64s, ElementsAre(-6));
    } else if (f.key == "C2") {
      EXPECT_EQ(f.kind, example::Kind::kBytes);
      EXPECT_THAT(f.bytes, ElementsAre("00002002"));
    }
  }
}

// What protobuf's deterministic serialization makes of `record`.
std::string ProtobufExample(const CriteoRecord& record) {
  proto::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features["label"].mutable_int64_list()->add_value(record.label);
  for (int i = 0; i < kCriteoIntegerFeatures; ++i) {
    if (!record.integers[i].has_value()) continue;
    features[CriteoFieldName(1 + i)].mutable_int64_list()->add_value(*record.integers[i]);
  }
  for (int i = 0; i < kCriteoCategoricalFeatures; ++i) {
    if (record.categories[i].empty()) continue;
    features[CriteoFieldName(14 + i)].mutable_bytes_list()->add_value(
        std::string(record.categories[i]));
  }
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

TEST(CriteoImportTest, ExamplesAreProtobufsDeterministicBytes) {
  std::string line = Line();
  std::vector<std::string> lines = {
      line,
      WithField(WithField(WithField(line, 2, ""), 13, ""), 39, ""),
      WithField(WithField(line, 1, std::to_string(std::numeric_limits<int64_t>::min())), 2,
                std::to_string(std::numeric_limits<int64_t>::max())),
      // Lengths of two varint bytes, and an Example longer than 2^21 bytes.
      WithField(line, 20, std::string(300, 'x')),
      WithField(line, 20, std::string(3 << 20, 'y')),
  };
  for (size_t n = lines.size(), i = 0; i < n; ++i) {
    std::string sparse = lines[i];  // with most categories missing
    for (int f = 15; f < 39; ++f) sparse = WithField(sparse, f, "");
    lines.push_back(sparse);
  }
  std::string ours;
  for (const std::string& l : lines) {
    CriteoRecord r;
    ASSERT_TRUE(Parse(l, &r).ok());
    CriteoExample(r, &ours);
    std::string theirs = ProtobufExample(r);
    EXPECT_TRUE(ours == theirs) << l.substr(0, 200);
    CriteoExample(r, &ours);  // reusing the string
    EXPECT_TRUE(ours == theirs);
  }
}

TEST(CriteoImportTest, ErrorsNameFileLineAndField) {
  std::string line = Line();
  EXPECT_EQ(Parse(line.substr(0, line.rfind('\t'))).message(),
            "day_0: line 12: found 39 tab-separated fields, expected 40 (label, I1..I13, C1..C26)");
  EXPECT_THAT(Parse(line + "\textra").message(), HasSubstr("found 41 tab-separated fields"));
  EXPECT_THAT(Parse("").message(), HasSubstr("line 12: found 1 tab-separated field, expected 40"));
  EXPECT_EQ(Parse(WithField(line, 0, "2")).message(),
            "day_0: line 12: field label: '2' is not 0 or 1");
  EXPECT_EQ(Parse(WithField(line, 0, "")).message(), "day_0: line 12: field label: missing");
  EXPECT_EQ(Parse(WithField(line, 5, "1.5")).message(),
            "day_0: line 12: field I5: '1.5' is not an integer");
  EXPECT_EQ(Parse(WithField(line, 13, "+3")).message(),
            "day_0: line 12: field I13: '+3' is not an integer");
  EXPECT_EQ(Parse(WithField(line, 1, "99999999999999999999")).message(),
            "day_0: line 12: field I1: '99999999999999999999' is out of the int64 range");
  EXPECT_THAT(Parse(WithField(line, 3, std::string(100, 'x'))).message(),
              HasSubstr("field I3: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' (100 bytes)"));
  EXPECT_EQ(Parse(WithField(line, 3, "x")).code(), StatusCode::kInvalidArgument);
}

TEST(CriteoImportTest, ForEachLineAcrossReadsWithCrlfAndNoFinalNewline) {
  testing::TempDir dir;
  std::string path = dir.File("lines.txt");
  std::vector<std::string> want;
  {
    std::ofstream out(path, std::ios::binary);
    // Enough to span several 1 MiB reads, with one line longer than a read.
    for (int i = 0; i < 40000; ++i) want.push_back(std::string(i % 97, 'a' + i % 26));
    want.push_back(std::string(3 << 20, 'z'));
    want.push_back("");
    want.push_back("crlf");
    want.push_back("last");
    for (size_t i = 0; i < want.size(); ++i) {
      out << want[i] << (want[i] == "crlf" ? "\r\n" : i + 1 < want.size() ? "\n" : "");
    }
  }
  std::vector<std::string> got;
  ASSERT_TRUE(ForEachLine(path, [&](uint64_t n, std::string_view line) {
                EXPECT_EQ(n, got.size() + 1);
                got.emplace_back(line);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(got, want);

  std::ofstream(dir.File("empty.txt")) << "";
  int calls = 0;
  ASSERT_TRUE(ForEachLine(dir.File("empty.txt"), [&](uint64_t, std::string_view) {
                ++calls;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(calls, 0);
}

class CriteoImportFilesTest : public ::testing::Test {
 protected:
  void WriteLines(const std::string& name, int n, int bad_line = 0) {
    std::ofstream out(dir_.File(name), std::ios::binary);
    for (int i = 1; i <= n; ++i) {
      out << (i == bad_line ? WithField(Line(), 7, "seven") : Line(i % 3 == 0 ? "1" : "0")) << "\n";
    }
  }
  StatusOr<CriteoImportResult> Import(const std::string& source, uint64_t per_shard) {
    CriteoImportOptions options;
    options.source = source;
    options.output_dir = dir_.File("out");
    options.records_per_shard = per_shard;
    return ImportCriteo(options);
  }

  testing::TempDir dir_;
};

TEST_F(CriteoImportFilesTest, DirectoryInNameOrderIntoShards) {
  std::filesystem::create_directory(dir_.File("src"));
  WriteLines("src/day_1", 30);
  WriteLines("src/day_0", 20);
  std::ofstream(dir_.File("src/day_0.truth.json")) << "{}";
  std::ofstream(dir_.File("src/.hidden")) << "junk";
  auto files = CriteoSourceFiles(dir_.File("src"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir_.File("src/day_0"), dir_.File("src/day_1")));

  auto result = Import(dir_.File("src"), 20);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->records, 50u);
  EXPECT_THAT(result->outputs, ElementsAre(dir_.File("out/data-00000-of-00003.recordio"),
                                           dir_.File("out/data-00001-of-00003.recordio"),
                                           dir_.File("out/data-00002-of-00003.recordio")));
  std::vector<int64_t> labels;
  for (const std::string& path : result->outputs) {
    auto file = RecordFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto scanner = (*file)->Scan(0, (*file)->num_records());
    ASSERT_TRUE(scanner.ok());
    while ((*scanner)->Next()) {
      std::vector<example::DecodedFeature> features;
      ASSERT_TRUE(example::DecodeAll((*scanner)->record(), &features).ok());
      ASSERT_EQ(features.size(), 40u);
      EXPECT_EQ(features.back().key, "label");
      labels.push_back(features.back().int64s.at(0));
    }
  }
  ASSERT_EQ(labels.size(), 50u);
  // Line 3 of day_0 is a click; so is line 3 of day_1 (record 22).
  EXPECT_EQ(labels[2], 1);
  EXPECT_EQ(labels[3], 0);
  EXPECT_EQ(labels[22], 1);
}

TEST_F(CriteoImportFilesTest, ErrorNamesTheFileAndLeavesNoOutput) {
  std::filesystem::create_directory(dir_.File("src"));
  WriteLines("src/a", 10);
  WriteLines("src/b", 10, /*bad_line=*/4);
  auto result = Import(dir_.File("src"), 5);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(),
            StrCat(dir_.File("src/b"), ": line 4: field I7: 'seven' is not an integer"));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.File("out")));
}

TEST_F(CriteoImportFilesTest, RefusesGzipMissingAndEmptySources) {
  std::ofstream(dir_.File("day_0.gz"), std::ios::binary) << "\x1f\x8b"
                                                            "junk";
  auto result = Import(dir_.File("day_0.gz"), 0);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("day_0.gz: gzip-compressed"));

  result = Import(dir_.File("nowhere"), 0);
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("nowhere: no such file or directory"));

  std::filesystem::create_directory(dir_.File("empty_dir"));
  result = Import(dir_.File("empty_dir"), 0);
  EXPECT_THAT(result.status().message(), HasSubstr("holds no data files"));

  std::ofstream(dir_.File("empty.tsv")) << "";
  result = Import(dir_.File("empty.tsv"), 0);
  EXPECT_THAT(result.status().message(), HasSubstr("empty.tsv: no lines"));
}

}  // namespace
}  // namespace elasticdl
