#include "dashboard/event_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/tensorboard.pb.h"
#include "testing/temp_dir.h"

namespace elasticdl::dashboard {
namespace {

std::vector<proto::Event> ReadEvents(const std::string& path) {
  auto file = RecordFile::Open(path, RecordFormat::kTFRecord);
  EXPECT_TRUE(file.ok()) << file.status();
  std::vector<proto::Event> events;
  if (!file.ok()) return events;
  auto scan = (*file)->Scan(0, (*file)->num_records());
  EXPECT_TRUE(scan.ok());
  while ((*scan)->Next()) {
    proto::Event e;
    EXPECT_TRUE(e.ParseFromString(std::string((*scan)->record())));
    events.push_back(e);
  }
  EXPECT_TRUE((*scan)->status().ok()) << (*scan)->status();
  return events;
}

TEST(EventFileTest, WritesAFileVersionThenScalarsReadableAtOnce) {
  testing::TempDir dir;
  auto file = EventFile::Create(dir.path() + "/tb");
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string name = std::filesystem::path((*file)->path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  (*file)->AddScalar("loss", 3, 0.75, 1000.5);
  (*file)->AddScalar("eval/accuracy", 8, 0.875);
  // Without closing: every record is in the file already.
  std::vector<proto::Event> events = ReadEvents((*file)->path());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1e9);
  EXPECT_EQ(events[1].step(), 3);
  EXPECT_DOUBLE_EQ(events[1].wall_time(), 1000.5);
  ASSERT_EQ(events[1].summary().value_size(), 1);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_FLOAT_EQ(events[1].summary().value(0).simple_value(), 0.75f);
  EXPECT_EQ(events[2].summary().value(0).tag(), "eval/accuracy");
  EXPECT_EQ(events[2].step(), 8);
}

TEST(EventFileTest, AnUnwritableDirectoryIsAnError) {
  testing::TempDir dir;
  const std::string blocker = dir.path() + "/file";
  std::ofstream(blocker) << "x";
  auto file = EventFile::Create(blocker + "/tb");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(std::string(file.status().message()).find(blocker), std::string::npos);
}

}  // namespace
}  // namespace elasticdl::dashboard
