#include "cluster/signals.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include "cluster/process.h"

namespace elasticdl::cluster {
namespace {

using namespace std::chrono_literals;

TEST(ShutdownSignalsTest, FirstSignalShutsDownSecondForces) {
  std::promise<int> shutdown, force;
  ShutdownSignalsOptions options;
  options.on_shutdown = [&](int sig) { shutdown.set_value(sig); };
  options.on_force = [&](int sig) { force.set_value(sig); };
  auto signals = ShutdownSignals::Install(options);
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_FALSE((*signals)->requested());
  EXPECT_FALSE((*signals)->WaitFor(10ms));

  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE((*signals)->WaitFor(2s));
  EXPECT_EQ((*signals)->signal(), SIGTERM);
  auto first = shutdown.get_future();
  ASSERT_EQ(first.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(first.get(), SIGTERM);

  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  auto second = force.get_future();
  ASSERT_EQ(second.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(second.get(), SIGINT);
  EXPECT_EQ((*signals)->signal(), SIGTERM) << "the first signal stays the reason";
}

TEST(ShutdownSignalsTest, ChildrenDoNotInheritTheBlockedSignals) {
  auto signals = ShutdownSignals::Install();
  ASSERT_TRUE(signals.ok());
  LogSink sink(stderr);
  ProcessSpec spec;
  spec.label = "child";
  spec.argv = {"/bin/sleep", "30"};
  auto child = Process::Start(spec, &sink);
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE((*child)->Signal(SIGTERM).ok());
  ExitStatus status;
  ASSERT_TRUE((*child)->WaitFor(2s, &status)) << "SIGTERM stayed blocked in the child";
  EXPECT_EQ(status.ToString(), "killed by SIGTERM");
  EXPECT_FALSE((*signals)->requested());
}

TEST(ShutdownSignalsTest, RejectsSignalsThatCannotBeCaught) {
  ShutdownSignalsOptions options;
  options.signals = {SIGINT, SIGKILL};
  EXPECT_EQ(ShutdownSignals::Install(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace elasticdl::cluster
