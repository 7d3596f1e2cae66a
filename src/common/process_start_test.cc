#include "common/process_start.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace elasticdl {
namespace {

TEST(ProcessTokenTest, RoundTripsAndRefusesWhatIsNotOne) {
  EXPECT_EQ(ProcessToken(1234, 98765), "1234:98765");
  EXPECT_EQ(ParseProcessToken("1234:98765"), std::make_pair(pid_t{1234}, uint64_t{98765}));
  for (const char* bad : {"", "1234", "1234:", ":98765", "1234:98765x", "-3:4", "0:4", "a:b"}) {
    EXPECT_EQ(ParseProcessToken(bad), std::nullopt) << bad;
  }
}

TEST(ProcessRunningTest, ThisProcessRunsAndAnEndedChildDoesNotEvenAsAZombie) {
  StatusOr<uint64_t> start = ProcessStartTime(::getpid());
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(ProcessRunning(::getpid(), *start));
  EXPECT_FALSE(ProcessRunning(::getpid(), *start + 1));  // another process of that pid

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Ended and not reaped yet: a zombie, which still has its start time and
  // runs no more.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  StatusOr<uint64_t> child_start = ProcessStartTime(child);
  ASSERT_TRUE(child_start.ok()) << child_start.status();
  EXPECT_FALSE(ProcessRunning(child, *child_start));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(ProcessRunning(child, *child_start));
}

}  // namespace
}  // namespace elasticdl
