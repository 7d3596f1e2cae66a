#include "worker/team_binding.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/types.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/process_tuning.h"

namespace elasticdl::worker {
namespace {

void SetThisThreadsCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
}

// Every thread of this process, and the CPUs it may run on.
std::map<pid_t, std::vector<int>> ThreadsCpus() {
  std::map<pid_t, std::vector<int>> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const auto tid = static_cast<pid_t>(std::stoi(task.path().filename().string()));
    std::vector<int> cpus = AllowedCpus(tid);
    if (!cpus.empty()) out[tid] = cpus;
  }
  return out;
}

// Runs each test on two CPUs of the machine, and restores the thread's own.
class TeamBindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    own_ = AllowedCpus();
    if (own_.size() < 2) GTEST_SKIP() << "needs two CPUs";
    two_ = {own_[0], own_[1]};
    SetThisThreadsCpus(two_);
  }
  void TearDown() override {
    if (own_.size() >= 2) SetThisThreadsCpus(own_);
  }
  std::vector<int> own_;
  std::vector<int> two_;
};

TEST_F(TeamBindingTest, GivesTheCallerItsCoreAndTheTeamsOtherThreadTheOther) {
  TeamBinding binding(2);
  ASSERT_TRUE(binding.available()) << "libgomp is LibTorch's OpenMP runtime here";
  const pid_t self = static_cast<pid_t>(gettid());
  ASSERT_TRUE(binding.Bind().ok());
  EXPECT_TRUE(binding.bound());

  std::map<pid_t, std::vector<int>> bound = ThreadsCpus();
  ASSERT_EQ(bound[self].size(), 1u);
  const int mine = bound[self][0];
  std::vector<pid_t> others_on_one;
  for (const auto& [tid, cpus] : bound) {
    if (tid != self && cpus.size() == 1) others_on_one.push_back(tid);
  }
  // One other thread, the team's, on the other CPU.
  ASSERT_EQ(others_on_one.size(), 1u);
  EXPECT_NE(bound[others_on_one[0]][0], mine);

  // Threads started now run on both CPUs, not on the caller's one.
  std::vector<int> started;
  std::thread([&started] { started = AllowedCpus(); }).join();
  EXPECT_EQ(started, two_);

  // LibTorch's regions still run (on the bound team).
  torch::Tensor a = torch::ones({256, 256});
  EXPECT_EQ(torch::mm(a, a).sum().item<double>(), 256.0 * 256 * 256);

  ASSERT_TRUE(binding.Unbind().ok());
  EXPECT_FALSE(binding.bound());
  EXPECT_EQ(AllowedCpus(), two_);
  EXPECT_EQ(AllowedCpus(others_on_one[0]), two_);
}

TEST_F(TeamBindingTest, BindsOnlyWhereTheCoresAreAsManyAsTheThreads) {
  EXPECT_FALSE(TeamBinding(1).available());  // nothing to spread
  TeamBinding three(3);                      // more threads than the two CPUs
  EXPECT_FALSE(three.available());
  Status refused = three.Bind();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_FALSE(three.bound());
  EXPECT_TRUE(three.Unbind().ok());  // nothing bound, nothing to undo
  EXPECT_EQ(AllowedCpus(), two_);
}

}  // namespace
}  // namespace elasticdl::worker
