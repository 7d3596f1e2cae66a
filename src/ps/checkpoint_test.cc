#include "ps/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "ps/checkpoint_writer.h"

namespace elasticdl::ps {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("edl_ckpt_" + std::to_string(::getpid()) + "_" +
             testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static proto::ShardCheckpoint Make(int64_t version, int ps_id, int num_ps) {
    proto::ShardCheckpoint c;
    c.set_version(version);
    c.set_ps_id(ps_id);
    c.set_num_ps(num_ps);
    auto* p = c.add_parameters();
    p->mutable_value()->set_name("w" + std::to_string(ps_id));
    p->mutable_value()->set_dtype(proto::DT_FLOAT32);
    p->mutable_value()->add_shape(1);
    p->mutable_value()->set_content(std::string(4, static_cast<char>(version)));
    p->set_step(version);
    auto* a = c.add_applied();
    a->set_task_id(3);
    a->set_minibatches(version);
    return c;
  }

  void Write(int64_t version, int ps_id, int num_ps) {
    proto::ShardCheckpoint checkpoint = Make(version, ps_id, num_ps);
    Status s = WriteCheckpoint(dir_, &checkpoint);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Overwrites the file's byte at `offset` (from the end when negative).
  static void Corrupt(const std::string& path, long offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const long size = f.tellg();
    f.seekp(offset < 0 ? size + offset : offset);
    f.put('\x7f');
  }

  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripAndLayout) {
  Write(12, 1, 3);
  const std::string path = dir_ + "/version-12/ps-1-of-3.ckpt";
  EXPECT_EQ(CheckpointPath(dir_, 12, 1, 3), path);
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), Make(12, 1, 3).SerializeAsString());
}

TEST_F(CheckpointTest, CorruptAndTruncatedFilesAreDataLoss) {
  Write(5, 0, 1);
  const std::string path = CheckpointPath(dir_, 5, 0, 1);
  Corrupt(path, -2);
  auto corrupt = ReadCheckpoint(path);
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(corrupt.status().message()).find(path), std::string::npos);

  Write(5, 0, 1);
  fs::resize_file(path, fs::file_size(path) - 3);
  auto truncated = ReadCheckpoint(path);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(truncated.status().message()).find("truncated"), std::string::npos);

  std::ofstream(path, std::ios::trunc) << "hello";
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCheckpoint(dir_ + "/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, EmbeddingBlocksTravelInFramesOfTheirOwn) {
  proto::ShardCheckpoint checkpoint = Make(7, 0, 1);
  checkpoint.add_embedding_tables()->set_name("users");
  for (int b = 0; b < 3; ++b) {
    proto::EmbeddingRowBlock* block = checkpoint.add_embedding_blocks();
    block->mutable_rows()->set_table("users");
    for (int i = 0; i < 100; ++i) block->mutable_rows()->add_ids(b * 100 + i);
    block->mutable_rows()->set_values(std::string(100 * 16, static_cast<char>('a' + b)));
    block->add_steps(b);
  }
  const proto::ShardCheckpoint written = checkpoint;
  ASSERT_TRUE(WriteCheckpoint(dir_, &checkpoint).ok());
  EXPECT_EQ(checkpoint.embedding_blocks_size(), 3);  // moved out and back
  EXPECT_EQ(checkpoint.embedding_block_count(), 3);
  const std::string path = CheckpointPath(dir_, 7, 0, 1);
  auto read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->embedding_blocks_size(), 3);
  EXPECT_EQ(read->embedding_blocks(2).rows().values(), written.embedding_blocks(2).rows().values());
  EXPECT_EQ(read->embedding_blocks(1).steps(0), 1);

  // Truncated in the middle of the blocks, or missing the last whole one.
  const auto size = fs::file_size(path);
  fs::resize_file(path, size - 900);
  auto truncated = ReadCheckpoint(path);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  ASSERT_TRUE(WriteCheckpoint(dir_, &checkpoint).ok());
  const auto last_block = checkpoint.embedding_blocks(2).ByteSizeLong() + 12;
  fs::resize_file(path, size - last_block);
  truncated = ReadCheckpoint(path);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  EXPECT_NE(std::string(truncated.status().message()).find("truncated"), std::string::npos);
  // A block corrupted.
  ASSERT_TRUE(WriteCheckpoint(dir_, &checkpoint).ok());
  Corrupt(path, -50);
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, NewestFallsBackPastCorruptFiles) {
  auto none = ReadNewestCheckpoint(dir_, 0, 2);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  Write(10, 0, 2);
  Write(20, 0, 2);
  Write(30, 1, 2);  // another shard's
  Write(25, 0, 3);  // another job size's
  auto newest = ReadNewestCheckpoint(dir_, 0, 2);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->version(), 20);

  Corrupt(CheckpointPath(dir_, 20, 0, 2), 0);
  std::vector<std::string> skipped;
  auto older = ReadNewestCheckpoint(dir_, 0, 2, &skipped);
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->version(), 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("version-20/ps-0-of-2.ckpt"), std::string::npos);

  Corrupt(CheckpointPath(dir_, 10, 0, 2), -1);
  auto all_bad = ReadNewestCheckpoint(dir_, 0, 2);
  EXPECT_EQ(all_bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(all_bad.status().message()).find("version-20"), std::string::npos);
}

TEST_F(CheckpointTest, RetentionKeepsTheNewestOfThisShard) {
  for (int v = 1; v <= 5; ++v) {
    Write(v, 0, 2);
    Write(v, 1, 2);
  }
  ASSERT_TRUE(RetainCheckpoints(dir_, 0, 2, 2).ok());
  for (int v = 1; v <= 5; ++v) {
    EXPECT_EQ(fs::exists(CheckpointPath(dir_, v, 0, 2)), v >= 4) << v;
    EXPECT_TRUE(fs::exists(CheckpointPath(dir_, v, 1, 2))) << v;
  }
  ASSERT_TRUE(RetainCheckpoints(dir_, 1, 2, 2).ok());
  for (int v = 1; v <= 5; ++v) {
    EXPECT_EQ(fs::exists(CheckpointVersionDir(dir_, v)), v >= 4) << v;
  }
  ASSERT_TRUE(RetainCheckpoints(dir_, 1, 2, 0).ok());  // 0 keeps all
  EXPECT_TRUE(fs::exists(CheckpointPath(dir_, 4, 1, 2)));
}

TEST_F(CheckpointTest, NewestCompleteSetForInit) {
  EXPECT_EQ(ReadNewestCompleteCheckpoint(dir_).status().code(), absl::StatusCode::kNotFound);
  Write(8, 0, 2);
  Write(8, 1, 2);
  Write(10, 0, 2);  // shard 1 never got there
  Write(10, 0, 3);
  Write(10, 2, 3);
  auto files = ReadNewestCompleteCheckpoint(dir_);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].version(), 8);
  EXPECT_EQ((*files)[1].ps_id(), 1);

  Write(10, 1, 3);  // now 3 shards of version 10 are complete
  files = ReadNewestCompleteCheckpoint(dir_);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[2].version(), 10);

  Corrupt(CheckpointPath(dir_, 10, 1, 3), -1);
  auto bad = ReadNewestCompleteCheckpoint(dir_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(bad.status().message()).find("ps-1-of-3.ckpt"), std::string::npos);
}

TEST_F(CheckpointTest, TheNewestModelValuesAreReadWithoutTheTablesRows) {
  EXPECT_EQ(ReadNewestCompleteModelValues(dir_).status().code(), absl::StatusCode::kNotFound);
  Write(8, 0, 2);
  proto::ShardCheckpoint with_rows = Make(8, 1, 2);
  with_rows.add_embedding_tables()->set_name("users");
  for (int b = 0; b < 2; ++b) {
    proto::EmbeddingRowBlock* block = with_rows.add_embedding_blocks();
    block->mutable_rows()->set_table("users");
    block->mutable_rows()->add_ids(b);
    block->mutable_rows()->set_values(std::string(16, 'r'));
  }
  ASSERT_TRUE(WriteCheckpoint(dir_, &with_rows).ok());
  auto whole = ReadNewestCompleteCheckpoint(dir_);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto values = ReadNewestCompleteModelValues(dir_);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->SerializeAsString(), ModelValuesOf(*whole).SerializeAsString());
  EXPECT_EQ(values->version(), 8);
  EXPECT_EQ(values->parameters_size(), 2);

  // A damaged first frame is found (the rows' frames are the servers' to check).
  Corrupt(CheckpointPath(dir_, 8, 0, 2), 20);
  auto bad = ReadNewestCompleteModelValues(dir_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(bad.status().message()).find("ps-0-of-2.ckpt"), std::string::npos);
}

TEST_F(CheckpointTest, WriterWritesInTheBackgroundAndRetains) {
  CheckpointWriterOptions options;
  options.dir = dir_;
  options.ps_id = 1;
  options.num_ps = 2;
  options.keep_max = 2;
  CheckpointWriter writer(options);
  for (int v : {3, 6, 9}) {
    ShardSnapshot s;
    s.version = v;
    s.ps_id = 1;
    s.num_ps = 2;
    s.parameters["w"].value = torch::full({2}, static_cast<float>(v));
    s.parameters["w"].slots["momentum_buffer"] = torch::ones({2});
    s.applied[4] = v;
    EXPECT_TRUE(writer.Offer(std::move(s)));
    writer.Flush();
    EXPECT_TRUE(writer.last_status().ok()) << writer.last_status();
  }
  ShardSnapshot old;
  old.version = 6;
  EXPECT_FALSE(writer.Offer(std::move(old)));
  EXPECT_EQ(writer.last_written_version(), 9);
  EXPECT_FALSE(fs::exists(CheckpointVersionDir(dir_, 3)));
  auto newest = ReadNewestCheckpoint(dir_, 1, 2);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->version(), 9);
  ASSERT_EQ(newest->parameters_size(), 1);
  EXPECT_EQ(newest->parameters(0).slots(0).name(), "momentum_buffer");
  EXPECT_EQ(newest->applied(0).minibatches(), 9);
  // Three written and timed; an older version is not a skip.
  CheckpointStats stats = writer.stats();
  EXPECT_EQ(stats.seconds.count, 3);
  EXPECT_GT(stats.seconds.sum, 0);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_EQ(stats.skipped, 0);
}

TEST_F(CheckpointTest, WriterCountsFailedWrites) {
  CheckpointWriterOptions options;
  options.dir = dir_ + "/a-file";
  fs::create_directories(dir_);
  std::ofstream(options.dir) << "not a directory";
  CheckpointWriter writer(options);
  ShardSnapshot s;
  s.version = 4;
  EXPECT_TRUE(writer.Offer(std::move(s)));
  writer.Flush();
  EXPECT_FALSE(writer.last_status().ok());
  EXPECT_EQ(writer.stats().failed, 1);
  EXPECT_EQ(writer.stats().seconds.count, 0);
}

}  // namespace
}  // namespace elasticdl::ps
