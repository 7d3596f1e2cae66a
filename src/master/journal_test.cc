#include "master/journal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

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
