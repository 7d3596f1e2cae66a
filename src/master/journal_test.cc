#include "master/journal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "master/journal_writer.h"
#include "testing/temp_dir.h"

namespace elasticdl::master {
namespace {

proto::MasterJournal Sample() {
  proto::MasterJournal j;
  j.set_master_address("localhost:1234");
  j.set_next_worker_id(7);
  j.mutable_ledger()->set_next_task_id(42);
  j.mutable_ledger()->set_rng_state("1 2 3");
  proto::JournalTask* t = j.mutable_ledger()->add_tasks();
  t->mutable_task()->set_task_id(3);
  t->mutable_task()->set_file("data/train-0.rio");
  t->set_holder(2);
  return j;
}

TEST(JournalTest, AbsentIsNullopt) {
  testing::TempDir dir;
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->has_value());
}

TEST(JournalTest, RoundTripsAndReplaces) {
  testing::TempDir dir;
  proto::MasterJournal j = Sample();
  ASSERT_TRUE(WriteJournal(dir.path(), j).ok());
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->SerializeAsString(), j.SerializeAsString());

  j.set_master_restarts(3);
  j.mutable_ledger()->clear_tasks();
  ASSERT_TRUE(WriteJournal(dir.path(), j).ok());
  read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->master_restarts(), 3);
  EXPECT_EQ((*read)->ledger().tasks_size(), 0);
  // No temporary file is left behind.
  EXPECT_FALSE(std::filesystem::exists(JournalPath(dir.path()) + ".tmp"));
}

TEST(JournalTest, LeftoverTemporaryFileIsIgnored) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteJournal(dir.path(), Sample()).ok());
  // A crash between writing the temporary file and the rename.
  std::ofstream(JournalPath(dir.path()) + ".tmp") << "half a jour";
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->next_worker_id(), 7);
  ASSERT_TRUE(WriteJournal(dir.path(), Sample()).ok());
}

TEST(JournalTest, GarbageIsDataLossNamingTheFile) {
  testing::TempDir dir;
  std::ofstream(JournalPath(dir.path())) << "\xff\xff\xff garbage";
  auto read = ReadJournal(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("journal.pb"), absl::string_view::npos) << read.status();
}

TEST(JournalTest, MissingDirectoryIsAnErrorNamingIt) {
  testing::TempDir dir;
  Status s = WriteJournal(dir.File("no/such/dir"), Sample());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("no/such/dir/journal.pb"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace elasticdl::master

namespace elasticdl::master {
namespace {

TEST(JournalWriterTest, AChangeIsDurableWhenItsWaitReturns) {
  testing::TempDir dir;
  std::mutex mu;
  uint64_t changes = 0;
  int next_worker_id = 0;
  JournalWriter writer(
      dir.path(),
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        proto::MasterJournal j;
        j.set_next_worker_id(next_worker_id);
        return std::make_pair(j, changes);
      },
      nullptr);
  uint64_t change;
  {
    std::lock_guard<std::mutex> lock(mu);
    next_worker_id = 5;
    change = ++changes;
    writer.Request(change);
  }
  ASSERT_TRUE(writer.WaitDurable(change).ok());
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->next_worker_id(), 5);
}

TEST(JournalWriterTest, ChangesMadeDuringAWriteShareTheNext) {
  testing::TempDir dir;
  std::mutex mu;
  uint64_t changes = 0;
  JournalWriter writer(
      dir.path(),
      [&] {
        // A slow snapshot: every caller below asks while the first write runs.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::lock_guard<std::mutex> lock(mu);
        return std::make_pair(proto::MasterJournal(), changes);
      },
      nullptr);
  constexpr int kCallers = 16;
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&] {
      uint64_t change;
      {
        std::lock_guard<std::mutex> lock(mu);
        change = ++changes;
        writer.Request(change);
      }
      EXPECT_TRUE(writer.WaitDurable(change).ok());
    });
  }
  for (std::thread& t : callers) t.join();
  // The first write, and one or two for everyone who asked meanwhile.
  EXPECT_LE(writer.writes(), 3);
}

TEST(JournalWriterTest, AFailedWriteFailsEveryWaitAndIsReportedOnce) {
  testing::TempDir dir;
  // A file where the job directory should be: every write fails.
  const std::string job_dir = dir.path() + "/not-a-directory";
  std::ofstream(job_dir) << "x";
  std::atomic<int> reported{0};
  std::string message;
  uint64_t changes = 0;
  JournalWriter writer(
      job_dir, [&] { return std::make_pair(proto::MasterJournal(), changes); },
      [&](const Status& s) {
        message = std::string(s.message());
        ++reported;
      });
  changes = 1;
  writer.Request(1);
  Status first = writer.WaitDurable(1);
  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find(JournalPath(job_dir)), std::string::npos) << first;
  EXPECT_NE(first.message().find("cannot write the job's journal"), std::string::npos) << first;
  changes = 2;
  writer.Request(2);
  EXPECT_EQ(writer.WaitDurable(2), first);
  EXPECT_EQ(writer.status(), first);
  EXPECT_EQ(reported.load(), 1);
  EXPECT_EQ(message, std::string(first.message()));
}

}  // namespace
}  // namespace elasticdl::master
