#include "master/event_log.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace elasticdl::master {
namespace {

TEST(EventLogTest, CountsAnEventAcrossMasters) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/events.jsonl";
  {
    EventLog earlier(path);
    earlier.Append("evaluation", {{"model_version", 8}});
    earlier.Append("task_done", {{"task", 3}});
  }
  EventLog log(path);
  log.Append("evaluation", {{"model_version", 16}});
  EXPECT_EQ(log.Count("evaluation"), 2u);
  EXPECT_EQ(log.Count("task_done"), 1u);
  EXPECT_EQ(log.Count("job_finished"), 0u);
  EXPECT_EQ(EventLog("").Count("evaluation"), 0u);
}

}  // namespace
}  // namespace elasticdl::master
