// Compatibility with record files that ElasticDL did not write, and of the
// files ElasticDL writes with a reader that is not ElasticDL.
//
// make_compat_files.py lays out RecordIO and TFRecord files (and the
// tf.train.Example records in them) byte by byte from the format
// descriptions and lists what they hold in manifest.txt; read_files.py parses
// files the same way. Both run under /usr/bin/python3 with nothing but the
// standard library, python3-snappy's raw block codec and python3-crc32c, so
// a misreading of a format shared by our reader and our writer shows up here
// even though each round-trips with the other.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/data/recordio.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifndef ELASTICDL_SOURCE_DIR
#error "tests/compat/CMakeLists.txt defines ELASTICDL_SOURCE_DIR"
#endif

namespace elasticdl {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr char kPython[] = "/usr/bin/python3";

// ---------------------------------------------------------------------------
// Processes, temporary directories and hex.

// The source root: $ELASTICDL_TEST_SRCDIR (set by CTest) or the configured one.
std::string SourceDir() {
  const char* env = std::getenv("ELASTICDL_TEST_SRCDIR");
  return env != nullptr && *env != '\0' ? env : ELASTICDL_SOURCE_DIR;
}

std::string ScriptPath(std::string_view name) {
  return StrCat(SourceDir(), "/tests/compat/", name);
}

// Single-quotes `s` for /bin/sh.
std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `args` (quoted here) through /bin/sh and collects its standard output;
// its standard error goes to the test log. Returns the exit status, or -1 if
// the command could not run or did not exit normally.
int RunCommand(const std::vector<std::string>& args, std::string* output) {
  std::string command;
  for (const std::string& arg : args) command += ShellQuote(arg) + " ";
  output->clear();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  int status = pclose(pipe);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/elasticdl_compat_test.XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  // Empty if the directory could not be created.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The scripts write empty byte strings as "-".
std::string ToHex(std::string_view bytes) {
  if (bytes.empty()) return "-";
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex == "-") return std::string();
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    out[i] = static_cast<char>(value);
  }
  return out;
}

template <typename Int>
std::optional<Int> ParseInt(std::string_view token, int base = 10) {
  Int value{};
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value, base);
  if (ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

std::vector<std::string> Tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string token; in >> token;) out.push_back(token);
  return out;
}

// ---------------------------------------------------------------------------
// manifest.txt (its grammar is in make_compat_files.py).

struct ExpectedFeature {
  std::string key;
  example::Kind kind = example::Kind::kNone;
  std::vector<uint32_t> float_bits;  // floats compare bit for bit (NaN, -0)
  std::vector<int64_t> int64s;
  std::vector<std::string> bytes;
};

struct ExpectedExample {
  uint64_t record = 0;
  std::vector<ExpectedFeature> features;  // sorted by key
};

struct ExpectedFile {
  RecordFormat format = RecordFormat::kRecordIO;
  std::string name;
  std::vector<std::string> records;
  std::vector<uint32_t> chunk_compressors;  // RecordIO only
  std::vector<uint32_t> chunk_records;      // RecordIO only
  std::vector<ExpectedExample> examples;
};

// Parses one "feature KEY_HEX KIND COUNT VALUES..." line.
std::optional<ExpectedFeature> ParseFeature(const std::vector<std::string>& t) {
  if (t.size() < 4) return std::nullopt;
  ExpectedFeature f;
  std::optional<std::string> key = FromHex(t[1]);
  std::optional<size_t> count = ParseInt<size_t>(t[3]);
  if (!key || !count || t.size() != 4 + *count) return std::nullopt;
  f.key = *key;
  for (size_t i = 4; i < t.size(); ++i) {
    if (t[2] == "float") {
      std::optional<uint32_t> bits = ParseInt<uint32_t>(t[i], 16);
      if (!bits) return std::nullopt;
      f.float_bits.push_back(*bits);
    } else if (t[2] == "int64") {
      std::optional<int64_t> v = ParseInt<int64_t>(t[i]);
      if (!v) return std::nullopt;
      f.int64s.push_back(*v);
    } else if (t[2] == "bytes") {
      std::optional<std::string> b = FromHex(t[i]);
      if (!b) return std::nullopt;
      f.bytes.push_back(*b);
    } else {
      return std::nullopt;
    }
  }
  if (t[2] == "float") f.kind = example::Kind::kFloat;
  if (t[2] == "int64") f.kind = example::Kind::kInt64;
  if (t[2] == "bytes") f.kind = example::Kind::kBytes;
  if (t[2] != "none" && f.kind == example::Kind::kNone) return std::nullopt;
  return f;
}

std::optional<std::vector<uint32_t>> ParseUint32s(const std::vector<std::string>& t) {
  std::vector<uint32_t> out;
  for (size_t i = 1; i < t.size(); ++i) {
    std::optional<uint32_t> v = ParseInt<uint32_t>(t[i]);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

StatusOr<std::vector<ExpectedFile>> ParseManifest(std::istream& in) {
  std::vector<ExpectedFile> files;
  ExpectedFile* file = nullptr;  // open between "file" and "end"
  size_t declared_records = 0;
  size_t declared_features = 0;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    auto error = [&](std::string_view what) {
      return absl::InvalidArgumentError(
          StrCat("manifest.txt:", line_number, ": ", what, ": ", line.substr(0, 80)));
    };
    std::vector<std::string> t = Tokens(line);
    if (t.empty()) continue;
    if (t[0] == "file") {
      if (file != nullptr) return error("'file' inside a file");
      std::optional<size_t> n = t.size() == 4 ? ParseInt<size_t>(t[3]) : std::nullopt;
      StatusOr<RecordFormat> format = ParseRecordFormat(t.size() > 1 ? t[1] : "");
      if (!n || !format.ok()) return error("bad 'file' line");
      file = &files.emplace_back();
      file->format = *format;
      file->name = t[2];
      declared_records = *n;
      continue;
    }
    if (file == nullptr) return error("outside a file");
    if (t[0] == "record") {
      std::optional<std::string> record = t.size() == 2 ? FromHex(t[1]) : std::nullopt;
      if (!record || !file->examples.empty()) return error("bad 'record' line");
      file->records.push_back(std::move(*record));
    } else if (t[0] == "compressors" || t[0] == "chunk_records") {
      std::optional<std::vector<uint32_t>> values = ParseUint32s(t);
      if (!values) return error("bad chunk layout");
      (t[0] == "compressors" ? file->chunk_compressors : file->chunk_records) = *values;
    } else if (t[0] == "example") {
      std::optional<uint64_t> record = t.size() == 3 ? ParseInt<uint64_t>(t[1]) : std::nullopt;
      std::optional<size_t> n = t.size() == 3 ? ParseInt<size_t>(t[2]) : std::nullopt;
      if (!record || !n) return error("bad 'example' line");
      if (!file->examples.empty() && file->examples.back().features.size() != declared_features) {
        return error("previous example has the wrong number of features");
      }
      file->examples.push_back({*record, {}});
      declared_features = *n;
    } else if (t[0] == "feature") {
      std::optional<ExpectedFeature> feature = ParseFeature(t);
      if (!feature || file->examples.empty()) return error("bad 'feature' line");
      file->examples.back().features.push_back(std::move(*feature));
    } else if (t[0] == "end") {
      if (file->records.size() != declared_records) return error("wrong number of records");
      if (!file->examples.empty() && file->examples.back().features.size() != declared_features) {
        return error("last example has the wrong number of features");
      }
      file = nullptr;
    } else {
      return error("unknown line");
    }
  }
  if (file != nullptr) return absl::InvalidArgumentError("manifest.txt: no final 'end'");
  return files;
}

// ---------------------------------------------------------------------------
// Reading and comparing records.

// Reads records [start, end) of `file`, checking the scanner's indices.
std::vector<std::string> ReadRange(const RecordFile& file, uint64_t start, uint64_t end) {
  std::vector<std::string> out;
  StatusOr<std::unique_ptr<RecordScanner>> scan = file.Scan(start, end);
  EXPECT_TRUE(scan.ok()) << scan.status();
  if (!scan.ok()) return out;
  while ((*scan)->Next()) {
    EXPECT_EQ((*scan)->index(), start + out.size()) << file.path();
    out.emplace_back((*scan)->record());
  }
  EXPECT_TRUE((*scan)->status().ok()) << (*scan)->status();
  return out;
}

// Compares records without printing megabytes of them on a mismatch.
// `expected[i]` is record `first + i` of the file named by `what`.
void ExpectSameRecords(const std::vector<std::string>& actual,
                       const std::vector<std::string>& expected, uint64_t first,
                       std::string_view what) {
  EXPECT_EQ(actual.size(), expected.size()) << what << ": number of records";
  int reported = 0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()) && reported < 5; ++i) {
    if (actual[i] == expected[i]) continue;
    auto diff =
        std::mismatch(actual[i].begin(), actual[i].end(), expected[i].begin(), expected[i].end());
    ADD_FAILURE() << what << ": record " << first + i << " has " << actual[i].size()
                  << " bytes, expected " << expected[i].size() << "; first difference at byte "
                  << (diff.first - actual[i].begin())
                  << "\n  got:      " << ToHex(actual[i]).substr(0, 80)
                  << "\n  expected: " << ToHex(expected[i]).substr(0, 80);
    ++reported;
  }
}

std::vector<std::string> Slice(const std::vector<std::string>& v, uint64_t start, uint64_t end) {
  return std::vector<std::string>(v.begin() + static_cast<ptrdiff_t>(start),
                                  v.begin() + static_cast<ptrdiff_t>(end));
}

// Interesting places to start and end a range: the ends, the thirds, and each
// RecordIO chunk's first record and its neighbours.
std::vector<uint64_t> RangeBounds(const RecordFile& file) {
  uint64_t n = file.num_records();
  std::set<uint64_t> bounds = {0, 1, n / 3, n / 2, 2 * n / 3, n == 0 ? 0 : n - 1, n};
  if (const auto* recordio = dynamic_cast<const RecordIOFile*>(&file)) {
    for (const RecordIOChunkInfo& chunk : recordio->chunks()) {
      uint64_t f = chunk.first_record;
      bounds.insert({f == 0 ? 0 : f - 1, f, f + 1, f + chunk.num_records});
    }
  }
  std::vector<uint64_t> out;
  for (uint64_t b : bounds) {
    if (b <= n) out.push_back(b);
  }
  return out;
}

void ExpectFeature(const example::DecodedFeature& actual, const ExpectedFeature& expected,
                   std::string_view what) {
  SCOPED_TRACE(StrCat(what, ", feature '", expected.key, "'"));
  EXPECT_EQ(actual.key, expected.key);
  EXPECT_EQ(example::KindName(actual.kind), example::KindName(expected.kind));
  std::vector<uint32_t> float_bits;
  for (float f : actual.floats) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    float_bits.push_back(bits);
  }
  EXPECT_THAT(float_bits, ElementsAreArray(expected.float_bits));
  EXPECT_THAT(actual.int64s, ElementsAreArray(expected.int64s));
  EXPECT_THAT(actual.bytes, ElementsAreArray(expected.bytes));
}

// ---------------------------------------------------------------------------
// Files written by make_compat_files.py, read by RecordFile.

class ForeignFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
    std::string output;
    ASSERT_EQ(RunCommand({kPython, ScriptPath("make_compat_files.py"), dir_.path()}, &output), 0)
        << "make_compat_files.py failed; its error is above";
    std::ifstream manifest(Path("manifest.txt"));
    ASSERT_TRUE(manifest) << "no manifest.txt in " << dir_.path();
    StatusOr<std::vector<ExpectedFile>> files = ParseManifest(manifest);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = std::move(*files);
  }

  std::string Path(std::string_view name) const { return StrCat(dir_.path(), "/", name); }

  // Opens `expected` the way users do: the format from the file name.
  std::unique_ptr<RecordFile> Open(const ExpectedFile& expected) const {
    StatusOr<std::unique_ptr<RecordFile>> file = RecordFile::Open(Path(expected.name));
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return nullptr;
    EXPECT_EQ((*file)->format(), expected.format) << expected.name;
    return std::move(*file);
  }

  const ExpectedFile* Find(std::string_view name) const {
    for (const ExpectedFile& f : files_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  ScopedTempDir dir_;
  std::vector<ExpectedFile> files_;
};

// Guards against a generator that quietly writes less than the tests assume.
TEST_F(ForeignFilesTest, ManifestListsEveryCase) {
  std::vector<std::string> names;
  size_t examples = 0;
  size_t largest = 0;
  for (const ExpectedFile& f : files_) {
    names.push_back(f.name);
    examples += f.examples.size();
    for (const std::string& r : f.records) largest = std::max(largest, r.size());
  }
  EXPECT_THAT(names, ElementsAre("none.recordio", "snappy.recordio", "gzip.recordio",
                                 "mixed.recordio", "empty_records.recordio", "large.recordio",
                                 "zero_bytes.recordio", "basic.tfrecord", "zero_bytes.tfrecord",
                                 "only_empty.tfrecord", "examples.tfrecord", "examples.recordio"));
  EXPECT_EQ(examples, 10u);
  EXPECT_GT(largest, size_t{2} * 65536);
}

TEST_F(ForeignFilesTest, EveryRecordMatches) {
  for (const ExpectedFile& expected : files_) {
    SCOPED_TRACE(expected.name);
    std::unique_ptr<RecordFile> file = Open(expected);
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(file->num_records(), expected.records.size());
    ExpectSameRecords(ReadRange(*file, 0, file->num_records()), expected.records, 0, expected.name);
  }
}

TEST_F(ForeignFilesTest, EveryRangeMatches) {
  size_t ranges = 0;
  for (const ExpectedFile& expected : files_) {
    SCOPED_TRACE(expected.name);
    std::unique_ptr<RecordFile> file = Open(expected);
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(file->num_records(), expected.records.size());
    std::vector<uint64_t> bounds = RangeBounds(*file);
    for (size_t i = 0; i < bounds.size(); ++i) {
      for (size_t j = i; j < bounds.size(); ++j) {
        ExpectSameRecords(ReadRange(*file, bounds[i], bounds[j]),
                          Slice(expected.records, bounds[i], bounds[j]), bounds[i],
                          StrCat(expected.name, " [", bounds[i], ", ", bounds[j], ")"));
        ++ranges;
      }
    }
    // Past the end is an error, not a short read.
    EXPECT_FALSE(file->Scan(0, file->num_records() + 1).ok());
  }
  EXPECT_GT(ranges, 500u);
}

TEST_F(ForeignFilesTest, ChunkIndexMatchesLayout) {
  for (const ExpectedFile& expected : files_) {
    if (expected.format != RecordFormat::kRecordIO) continue;
    SCOPED_TRACE(expected.name);
    std::unique_ptr<RecordFile> file = Open(expected);
    const auto* recordio = dynamic_cast<const RecordIOFile*>(file.get());
    ASSERT_NE(recordio, nullptr);
    std::vector<uint32_t> compressors;
    std::vector<uint32_t> counts;
    uint64_t first = 0;
    for (const RecordIOChunkInfo& chunk : recordio->chunks()) {
      compressors.push_back(static_cast<uint32_t>(chunk.compressor));
      counts.push_back(chunk.num_records);
      EXPECT_EQ(chunk.first_record, first);
      first += chunk.num_records;
    }
    EXPECT_THAT(compressors, ElementsAreArray(expected.chunk_compressors));
    EXPECT_THAT(counts, ElementsAreArray(expected.chunk_records));
  }
  const ExpectedFile* mixed = Find("mixed.recordio");
  ASSERT_NE(mixed, nullptr);
  EXPECT_THAT(mixed->chunk_compressors, ElementsAre(0, 1, 2, 1, 0, 2, 2, 0));
}

TEST_F(ForeignFilesTest, ExamplesDecode) {
  size_t checked = 0;
  for (const ExpectedFile& expected : files_) {
    if (expected.examples.empty()) continue;
    SCOPED_TRACE(expected.name);
    std::unique_ptr<RecordFile> file = Open(expected);
    ASSERT_NE(file, nullptr);
    std::vector<std::string> records = ReadRange(*file, 0, file->num_records());
    for (const ExpectedExample& ex : expected.examples) {
      ASSERT_LT(ex.record, records.size());
      std::string what = StrCat("record ", ex.record);
      std::vector<example::DecodedFeature> decoded;
      Status s = example::DecodeAll(records[ex.record], &decoded);
      ASSERT_TRUE(s.ok()) << what << ": " << s;
      // Both sides are sorted by key, bytewise.
      ASSERT_EQ(decoded.size(), ex.features.size()) << what;
      for (size_t i = 0; i < decoded.size(); ++i) {
        ExpectFeature(decoded[i], ex.features[i], what);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 10u);
}

// ---------------------------------------------------------------------------
// Files written by RecordWriter, read by read_files.py.

// What read_files.py reported about a file.
struct ForeignRead {
  std::vector<std::string> records;
  std::vector<uint32_t> chunk_compressors;
  std::vector<uint32_t> chunk_records;
  // Per chunk, the types of its snappy framing chunks (hex); empty unless snappy.
  std::vector<std::vector<std::string>> snappy_frames;
};

// Runs read_files.py on `path`; fails the test if it reports an error.
std::optional<ForeignRead> ReadForeign(RecordFormat format, const std::string& path) {
  std::string output;
  int status = RunCommand(
      {kPython, ScriptPath("read_files.py"), std::string(RecordFormatName(format)), path}, &output);
  EXPECT_EQ(status, 0) << "read_files.py rejected " << path << "; its error is above";
  if (status != 0) return std::nullopt;
  ForeignRead read;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> t = Tokens(line);
    std::optional<std::string> record;
    if (t.size() == 2 && t[0] == "record" && (record = FromHex(t[1]))) {
      read.records.push_back(std::move(*record));
    } else if (t.size() >= 3 && t[0] == "chunk" && ParseInt<uint32_t>(t[1]) &&
               ParseInt<uint32_t>(t[2])) {
      read.chunk_compressors.push_back(*ParseInt<uint32_t>(t[1]));
      read.chunk_records.push_back(*ParseInt<uint32_t>(t[2]));
      read.snappy_frames.emplace_back(t.begin() + 3, t.end());
    } else {
      ADD_FAILURE() << "read_files.py printed an unexpected line: " << line.substr(0, 80);
      return std::nullopt;
    }
  }
  return read;
}

// Deterministic bytes; `compressible` ones are text, the others look random
// to a compressor.
std::string TestBytes(size_t n, uint32_t seed, bool compressible) {
  std::string out;
  out.reserve(n);
  uint32_t state = seed * 2654435761u + 1;
  while (out.size() < n) {
    if (compressible) {
      out += StrCat("record ", seed, " line ", out.size() / 32, ";\n");
    } else {
      state = state * 1664525u + 1013904223u;
      out += static_cast<char>(state >> 24);
    }
  }
  out.resize(n);
  return out;
}

// Empty records, short and mid-sized text and binary, and records over 64
// KiB, compressible and not (so a snappy writer has reason to emit both
// compressed and uncompressed blocks, several per record).
std::vector<std::string> WriterTestRecords() {
  std::vector<std::string> records = {"", "a", ""};
  for (uint32_t i = 0; i < 60; ++i) {
    records.push_back(TestBytes(i * 37 % 700, i, i % 3 != 0));
    if (i % 11 == 0) records.emplace_back();
  }
  records.push_back(TestBytes(200000, 1, true));
  records.push_back(TestBytes(150000, 2, false));
  records.push_back(TestBytes(65536, 3, false));
  records.emplace_back();
  return records;
}

class WrittenFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed"; }

  std::string Path(std::string_view name) const { return StrCat(dir_.path(), "/", name); }

  // Writes `records_` to `name`.
  void Write(const std::string& name, const RecordWriterOptions& options) {
    StatusOr<std::unique_ptr<RecordWriter>> writer = RecordWriter::Create(Path(name), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (const std::string& r : records_) ASSERT_TRUE((*writer)->Write(r).ok());
    ASSERT_TRUE((*writer)->Close().ok());
    EXPECT_EQ((*writer)->records_written(), records_.size());
  }

  // Writes RecordIO with `compressor`, reads it with read_files.py and checks
  // the records and that every chunk has the compressor.
  void CheckRecordIO(Compressor compressor, size_t max_chunk_bytes, ForeignRead* read) {
    std::string name = StrCat(CompressorName(compressor), "_", max_chunk_bytes, ".recordio");
    SCOPED_TRACE(name);
    RecordWriterOptions options;
    options.format = RecordFormat::kRecordIO;
    options.compressor = compressor;
    options.max_chunk_bytes = max_chunk_bytes;
    ASSERT_NO_FATAL_FAILURE(Write(name, options));
    std::optional<ForeignRead> result = ReadForeign(RecordFormat::kRecordIO, Path(name));
    ASSERT_TRUE(result.has_value());
    ExpectSameRecords(result->records, records_, 0, name);
    ASSERT_FALSE(result->chunk_compressors.empty());
    EXPECT_THAT(result->chunk_compressors, ::testing::Each(static_cast<uint32_t>(compressor)));
    *read = std::move(*result);
  }

  ScopedTempDir dir_;
  const std::vector<std::string> records_ = WriterTestRecords();
};

TEST_F(WrittenFilesTest, RecordIONone) {
  ForeignRead read;
  ASSERT_NO_FATAL_FAILURE(CheckRecordIO(Compressor::kNone, 4096, &read));
  EXPECT_GT(read.chunk_records.size(), 5u);
}

TEST_F(WrittenFilesTest, RecordIOGzip) {
  ForeignRead read;
  ASSERT_NO_FATAL_FAILURE(CheckRecordIO(Compressor::kGzip, 4096, &read));
  EXPECT_GT(read.chunk_records.size(), 5u);
}

TEST_F(WrittenFilesTest, RecordIOSnappy) {
  ForeignRead read;
  ASSERT_NO_FATAL_FAILURE(CheckRecordIO(Compressor::kSnappy, 4096, &read));
  EXPECT_GT(read.chunk_records.size(), 5u);
  // The incompressible records must have been stored as uncompressed blocks,
  // the text as compressed ones.
  std::vector<std::string> all_frames;
  for (const auto& frames : read.snappy_frames) {
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames[0], "ff") << "a snappy stream must start with its identifier";
    all_frames.insert(all_frames.end(), frames.begin(), frames.end());
  }
  EXPECT_THAT(all_frames, Contains("00"));
  EXPECT_THAT(all_frames, Contains("01"));
}

TEST_F(WrittenFilesTest, RecordIOSnappyOneLargeChunk) {
  ForeignRead read;
  ASSERT_NO_FATAL_FAILURE(CheckRecordIO(Compressor::kSnappy, size_t{32} << 20, &read));
  ASSERT_THAT(read.chunk_records, ElementsAre(records_.size()));
  // Over 400 KiB of payload: the stream holds several 64 KiB blocks.
  EXPECT_GT(read.snappy_frames[0].size(), 6u);
}

TEST_F(WrittenFilesTest, RecordIOMixedCompressors) {
  StatusOr<std::unique_ptr<RecordIOWriter>> writer = RecordIOWriter::Create(Path("mixed.recordio"));
  ASSERT_TRUE(writer.ok()) << writer.status();
  const Compressor order[] = {Compressor::kGzip, Compressor::kNone, Compressor::kSnappy};
  std::vector<uint32_t> expected_compressors;
  std::vector<uint32_t> expected_counts;
  for (size_t i = 0; i < records_.size(); ++i) {
    if (i % 10 == 0) {
      ASSERT_TRUE((*writer)->FinishChunk().ok());
      Compressor c = order[(i / 10) % 3];
      (*writer)->set_compressor(c);
      expected_compressors.push_back(static_cast<uint32_t>(c));
      expected_counts.push_back(0);
    }
    ASSERT_TRUE((*writer)->Write(records_[i]).ok());
    ++expected_counts.back();
  }
  ASSERT_TRUE((*writer)->Close().ok());
  std::optional<ForeignRead> read = ReadForeign(RecordFormat::kRecordIO, Path("mixed.recordio"));
  ASSERT_TRUE(read.has_value());
  ExpectSameRecords(read->records, records_, 0, "mixed.recordio");
  EXPECT_THAT(read->chunk_compressors, ElementsAreArray(expected_compressors));
  EXPECT_THAT(read->chunk_records, ElementsAreArray(expected_counts));
}

TEST_F(WrittenFilesTest, TFRecord) {
  RecordWriterOptions options;
  options.format = RecordFormat::kTFRecord;
  ASSERT_NO_FATAL_FAILURE(Write("records.tfrecord", options));
  std::optional<ForeignRead> read = ReadForeign(RecordFormat::kTFRecord, Path("records.tfrecord"));
  ASSERT_TRUE(read.has_value());
  ExpectSameRecords(read->records, records_, 0, "records.tfrecord");
  EXPECT_TRUE(read->chunk_records.empty());
}

TEST_F(WrittenFilesTest, NoRecords) {
  for (RecordFormat format : {RecordFormat::kRecordIO, RecordFormat::kTFRecord}) {
    std::string name = StrCat("empty.", RecordFormatName(format));
    SCOPED_TRACE(name);
    RecordWriterOptions options;
    options.format = format;
    StatusOr<std::unique_ptr<RecordWriter>> writer = RecordWriter::Create(Path(name), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Close().ok());
    std::optional<ForeignRead> read = ReadForeign(format, Path(name));
    ASSERT_TRUE(read.has_value());
    EXPECT_THAT(read->records, ::testing::IsEmpty());
    EXPECT_THAT(read->chunk_records, ::testing::IsEmpty());
  }
}

// The checks above can fail: read_files.py notices a changed byte.
TEST_F(WrittenFilesTest, ForeignReaderRejectsCorruption) {
  RecordWriterOptions options;
  options.format = RecordFormat::kTFRecord;
  ASSERT_NO_FATAL_FAILURE(Write("corrupt.tfrecord", options));
  {
    std::fstream f(Path("corrupt.tfrecord"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16 + 12);  // record 1's data, "a" (record 0 is empty: 16 bytes framed)
    f.put('b');
  }
  std::string output;
  EXPECT_EQ(RunCommand({kPython, ScriptPath("read_files.py"), "tfrecord", Path("corrupt.tfrecord")},
                       &output),
            1);
}

}  // namespace
}  // namespace elasticdl
