#include "worker/pipeline_ahead.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

namespace elasticdl::worker {
namespace {

using namespace std::chrono_literals;

Dataset<int64_t> Numbers(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return Dataset<int64_t>::FromVector(std::move(v));
}

TEST(PipelineAheadTest, GivesEachPipelinesElementsInOrderThenTheEndOnOneThread) {
  PipelineAhead<int64_t> ahead(2);
  std::set<std::thread::id> made_on;
  for (int64_t p = 1; p <= 3; ++p) {  // three tasks' pipelines
    ahead.Start(Numbers(10).map([&made_on, p](int64_t x) {
      made_on.insert(std::this_thread::get_id());
      return x * p;
    }));
    for (int64_t i = 0; i < 10; ++i) {
      StatusOr<std::optional<int64_t>> next = ahead.Next();
      ASSERT_TRUE(next.ok()) << next.status();
      ASSERT_TRUE(next->has_value());
      EXPECT_EQ(**next, p * i);
    }
    for (int i = 0; i < 2; ++i) {  // the end, and again
      StatusOr<std::optional<int64_t>> end = ahead.Next();
      ASSERT_TRUE(end.ok()) << end.status();
      EXPECT_FALSE(end->has_value());
    }
  }
  // One thread of its own for all three.
  EXPECT_EQ(made_on.size(), 1u);
  EXPECT_EQ(made_on.count(std::this_thread::get_id()), 0u);
}

int ThisThreadsNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); }

TEST(PipelineAheadTest, PipelinesRunAtTheNicenessAskedForAboveTheirCreators) {
  const int creator = ThisThreadsNice();
  PipelineAhead<int64_t> ahead(2, /*niceness=*/10);
  ahead.Start(Numbers(1).map([](int64_t) { return static_cast<int64_t>(ThisThreadsNice()); }));
  StatusOr<std::optional<int64_t>> nice = ahead.Next();
  ASSERT_TRUE(nice.ok()) << nice.status();
  ASSERT_TRUE(nice->has_value());
  EXPECT_EQ(**nice, std::min(19, creator + 10));
  EXPECT_EQ(ThisThreadsNice(), creator);  // the creator's own is left alone

  PipelineAhead<int64_t> plain(2);
  plain.Start(Numbers(1).map([](int64_t) { return static_cast<int64_t>(ThisThreadsNice()); }));
  StatusOr<std::optional<int64_t>> same = plain.Next();
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(same->has_value());
  EXPECT_EQ(**same, creator);
}

TEST(PipelineAheadTest, AnErrorComesInItsPlaceAndEndsThePipeline) {
  std::atomic<int> made{0};
  Dataset<int64_t> pipeline = Numbers(100).map([&](int64_t x) -> StatusOr<int64_t> {
    ++made;
    if (x == 3) return absl::DataLossError("record 3 is corrupt");
    return x;
  });
  PipelineAhead<int64_t> ahead(2);
  ahead.Start(std::move(pipeline));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(**ahead.Next(), i);
  StatusOr<std::optional<int64_t>> failed = ahead.Next();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(failed.status().message().find("record 3 is corrupt"), std::string::npos);
  StatusOr<std::optional<int64_t>> after = ahead.Next();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
  EXPECT_EQ(made.load(), 4);  // nothing made past the error
}

TEST(PipelineAheadTest, MakesAtMostDepthAheadAndAStoppedPipelineNoMore) {
  std::atomic<int> made{0};
  Dataset<int64_t> pipeline = Numbers(1000).map([&](int64_t x) {
    ++made;
    std::this_thread::sleep_for(1ms);
    return x;
  });
  PipelineAhead<int64_t> ahead(2);
  {
    ahead.Start(std::move(pipeline));
    EXPECT_EQ(**ahead.Next(), 0);
    // One taken, two ready: no more (unbounded, it would make one a ms).
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (made.load() < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(made.load(), 3);
  }
  ahead.Stop();  // a task that ends early: the rest is not made
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(made.load(), 3);
  StatusOr<std::optional<int64_t>> none = ahead.Next();  // nothing runs
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // The next task's pipeline, from its first element.
  ahead.Start(Numbers(3));
  EXPECT_EQ(**ahead.Next(), 0);
}

TEST(PipelineAheadTest, SaysWhenItsEndIsMadeSoTheRestCanBeTakenWithoutWaiting) {
  PipelineAhead<int64_t> ahead(3);
  EXPECT_FALSE(ahead.EndMade());  // nothing runs
  // Two elements and the end fit within the depth: all of them are made.
  ahead.Start(Numbers(2));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ahead.EndMade() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(ahead.EndMade());
  EXPECT_EQ(**ahead.Next(), 0);
  EXPECT_TRUE(ahead.EndMade());
  EXPECT_EQ(**ahead.Next(), 1);
  EXPECT_TRUE(ahead.EndMade());  // the end itself is still to be taken
  StatusOr<std::optional<int64_t>> end = ahead.Next();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_FALSE(ahead.EndMade());

  // An end beyond the depth is not made.
  ahead.Start(Numbers(10));
  EXPECT_EQ(**ahead.Next(), 0);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ahead.EndMade());

  // Nor is an error an end: the elements before it are taken as needed.
  std::atomic<int> made{0};
  ahead.Start(Numbers(5).map([&made](int64_t x) -> StatusOr<int64_t> {
    ++made;
    if (x == 1) return absl::DataLossError("record 1 is corrupt");
    return x;
  }));
  while (made.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ahead.EndMade());
  EXPECT_EQ(**ahead.Next(), 0);
  EXPECT_EQ(ahead.Next().status().code(), absl::StatusCode::kDataLoss);
  ahead.Stop();
  EXPECT_FALSE(ahead.EndMade());
}

TEST(PipelineAheadTest, CountsTheTimesTheModelWaitedForAnElement) {
  PipelineAhead<int64_t> ahead(4);
  // Made ahead: the model takes without waiting.
  ahead.Start(Numbers(3));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!ahead.EndMade() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ahead.Next().ok());  // three and the end
  EXPECT_EQ(ahead.TakeWaits(), 0u);

  // Each element is slower than the model: it waits for every one (not for
  // the end, which comes with the last), and the count starts again after
  // it is taken.
  std::atomic<bool> release{false};
  ahead.Start(Numbers(2).map([&release](int64_t x) {
    while (!release.load()) std::this_thread::sleep_for(1ms);
    return x;
  }));
  std::thread opener([&release] {
    std::this_thread::sleep_for(30ms);
    release = true;
  });
  EXPECT_EQ(**ahead.Next(), 0);
  opener.join();
  EXPECT_EQ(ahead.TakeWaits(), 1u);
  EXPECT_EQ(ahead.TakeWaits(), 0u);
}

}  // namespace
}  // namespace elasticdl::worker
