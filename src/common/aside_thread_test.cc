#include "common/aside_thread.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace elasticdl {
namespace {

// The kernel's id of the calling thread: unlike std::thread::id, not reused
// by the next thread made after one has ended.
long KernelThreadId() { return syscall(SYS_gettid); }

long ThreadsOfThisProcess() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                       std::filesystem::directory_iterator());
}

TEST(AsideThreadTest, RunsEveryPieceInTurnOnOneNamedThreadOfItsOwn) {
  AsideThread aside("edl-test-aside");
  std::vector<long> ran_on;
  std::vector<int> order;
  std::string name;
  for (int i = 0; i < 5; ++i) {
    aside.Start([&, i] {
      ran_on.push_back(KernelThreadId());
      order.push_back(i);
      char buffer[16] = {};
      pthread_getname_np(pthread_self(), buffer, sizeof buffer);
      name = buffer;
    });
    aside.Wait();
    ASSERT_EQ(order.size(), static_cast<size_t>(i + 1)) << "Wait returned before piece " << i;
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  for (long id : ran_on) {
    EXPECT_EQ(id, ran_on.front());
    EXPECT_NE(id, KernelThreadId());
  }
  EXPECT_EQ(name, "edl-test-aside");
}

TEST(AsideThreadTest, StartWaitsForThePieceBeforeAndTheCallerRunsMeanwhile) {
  AsideThread aside("edl-test-aside");
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  aside.Start([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    done = 1;
  });
  // Start returned while the piece still runs.
  EXPECT_EQ(done, 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release = true;
  });
  aside.Start([&] { done = done * 10 + 2; });
  // The second piece was given only once the first had run.
  EXPECT_TRUE(release);
  aside.Wait();
  EXPECT_EQ(done, 12);
  releaser.join();
}

TEST(AsideThreadTest, TheDestructorWaitsForThePieceRunning) {
  std::atomic<bool> ran{false};
  {
    AsideThread aside("edl-test-aside");
    aside.Start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ran = true;
    });
  }
  EXPECT_TRUE(ran);
}

TEST(AsideThreadTest, NoThreadIsMadeBeforeTheFirstPiece) {
  const long before = ThreadsOfThisProcess();
  AsideThread aside("edl-test-aside");
  aside.Wait();  // nothing started: returns at once
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  aside.Start([] {});
  aside.Wait();
  EXPECT_EQ(ThreadsOfThisProcess(), before + 1);
}

}  // namespace
}  // namespace elasticdl
