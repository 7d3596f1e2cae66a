#include "master/journal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "common/strings.h"
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

// Writes `snapshot` as a new log.
Status WriteSnapshot(const std::string& job_dir, const proto::MasterJournal& snapshot) {
  return JournalLog::Create(job_dir, snapshot).status();
}

// A record of changes after Sample(): task 3 finished, task 4 dealt to
// worker 1, task 5 queued, worker 0 started.
proto::JournalChanges SampleChanges() {
  proto::JournalChanges c;
  c.mutable_scalars()->set_master_address("localhost:1234");
  c.mutable_scalars()->set_next_worker_id(8);
  proto::LedgerChanges* l = c.mutable_ledger();
  l->mutable_scalars()->set_next_task_id(44);
  l->mutable_scalars()->set_records_done(100);
  l->add_tasks_gone(3);
  proto::Task* done = l->add_finished_training();
  done->set_task_id(3);
  done->set_file("data/train-0.rio");
  proto::JournalTask* dealt = l->add_tasks();
  dealt->mutable_task()->set_task_id(4);
  dealt->set_holder(1);
  proto::JournalTask* queued = l->add_tasks();
  queued->mutable_task()->set_task_id(5);
  queued->set_holder(-1);
  queued->set_training(true);
  queued->set_order(-1);
  c.add_workers()->set_id(0);
  return c;
}

TEST(JournalTest, ASnapshotRoundTripsAndANewLogReplacesTheOld) {
  testing::TempDir dir;
  proto::MasterJournal j = Sample();
  ASSERT_TRUE(WriteSnapshot(dir.path(), j).ok());
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->SerializeAsString(), j.SerializeAsString());

  j.set_master_restarts(3);
  j.mutable_ledger()->clear_tasks();
  ASSERT_TRUE(WriteSnapshot(dir.path(), j).ok());
  read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->master_restarts(), 3);
  EXPECT_EQ((*read)->ledger().tasks_size(), 0);
  // No temporary file is left behind.
  EXPECT_FALSE(std::filesystem::exists(JournalPath(dir.path()) + ".tmp"));
}

TEST(JournalTest, ChangesFoldIntoTheSnapshot) {
  testing::TempDir dir;
  auto log = JournalLog::Create(dir.path(), Sample());
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Append(SampleChanges()).ok());
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  const proto::MasterJournal& j = **read;
  EXPECT_EQ(j.next_worker_id(), 8);
  EXPECT_EQ(j.ledger().next_task_id(), 44);
  EXPECT_EQ(j.ledger().records_done(), 100);
  // Fields a record of changes leaves out keep the snapshot's values.
  EXPECT_EQ(j.ledger().rng_state(), "1 2 3");
  // Queued tasks first, then held ones.
  ASSERT_EQ(j.ledger().tasks_size(), 2);
  EXPECT_EQ(j.ledger().tasks(0).task().task_id(), 5);
  EXPECT_EQ(j.ledger().tasks(1).task().task_id(), 4);
  EXPECT_EQ(j.ledger().tasks(1).holder(), 1);
  ASSERT_EQ(j.ledger().finished_training_size(), 1);
  EXPECT_EQ(j.ledger().finished_training(0).task_id(), 3);
  ASSERT_EQ(j.workers_size(), 1);

  // A later record: worker 0 gone, task 6 queued ahead of task 5, a new
  // epoch's shuffle state.
  proto::JournalChanges later = SampleChanges();
  later.clear_workers();
  later.add_workers_gone(0);
  later.mutable_ledger()->clear_tasks();
  later.mutable_ledger()->clear_finished_training();
  proto::JournalTask* front = later.mutable_ledger()->add_tasks();
  front->mutable_task()->set_task_id(6);
  front->set_holder(-1);
  front->set_training(true);
  front->set_order(-2);
  later.mutable_ledger()->set_rng_state("4 5 6");
  ASSERT_TRUE((*log)->Append(later).ok());
  read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->workers_size(), 0);
  EXPECT_EQ((*read)->ledger().rng_state(), "4 5 6");
  ASSERT_EQ((*read)->ledger().tasks_size(), 3);
  EXPECT_EQ((*read)->ledger().tasks(0).task().task_id(), 6);
  EXPECT_EQ((*read)->ledger().tasks(1).task().task_id(), 5);
  EXPECT_EQ((*read)->ledger().finished_training_size(), 1);
}

TEST(JournalTest, ARecordCutShortAtTheEndIsIgnored) {
  testing::TempDir dir;
  auto log = JournalLog::Create(dir.path(), Sample());
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Append(SampleChanges()).ok());
  const auto whole = std::filesystem::file_size(JournalPath(dir.path()));
  // A crash in the middle of an append: every length of the last record
  // but its whole reads as the journal before it.
  proto::JournalChanges last = SampleChanges();
  last.mutable_scalars()->set_next_worker_id(9);
  ASSERT_TRUE((*log)->Append(last).ok());
  const auto longer = std::filesystem::file_size(JournalPath(dir.path()));
  std::string bytes;
  {
    std::ifstream in(JournalPath(dir.path()), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (auto size = whole; size < longer; ++size) {
    std::ofstream(JournalPath(dir.path()), std::ios::binary | std::ios::trunc)
        << bytes.substr(0, size);
    auto read = ReadJournal(dir.path());
    ASSERT_TRUE(read.ok() && read->has_value()) << size << ": " << read.status();
    EXPECT_EQ((*read)->next_worker_id(), 8) << size;
  }
  // Garbage where the last record's bytes were: also the last append's.
  std::string torn = bytes;
  torn[torn.size() - 2] ^= 0x55;
  std::ofstream(JournalPath(dir.path()), std::ios::binary | std::ios::trunc) << torn;
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->next_worker_id(), 8);
}

TEST(JournalTest, ADamagedRecordBeforeTheLastIsDataLossNamingItsOffset) {
  testing::TempDir dir;
  auto log = JournalLog::Create(dir.path(), Sample());
  ASSERT_TRUE(log.ok()) << log.status();
  const int64_t second = (*log)->size();
  ASSERT_TRUE((*log)->Append(SampleChanges()).ok());
  ASSERT_TRUE((*log)->Append(SampleChanges()).ok());
  std::string bytes;
  {
    std::ifstream in(JournalPath(dir.path()), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[second + 12] ^= 0x55;
  std::ofstream(JournalPath(dir.path()), std::ios::binary | std::ios::trunc) << bytes;
  auto read = ReadJournal(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find(StrCat("journal.log: the record at byte ", second)),
            absl::string_view::npos)
      << read.status();
}

TEST(JournalTest, AJournalOfOneSnapshotFileIsRead) {
  testing::TempDir dir;
  std::ofstream(dir.File("journal.pb"), std::ios::binary) << Sample().SerializeAsString();
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->SerializeAsString(), Sample().SerializeAsString());
}

TEST(JournalTest, LeftoverTemporaryFileIsIgnored) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteSnapshot(dir.path(), Sample()).ok());
  // A crash between writing the temporary file and the rename.
  std::ofstream(JournalPath(dir.path()) + ".tmp") << "half a jour";
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->next_worker_id(), 7);
  ASSERT_TRUE(WriteSnapshot(dir.path(), Sample()).ok());
}

TEST(JournalTest, GarbageIsDataLossNamingTheFile) {
  testing::TempDir dir;
  std::ofstream(JournalPath(dir.path())) << "\xff\xff\xff garbage";
  auto read = ReadJournal(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("journal.log"), absl::string_view::npos) << read.status();
}

TEST(JournalTest, MissingDirectoryIsAnErrorNamingIt) {
  testing::TempDir dir;
  Status s = WriteSnapshot(dir.File("no/such/dir"), Sample());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("no/such/dir/journal.log"), absl::string_view::npos) << s;
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
  JournalWriter::Source source;
  source.snapshot = [&] {
    std::lock_guard<std::mutex> lock(mu);
    proto::MasterJournal j;
    j.set_next_worker_id(next_worker_id);
    return std::make_pair(j, changes);
  };
  source.changes = [&] {
    std::lock_guard<std::mutex> lock(mu);
    proto::JournalChanges c;
    c.mutable_scalars()->set_next_worker_id(next_worker_id);
    return std::make_pair(c, changes);
  };
  JournalWriter writer(dir.path(), source, nullptr);
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
  // The next write appends the change.
  {
    std::lock_guard<std::mutex> lock(mu);
    next_worker_id = 6;
    change = ++changes;
    writer.Request(change);
  }
  ASSERT_TRUE(writer.WaitDurable(change).ok());
  read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->next_worker_id(), 6);
  EXPECT_EQ(writer.writes(), 2);
  EXPECT_EQ(writer.snapshots(), 1);
}

TEST(JournalWriterTest, ALogThatOutgrowsItsSnapshotStartsAnew) {
  testing::TempDir dir;
  std::mutex mu;
  uint64_t changes = 0;
  JournalWriter::Source source;
  source.snapshot = [&] {
    std::lock_guard<std::mutex> lock(mu);
    proto::MasterJournal j;
    j.set_next_worker_id(static_cast<int>(changes));
    return std::make_pair(j, changes);
  };
  source.changes = [&] {
    std::lock_guard<std::mutex> lock(mu);
    proto::JournalChanges c;
    c.mutable_scalars()->set_master_address(std::string(100, 'x'));
    c.mutable_scalars()->set_next_worker_id(static_cast<int>(changes));
    return std::make_pair(c, changes);
  };
  // Records of ~110 bytes; a new log past 1 000 bytes of them.
  JournalWriter writer(dir.path(), source, nullptr, 1000);
  for (int i = 0; i < 30; ++i) {
    uint64_t change;
    {
      std::lock_guard<std::mutex> lock(mu);
      change = ++changes;
      writer.Request(change);
    }
    ASSERT_TRUE(writer.WaitDurable(change).ok());
  }
  EXPECT_EQ(writer.writes(), 30);
  EXPECT_GE(writer.snapshots(), 3);
  EXPECT_LE(writer.snapshots(), 4);
  EXPECT_LT(std::filesystem::file_size(JournalPath(dir.path())), 1200u);
  auto read = ReadJournal(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->next_worker_id(), 30);
}

TEST(JournalWriterTest, ChangesMadeDuringAWriteShareTheNext) {
  testing::TempDir dir;
  std::mutex mu;
  uint64_t changes = 0;
  JournalWriter::Source source;
  source.snapshot = [&] {
    // A slow snapshot: every caller below asks while the first write runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(mu);
    return std::make_pair(proto::MasterJournal(), changes);
  };
  source.changes = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::make_pair(proto::JournalChanges(), changes);
  };
  JournalWriter writer(dir.path(), source, nullptr);
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
  JournalWriter::Source source;
  source.snapshot = [&] { return std::make_pair(proto::MasterJournal(), changes); };
  source.changes = [&] { return std::make_pair(proto::JournalChanges(), changes); };
  JournalWriter writer(job_dir, source, [&](const Status& s) {
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
