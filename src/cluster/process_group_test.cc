#include "cluster/process_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "testing/shell.h"

namespace elasticdl::cluster {
namespace {

using ::elasticdl::testing::Shell;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Exits reported by a ProcessGroup, and when.
class ExitLog {
 public:
  struct Exit {
    std::string label;
    ExitStatus status;
    Clock::time_point when;
  };

  ProcessGroup::ExitCallback Callback() {
    return [this](const std::string& label, pid_t, ExitStatus status) {
      std::lock_guard<std::mutex> lock(mu_);
      exits_.push_back({label, status, Clock::now()});
      changed_.notify_all();
    };
  }
  // Waits for `n` exits in all; returns them.
  std::vector<Exit> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, 5s, [&] { return exits_.size() >= n; });
    return exits_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Exit> exits_;
};

class ProcessGroupTest : public ::testing::Test {
 protected:
  ProcessGroupTest() : file_(std::tmpfile()), sink_(file_) {}
  ~ProcessGroupTest() override { std::fclose(file_); }

  std::string Output() const {
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::pread(fileno(file_), buffer, sizeof buffer, text.size())) > 0;) {
      text.append(buffer, n);
    }
    return text;
  }

  std::FILE* file_;
  LogSink sink_;
  ExitLog exits_;
};

TEST_F(ProcessGroupTest, ReportsSigkillAtOnce) {
  ProcessGroup group(&sink_, exits_.Callback());
  ProcessSpec spec;
  spec.label = "worker-1";
  spec.argv = {"/bin/sleep", "30"};
  ASSERT_TRUE(group.Start(spec).ok());
  EXPECT_EQ(group.running(), 1u);
  std::optional<pid_t> pid = group.pid("worker-1");
  ASSERT_TRUE(pid.has_value());
  std::this_thread::sleep_for(50ms);  // let the watcher settle in poll()

  Clock::time_point killed = Clock::now();
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);  // from outside, like the OOM killer
  auto exits = exits_.WaitFor(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].label, "worker-1");
  EXPECT_EQ(exits[0].status.ToString(), "killed by SIGKILL");
  EXPECT_LT(exits[0].when - killed, 200ms);
  EXPECT_EQ(group.running(), 0u);
  EXPECT_FALSE(group.pid("worker-1").has_value());
  EXPECT_EQ(group.Signal("worker-1", SIGTERM).code(), StatusCode::kNotFound);
}

TEST_F(ProcessGroupTest, LastOutputPrecedesTheExitReport) {
  std::promise<std::string> seen;
  ProcessGroup group(&sink_,
                     [&](const std::string&, pid_t, ExitStatus) { seen.set_value(Output()); });
  ASSERT_TRUE(group.Start(Shell("w", "echo one; printf two")).ok());
  auto output = seen.get_future();
  ASSERT_EQ(output.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(output.get(), "[w] one\n[w] two\n");
}

TEST_F(ProcessGroupTest, LabelsAreUniqueAndReusableAfterExit) {
  ProcessGroup* self = nullptr;
  int relaunches = 0;
  ExitLog log;
  auto record = log.Callback();
  ProcessGroup group(&sink_, [&](const std::string& label, pid_t pid, ExitStatus status) {
    record(label, pid, status);
    if (label == "flaky" && relaunches++ == 0) {
      EXPECT_TRUE(self->Start(Shell("flaky", "exit 0")).ok());
    }
  });
  self = &group;
  ProcessSpec sleeper;
  sleeper.label = "sleeper";
  sleeper.argv = {"/bin/sleep", "30"};
  ASSERT_TRUE(group.Start(sleeper).ok());
  EXPECT_EQ(group.Start(sleeper).status().code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(group.Start(Shell("flaky", "exit 3")).ok());
  auto exits = log.WaitFor(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].status.ToString(), "exit code 3");
  EXPECT_EQ(exits[1].status.ToString(), "exit code 0");
  EXPECT_EQ(group.running(), 1u);

  ProcessSpec missing;
  missing.label = "missing";
  missing.argv = {"/nonexistent/elasticdl"};
  Status status = group.Start(missing).status();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("cannot start missing"));
  EXPECT_EQ(group.running(), 1u);
}

TEST_F(ProcessGroupTest, StopAllKillsWhatIgnoresSigtermAfterGrace) {
  ProcessGroup group(&sink_, exits_.Callback());
  ProcessSpec polite;
  polite.label = "polite";
  polite.argv = {"/bin/sleep", "30"};
  ASSERT_TRUE(group.Start(polite).ok());
  // Ignores SIGTERM, and so do its `sleep`s; its own process group lets
  // SIGKILL reach those too.
  ProcessSpec stubborn = Shell("stubborn", "trap '' TERM; while :; do sleep 0.05; done");
  stubborn.new_process_group = true;
  ASSERT_TRUE(group.Start(stubborn).ok());
  std::this_thread::sleep_for(50ms);  // let the shell set its trap

  Clock::time_point start = Clock::now();
  group.StopAll(300ms);
  auto took = Clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(group.running(), 0u);
  std::map<std::string, std::string> statuses;
  for (const auto& exit : exits_.WaitFor(0)) statuses[exit.label] = exit.status.ToString();
  EXPECT_EQ(statuses["polite"], "killed by SIGTERM");
  EXPECT_EQ(statuses["stubborn"], "killed by SIGKILL");
  EXPECT_EQ(group.Start(polite).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ProcessGroupTest, DestructorStopsEveryChild) {
  std::vector<pid_t> pids;
  {
    ProcessGroup group(&sink_, nullptr);
    for (const char* label : {"ps-0", "worker-0", "worker-1"}) {
      ProcessSpec spec;
      spec.label = label;
      spec.argv = {"/bin/sleep", "30"};
      ASSERT_TRUE(group.Start(spec).ok());
      pids.push_back(*group.pid(label));
    }
  }
  for (pid_t pid : pids) EXPECT_NE(::kill(pid, 0), 0) << pid;
}

}  // namespace
}  // namespace elasticdl::cluster
