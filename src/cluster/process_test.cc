#include "cluster/process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cluster/captured_sink.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

using ::elasticdl::testing::Shell;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Whether `pid` is gone or a zombie (an orphan's reaper may be slow).
bool Dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

bool DiesWithin(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Dead(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(ExitStatusTest, Describes) {
  EXPECT_EQ(ExitStatus::Exited(3).ToString(), "exit code 3");
  EXPECT_EQ(ExitStatus::Killed(SIGKILL).ToString(), "killed by SIGKILL");
  EXPECT_EQ(ExitStatus::Killed(SIGSEGV, true).ToString(), "killed by SIGSEGV (core dumped)");
  EXPECT_TRUE(ExitStatus::Exited(0).ok());
  EXPECT_FALSE(ExitStatus::Exited(1).ok());
  EXPECT_FALSE(ExitStatus::Killed(SIGTERM).ok());
}

TEST(ProcessTest, OutputBecomesLabelledLines) {
  CapturedSink out;
  auto process = Process::Start(Shell("job-1", "echo out; echo err >&2; printf tail"), out.sink());
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_TRUE((*process)->Wait().ok());
  std::string text = out.Text();
  EXPECT_THAT(text, HasSubstr("[job-1] out\n"));
  EXPECT_THAT(text, HasSubstr("[job-1] err\n"));
  EXPECT_THAT(text, HasSubstr("[job-1] tail\n"));
}

TEST(ProcessTest, ConcurrentChildrenDoNotInterleave) {
  CapturedSink out;
  const std::string script =
      "i=0; while [ $i -lt 2000 ]; do echo \"line $i "
      "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\"; i=$((i+1)); done";
  auto a = Process::Start(Shell("a", script), out.sink());
  auto b = Process::Start(Shell("b", script), out.sink());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->Wait().ok());
  EXPECT_TRUE((*b)->Wait().ok());
  std::string text = out.Text();
  int next[2] = {0, 0};
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    std::string line = text.substr(start, end - start);
    ASSERT_TRUE(line.rfind("[a] ", 0) == 0 || line.rfind("[b] ", 0) == 0) << line;
    int& expected = next[line[1] - 'a'];
    ASSERT_EQ(line.substr(4),
              "line " + std::to_string(expected++) +
                  " abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz");
    start = end + 1;
  }
  EXPECT_EQ(next[0], 2000);
  EXPECT_EQ(next[1], 2000);
}

TEST(ProcessTest, ReportsExitCodeAndSignal) {
  CapturedSink out;
  auto failing = Process::Start(Shell("f", "exit 3"), out.sink());
  ASSERT_TRUE(failing.ok());
  EXPECT_EQ((*failing)->Wait().ToString(), "exit code 3");

  ProcessSpec spec;
  spec.label = "false";
  spec.argv = {"false"};  // found in PATH
  auto false_process = Process::Start(spec, out.sink());
  ASSERT_TRUE(false_process.ok()) << false_process.status();
  EXPECT_EQ((*false_process)->Wait().ToString(), "exit code 1");

  spec.label = "sleeper";
  spec.argv = {"/bin/sleep", "30"};
  auto sleeper = Process::Start(spec, out.sink());
  ASSERT_TRUE(sleeper.ok());
  EXPECT_FALSE((*sleeper)->TryWait().has_value());
  EXPECT_FALSE((*sleeper)->WaitFor(20ms));
  ASSERT_TRUE((*sleeper)->Signal(SIGKILL).ok());
  ExitStatus status;
  ASSERT_TRUE((*sleeper)->WaitFor(5s, &status));
  EXPECT_EQ(status.ToString(), "killed by SIGKILL");
  EXPECT_TRUE((*sleeper)->Signal(SIGTERM).ok()) << "signalling an exited child is a no-op";
  EXPECT_EQ((*sleeper)->TryWait()->ToString(), "killed by SIGKILL");
}

TEST(ProcessTest, StartFailuresNameTheCause) {
  CapturedSink out;
  ProcessSpec spec;
  spec.label = "worker-1";
  spec.argv = {"edl-no-such-program"};
  auto missing = Process::Start(spec, out.sink());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot start worker-1"));
  EXPECT_THAT(missing.status().message(), HasSubstr("'edl-no-such-program' not found in PATH"));

  spec.argv = {"/nonexistent/edl-program", "--flag"};
  auto missing_path = Process::Start(spec, out.sink());
  EXPECT_EQ(missing_path.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing_path.status().message(),
              HasSubstr("cannot execute /nonexistent/edl-program: No such file or directory"));

  testing::TempDir dir;
  std::ofstream(dir.File("script")) << "#!/bin/sh\n";  // not executable
  spec.argv = {dir.File("script")};
  auto not_executable = Process::Start(spec, out.sink());
  EXPECT_EQ(not_executable.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(not_executable.status().message(), HasSubstr(dir.File("script")));

  spec.argv = {"/bin/true"};
  spec.working_dir = "/nonexistent-dir";
  auto bad_dir = Process::Start(spec, out.sink());
  EXPECT_EQ(bad_dir.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(bad_dir.status().message(), HasSubstr("working directory /nonexistent-dir"));

  spec.argv.clear();
  EXPECT_EQ(Process::Start(spec, out.sink()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.Text(), "");
}

TEST(ProcessTest, SetsEnvironmentAndWorkingDirectory) {
  CapturedSink out;
  testing::TempDir dir;
  ProcessSpec spec = Shell("w", "echo \"$EDL_TEST_VAR $HOME\"; pwd");
  spec.env = {{"EDL_TEST_VAR", "value"}, {"HOME", "/elsewhere"}};
  spec.working_dir = dir.path();
  auto process = Process::Start(spec, out.sink());
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_TRUE((*process)->Wait().ok());
  std::string real_dir = std::filesystem::canonical(dir.path()).string();
  EXPECT_EQ(out.Text(), "[w] value /elsewhere\n[w] " + real_dir + "\n");
}

TEST(ProcessTest, DestructorKillsTheChild) {
  CapturedSink out;
  ProcessSpec spec;
  spec.label = "sleeper";
  spec.argv = {"/bin/sleep", "30"};
  auto process = Process::Start(spec, out.sink());
  ASSERT_TRUE(process.ok());
  pid_t pid = (*process)->pid();
  process->reset();
  EXPECT_NE(::kill(pid, 0), 0) << "reaped, so the pid is gone";
}

TEST(ProcessTest, SignalReachesTheNewProcessGroup) {
  CapturedSink out;
  ProcessSpec spec = Shell("tree", "sleep 30 & echo $!; wait");
  spec.new_process_group = true;
  auto process = Process::Start(spec, out.sink());
  ASSERT_TRUE(process.ok());
  EXPECT_EQ(::getpgid((*process)->pid()), (*process)->pid());
  std::string text;
  for (int i = 0; i < 500 && text.find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(5ms);
    text = out.Text();
  }
  pid_t grandchild = std::atoi(text.c_str() + 7);  // "[tree] <pid>"
  ASSERT_GT(grandchild, 0) << text;
  ASSERT_TRUE((*process)->Signal(SIGTERM).ok());
  EXPECT_EQ((*process)->Wait().ToString(), "killed by SIGTERM");
  EXPECT_TRUE(DiesWithin(grandchild, 2s));
}

// Not a test by itself: the intermediate parent of ChildDiesWithParent, run
// in a copy of this binary, where it starts a grandchild and waits to be
// killed.
TEST(ProcessHelper, StartGrandchildAndHang) {
  const char* pid_file = std::getenv("EDL_CLUSTER_TEST_PID_FILE");
  if (pid_file == nullptr) GTEST_SKIP() << "helper of ChildDiesWithParent";
  LogSink sink(stderr);
  ProcessSpec spec;
  spec.label = "grandchild";
  spec.argv = {"/bin/sleep", "30"};
  auto grandchild = Process::Start(spec, &sink);
  ASSERT_TRUE(grandchild.ok());
  std::string temp = std::string(pid_file) + ".tmp";
  std::ofstream(temp) << (*grandchild)->pid();
  std::filesystem::rename(temp, pid_file);
  std::this_thread::sleep_for(30s);
}

TEST(ProcessTest, ChildDiesWithParent) {
  // Orphans get reparented to us, so we can reap the grandchild and see how
  // it died.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  CapturedSink out;
  testing::TempDir dir;
  ProcessSpec spec;
  spec.label = "parent";
  spec.argv = {std::filesystem::read_symlink("/proc/self/exe").string(),
               "--gtest_filter=ProcessHelper.StartGrandchildAndHang"};
  spec.env = {{"EDL_CLUSTER_TEST_PID_FILE", dir.File("pid")}};
  auto parent = Process::Start(spec, out.sink());
  ASSERT_TRUE(parent.ok()) << parent.status();
  pid_t grandchild = 0;
  for (int i = 0; i < 1000 && grandchild == 0; ++i) {
    std::this_thread::sleep_for(5ms);
    std::ifstream(dir.File("pid")) >> grandchild;
  }
  ASSERT_GT(grandchild, 0) << out.Text();
  ASSERT_TRUE((*parent)->Signal(SIGKILL).ok());
  EXPECT_EQ((*parent)->Wait().ToString(), "killed by SIGKILL");

  int wstatus = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 400 && reaped == 0; ++i) {
    reaped = ::waitpid(grandchild, &wstatus, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(5ms);
  }
  if (reaped == 0) ::kill(grandchild, SIGKILL);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(reaped, grandchild) << "the grandchild outlived its parent";
  EXPECT_EQ(ExitStatus::FromWaitStatus(wstatus).ToString(), "killed by SIGKILL");
}

}  // namespace
}  // namespace elasticdl::cluster

namespace elasticdl::cluster {
namespace {

TEST(ProcessStartTimeTest, NamesOneProcess) {
  StatusOr<uint64_t> ours = ProcessStartTime(::getpid());
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_GT(*ours, 0u);
  EXPECT_EQ(ProcessStartTime(::getpid()).value_or(0), *ours);
  EXPECT_EQ(ProcessStartTime(0x3fffffff).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProcessTest, InheritedOutputBypassesTheSink) {
  CapturedSink out;
  ProcessSpec spec = Shell("quiet", "echo to-our-stdout >/dev/null; exit 0");
  spec.inherit_output = true;
  auto process = Process::Start(spec, out.sink());
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_TRUE((*process)->Wait().ok());
  EXPECT_EQ(out.Text(), "");
}

TEST(ProcessTest, AdoptWatchesAndSignalsAProcessThatIsNotOurs) {
  CapturedSink out;
  ProcessSpec spec = Shell("sleeper", "exec sleep 30");
  spec.die_with_parent_signal = 0;
  auto child = Process::Start(spec, out.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  StatusOr<uint64_t> started = ProcessStartTime(pid);
  ASSERT_TRUE(started.ok()) << started.status();

  // A start time that does not match is another process: not adopted.
  EXPECT_EQ(Process::Adopt("sleeper", pid, *started + 1).status().code(),
            absl::StatusCode::kNotFound);

  auto adopted = Process::Adopt("sleeper", pid, *started);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_FALSE((*adopted)->TryWait().has_value());
  ASSERT_TRUE((*adopted)->Signal(SIGKILL).ok());
  ExitStatus status;
  ASSERT_TRUE((*adopted)->WaitFor(5s, &status));
  // Not our child: the exit is seen, its status is not.
  EXPECT_EQ(status.code, -1);
  EXPECT_EQ((*child)->Wait().signal, SIGKILL);
}

}  // namespace
}  // namespace elasticdl::cluster
