#include "elasticdl/data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "elasticdl/data/recordio.h"
#include "testing/examples.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;

std::vector<int> Range(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

template <typename T>
std::vector<T> Collect(Dataset<T> d) {
  std::vector<T> out;
  for (auto& x : d) out.push_back(x);
  return out;
}

TEST(DatasetTest, MapFilterTake) {
  auto d = Dataset<int>::FromVector(Range(10))
               .map([](int x) { return x * 10; })
               .filter([](const int& x) { return x % 20 == 0; })
               .take(3);
  EXPECT_EQ(Collect(d), (std::vector<int>{0, 20, 40}));
}

TEST(DatasetTest, MapMayChangeTypeAndReturnStatus) {
  auto d = Dataset<int>::FromVector(Range(3)).map(
      [](int x) -> StatusOr<std::string> { return std::string(x, '*'); });
  EXPECT_EQ(Collect(d), (std::vector<std::string>{"", "*", "**"}));
}

TEST(DatasetTest, ErrorsAndExceptionsStopThePipelineWithPosition) {
  auto failing = Dataset<int>::FromVector(Range(5)).map([](int x) -> StatusOr<int> {
    if (x == 3) return absl::InvalidArgumentError("bad three");
    return x;
  });
  std::vector<int> seen;
  while (true) {
    auto next = failing.Next();
    if (!next.ok()) {
      EXPECT_THAT(next.status().message(), HasSubstr("bad three"));
      break;
    }
    ASSERT_TRUE(next->has_value());
    seen.push_back(**next);
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));

  auto throwing = Dataset<int>::FromVector(Range(5)).map([](int x) {
    if (x == 2) throw std::runtime_error("boom");
    return x;
  });
  try {
    Collect(throwing);
    FAIL() << "expected DatasetError";
  } catch (const DatasetError& e) {
    EXPECT_THAT(std::string(e.status().message()), HasSubstr("element 2: function threw: boom"));
  }
}

TEST(DatasetTest, ShuffleIsAPermutationAndSeeded) {
  auto a = Collect(Dataset<int>::FromVector(Range(1000)).shuffle(100, 7));
  auto b = Collect(Dataset<int>::FromVector(Range(1000)).shuffle(100, 7));
  auto c = Collect(Dataset<int>::FromVector(Range(1000)).shuffle(100, 8));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, Range(1000));
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, Range(1000));
}

// The pipeline a dataset_fn builds, as a function of its input's seed.
std::vector<int> SeededPipeline(uint64_t seed, size_t buffer) {
  return Collect(Dataset<int>::FromVector(Range(300))
                     .with_seed(seed)
                     .map([](int x) { return x * 3; })
                     .shuffle(buffer)
                     .filter([](int x) { return x % 2 == 0; })
                     .shuffle(buffer));
}

TEST(DatasetTest, ASeededPipelineShufflesTheSameWayEveryTime) {
  for (size_t buffer : {size_t{16}, size_t{1000}}) {
    std::vector<int> a = SeededPipeline(11, buffer);
    EXPECT_EQ(a, SeededPipeline(11, buffer));
    EXPECT_NE(a, SeededPipeline(12, buffer));
    std::vector<int> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(a, sorted);
    EXPECT_EQ(sorted.size(), 150u);
  }
  // Each stage derives its own seed: two shuffles in a row do not undo or
  // repeat each other.
  auto once = Collect(Dataset<int>::FromVector(Range(100)).with_seed(3).shuffle(100));
  auto twice = Collect(Dataset<int>::FromVector(Range(100)).with_seed(3).shuffle(100).shuffle(100));
  EXPECT_NE(once, twice);
  EXPECT_EQ(Dataset<int>::FromVector({}).seed(), std::nullopt);
  EXPECT_NE(Dataset<int>::FromVector({}).with_seed(3).map([](int x) { return x; }).seed(),
            std::nullopt);
}

TEST(DatasetTest, AnUnseededShuffleDiffersBetweenRuns) {
  auto a = Collect(Dataset<int>::FromVector(Range(1000)).shuffle(1000));
  auto b = Collect(Dataset<int>::FromVector(Range(1000)).shuffle(1000));
  EXPECT_NE(a, b);
}

TEST(DatasetTest, MapGeneratorsAreSeededByPositionOnAnyNumberOfThreads) {
  auto noisy = [](size_t workers, uint64_t seed) {
    std::vector<double> out;
    auto d =
        Dataset<int>::FromVector(Range(200))
            .with_seed(seed)
            .map([](int x, at::Generator& gen) { return x + torch::rand({1}, gen).item<double>(); },
                 MapOptions().workers(workers));
    for (double v : d) out.push_back(v);
    return out;
  };
  std::vector<double> inline_run = noisy(0, 5);
  EXPECT_EQ(inline_run, noisy(3, 5));
  EXPECT_NE(inline_run, noisy(0, 6));
  for (int i = 0; i < 200; ++i) {
    EXPECT_GE(inline_run[i], i);
    EXPECT_LT(inline_run[i], i + 1);
  }
  EXPECT_NE(inline_run[0] - 0, inline_run[1] - 1);
}

TEST(DatasetTest, SkipDropsThePrefixOfTheSameStream) {
  auto batches = [] {
    return Dataset<int>::FromVector(Range(50))
        .with_seed(9)
        .shuffle(64)
        .map([](int x) { return torch::tensor({x}); })
        .batch(8);
  };
  auto full = Collect(batches());
  auto skipped = Collect(batches().skip(3));
  ASSERT_EQ(full.size(), 7u);
  ASSERT_EQ(skipped.size(), 4u);
  for (size_t i = 0; i < skipped.size(); ++i) EXPECT_TRUE(torch::equal(skipped[i], full[i + 3]));
  EXPECT_TRUE(Collect(Dataset<int>::FromVector(Range(5)).skip(9)).empty());
}

TEST(DatasetTest, BatchCollatesFeatureMapsAndLabels) {
  std::vector<Example> items;
  for (int i = 0; i < 5; ++i) {
    items.push_back({{{"x", torch::full({2}, i)}}, torch::tensor({i})});
  }
  auto batches = Collect(Dataset<Example>::FromVector(items).batch(2));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].features.at("x").sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(batches[2].labels.sizes(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Collect(Dataset<Example>::FromVector(items).batch(2, true)).size(), 2u);
}

TEST(DatasetTest, BatchOfRaggedTensorsIsAClearError) {
  std::vector<torch::Tensor> items = {torch::zeros({2}), torch::zeros({3})};
  auto next = Dataset<torch::Tensor>::FromVector(items).batch(2).Next();
  ASSERT_FALSE(next.ok());
  EXPECT_THAT(next.status().message(), HasSubstr("batch 0: cannot stack element 1 ([3]"));
}

TEST(DatasetTest, ParallelMapKeepsOrderAndUsesThreads) {
  std::atomic<int> concurrent{0}, peak{0};
  auto d = Dataset<int>::FromVector(Range(200))
               .map(
                   [&](int x) {
                     int now = ++concurrent;
                     int p = peak.load();
                     while (now > p && !peak.compare_exchange_weak(p, now)) {
                     }
                     std::this_thread::sleep_for(std::chrono::microseconds((x * 37) % 200));
                     --concurrent;
                     return x * 2;
                   },
                   MapOptions().workers(4).max_queue_size(8));
  auto out = Collect(d);
  ASSERT_EQ(out.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(out[i], 2 * i);
  EXPECT_GT(peak.load(), 1);
  EXPECT_LE(peak.load(), 4);
}

TEST(DatasetTest, ParallelMapBoundsItsQueue) {
  std::atomic<int> pulled{0};
  auto d = Dataset<int>::FromVector(Range(100))
               .map([&](int x) {
                 ++pulled;
                 return x;
               })
               .map([](int x) { return x; }, MapOptions().workers(2).max_queue_size(5));
  ASSERT_TRUE(d.Next().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(pulled.load(), 1 + 5 + 1);  // the consumed one, the queue, one being pulled
}

TEST(DatasetTest, ParallelMapReportsErrorsInOrder) {
  auto d = Dataset<int>::FromVector(Range(50)).map(
      [](int x) -> StatusOr<int> {
        if (x == 20) return absl::DataLossError("twenty");
        return x;
      },
      MapOptions().workers(3));
  int count = 0;
  Status failure;
  while (true) {
    auto next = d.Next();
    if (!next.ok()) {
      failure = next.status();
      break;
    }
    if (!next->has_value()) break;
    EXPECT_EQ(**next, count++);
  }
  EXPECT_EQ(count, 20);
  EXPECT_THAT(failure.message(), HasSubstr("twenty"));
}

TEST(DatasetTest, PrefetchDeliversEverythingAndCanBeAbandoned) {
  EXPECT_EQ(Collect(Dataset<int>::FromVector(Range(100)).prefetch(3)), Range(100));
  auto d = Dataset<int>::FromVector(Range(100)).prefetch(3);
  ASSERT_TRUE(d.Next().ok());
  // Destroying a half-consumed pipeline joins its threads.
}

TEST(DatasetTest, ReadRecordsThroughAParsingPipeline) {
  testing::TempDir dir;
  const std::string path = dir.File("mnist.recordio");
  {
    auto writer = RecordIOWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 50; ++i)
      ASSERT_TRUE((*writer)->Write(testing::MnistExample(i % 10, i)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto opened = RecordFile::Open(path);
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<const RecordFile> file(std::move(*opened));
  const FeatureSpecMap spec = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)},
                               {"label", FixedLenFeature({1}, torch::kInt64)}};
  auto examples = ReadRecords(file, 10, 30)
                      .map(
                          [&](const Record& r) -> StatusOr<Example> {
                            EDL_ASSIGN_OR_RETURN(Features f, ParseExample(r.data, spec));
                            return Example{{{"image", f["image"] / 255.0}}, f["label"]};
                          },
                          MapOptions().workers(2))
                      .batch(8)
                      .prefetch(2);
  std::vector<int64_t> labels;
  for (Example& batch : examples) {
    for (int64_t i = 0; i < batch.labels.size(0); ++i)
      labels.push_back(batch.labels[i][0].item<int64_t>());
    EXPECT_EQ(batch.features.at("image").size(1), 28);
  }
  std::vector<int64_t> want;
  for (int i = 10; i < 30; ++i) want.push_back(i % 10);
  EXPECT_EQ(labels, want);
}

TEST(DatasetTest, GroupThenParseBatchNamesTheBadRecord) {
  testing::TempDir dir;
  const std::string path = dir.File("g.recordio");
  {
    auto writer = RecordIOWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE((*writer)->Write(i == 7 ? std::string("junk") : testing::MnistExample(i)).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto opened = RecordFile::Open(path);
  ASSERT_TRUE(opened.ok());
  const FeatureSpecMap spec = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)},
                               {"label", FixedLenFeature({1}, torch::kInt64)}};
  auto batches =
      ReadRecords(std::shared_ptr<const RecordFile>(std::move(*opened)), 0, 10)
          .group(4)
          .map([&](const std::vector<Record>& rs) { return ParseExampleBatch(rs, spec); });
  auto first = batches.Next();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((**first)["image"].sizes(), (std::vector<int64_t>{4, 28, 28}));
  auto second = batches.Next();
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(path + ": record 7"));
}

TEST(DatasetTest, ReadRecordsCarriesFileAndIndex) {
  testing::TempDir dir;
  const std::string path = dir.File("r.recordio");
  {
    auto writer = RecordIOWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*writer)->Write(std::to_string(i)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto opened = RecordFile::Open(path);
  ASSERT_TRUE(opened.ok());
  auto records = Collect(ReadRecords(std::shared_ptr<const RecordFile>(std::move(*opened)), 2, 4));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].data, "2");
  EXPECT_EQ(records[1].index, 3u);
  EXPECT_EQ(*records[1].file, path);
}

TEST(DatasetTest, ExamplesRememberTheirRecordsAndErrorsNameThem) {
  testing::TempDir dir;
  const std::string path = dir.File("o.recordio");
  {
    auto writer = RecordIOWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE((*writer)->Write(i == 15 ? std::string("junk") : testing::MnistExample(i)).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto opened = RecordFile::Open(path);
  ASSERT_TRUE(opened.ok());
  const FeatureSpecMap spec = {{"label", FixedLenFeature({1}, torch::kInt64)}};
  auto batches = ReadRecords(std::shared_ptr<const RecordFile>(std::move(*opened)), 0, 16)
                     .map([&](const Record& r) -> StatusOr<Example> {
                       EDL_ASSIGN_OR_RETURN(Features f, ParseExample(r.data, spec));
                       return Example({{"label", f["label"]}});
                     })
                     .shuffle(4)
                     .with_seed(3)
                     .batch(4);
  // Every row of a batch names the record it came from, shuffled or not,
  // until the pipeline reaches the bad record.
  int good = 0;
  while (true) {
    auto batch = batches.Next();
    if (!batch.ok()) {
      EXPECT_THAT(batch.status().message(), HasSubstr(path + ": record 15: "));
      break;
    }
    ASSERT_TRUE(batch->has_value()) << "the bad record was never read";
    const Example& e = **batch;
    ASSERT_EQ(e.origins.size(), 4u);
    for (int64_t row = 0; row < 4; ++row) {
      const RecordOrigin& o = e.origins[static_cast<size_t>(row)];
      EXPECT_EQ(*o.file, path);
      // Record i holds label i.
      EXPECT_EQ(static_cast<int64_t>(o.index), e.features.at("label")[row][0].item<int64_t>());
    }
    ++good;
  }
  EXPECT_GE(good, 2);
}

}  // namespace
}  // namespace elasticdl
