#include "common/process_tuning.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace elasticdl {
namespace {

TEST(CpuListTest, ParsesNumbersAndRanges) {
  EXPECT_EQ(ParseCpuList("3").value(), std::vector<int>({3}));
  EXPECT_EQ(ParseCpuList("0,2-4,7").value(), std::vector<int>({0, 2, 3, 4, 7}));
  EXPECT_EQ(ParseCpuList("5,1-2,2").value(), std::vector<int>({1, 2, 5}));  // sorted, once each
  EXPECT_EQ(FormatCpuList({0, 2, 3}), "0,2,3");
  EXPECT_EQ(ParseCpuList(FormatCpuList({1, 6})).value(), std::vector<int>({1, 6}));
}

TEST(CpuListTest, RejectsWhatIsNoCpu) {
  for (const char* bad : {"", "a", "1,", "-1", "3-1", "1-", "0,,1", "99999"}) {
    StatusOr<std::vector<int>> parsed = ParseCpuList(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("expected CPU numbers"), std::string::npos)
        << parsed.status();
  }
}

TEST(BindToCpusTest, BindsThreadsRunningAndStartedLater) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  const std::vector<int> one = {all.back()};
  // A thread running before the binding is bound too.
  std::vector<int> seen_by_running;
  bool bound = false;
  std::mutex mu;
  std::condition_variable cv;
  std::thread running([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return bound; });
    seen_by_running = AllowedCpus();
  });
  ASSERT_TRUE(BindToCpus(one).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    bound = true;
  }
  cv.notify_all();
  running.join();
  EXPECT_EQ(seen_by_running, one);
  EXPECT_EQ(AllowedCpus(), one);
  std::vector<int> seen_by_later;
  std::thread later([&] { seen_by_later = AllowedCpus(); });
  later.join();
  EXPECT_EQ(seen_by_later, one);
  ASSERT_TRUE(BindToCpus(all).ok());
  EXPECT_EQ(AllowedCpus(), all);
}

TEST(BindToCpusTest, ACpuThisMachineLacksIsAnError) {
  Status s = BindToCpus({CPU_SETSIZE - 1});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("binding to CPUs"), std::string::npos) << s;
}

}  // namespace
}  // namespace elasticdl
