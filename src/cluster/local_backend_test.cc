// The local backend as the client uses it: the master it starts, its exit,
// the job's processes it leaves behind.
#include "cluster/local_backend.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/process_tuning.h"
#include "testing/backend_exits.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

using namespace std::chrono_literals;

// Whether `pid` is gone for good (reaped): no /proc entry.
bool Reaped(pid_t pid) {
  struct stat st {};
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0;
}

bool WaitUntilReaped(pid_t pid) {
  for (int i = 0; i < 500 && !Reaped(pid); ++i) std::this_thread::sleep_for(10ms);
  return Reaped(pid);
}

pid_t ReadPid(const std::string& path) {
  for (int i = 0; i < 500; ++i) {
    auto text = ReadFileToString(path);
    if (text.ok() && !text->empty() && text->back() == '\n') return std::stoi(*text);
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

class LocalBackendTest : public ::testing::Test {
 protected:
  // A stand-in for `elasticdl`: run as `<binary> master --job_dir=DIR`, it
  // runs `body` with $DIR set.
  LocalBackendOptions Options(const std::string& body) {
    const std::string script = dir_.File("fake-elasticdl");
    {
      std::ofstream f(script);
      f << "#!/bin/sh\nDIR=${2#--job_dir=}\n" << body << "\n";
    }
    ::chmod(script.c_str(), 0755);
    LocalBackendOptions o;
    o.binary = script;
    o.job_dir = dir_.path();
    return o;
  }

  testing::TempDir dir_;
  testing::BackendExits exits_;
};

TEST_F(LocalBackendTest, ReportsTheMastersExit) {
  LocalBackend backend(Options("test \"$1\" = master || exit 9\nsleep 0.3\nexit 3"),
                       exits_.Callback());
  auto handle = backend.StartMaster();
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_GT(handle->pid, 0);
  EXPECT_EQ(backend.Describe(*handle), "pid " + std::to_string(handle->pid));
  std::optional<ProcessExit> e = exits_.WaitForOne();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->process, ProcessName::Master());
  EXPECT_FALSE(e->ok);
  EXPECT_EQ(e->description, "exit code 3");
  EXPECT_TRUE(backend.log_dir().empty());
}

TEST_F(LocalBackendTest, ReapsTheProcessesADeadMasterLeaves) {
  // The master starts a process of the job and dies; the process ends
  // later, a child of ours by then, and must not stay a zombie.
  LocalBackend backend(Options("sleep 0.5 &\necho $! > \"$DIR/orphan\"\nexit 1"),
                       exits_.Callback());
  ASSERT_TRUE(backend.StartMaster().ok());
  pid_t orphan = ReadPid(dir_.File("orphan"));
  ASSERT_GT(orphan, 0);
  ASSERT_TRUE(exits_.WaitForOne().has_value());
  EXPECT_FALSE(Reaped(orphan));
  EXPECT_TRUE(WaitUntilReaped(orphan)) << "pid " << orphan << " was not reaped";
}

TEST_F(LocalBackendTest, StopAllEndsWhatIsLeftOfTheMastersGroup) {
  LocalBackend backend(Options("sleep 60 &\necho $! > \"$DIR/child\"\nexec sleep 60"),
                       exits_.Callback());
  ASSERT_TRUE(backend.StartMaster().ok());
  pid_t child = ReadPid(dir_.File("child"));
  ASSERT_GT(child, 0);
  backend.StopAll(200ms);
  std::optional<ProcessExit> e = exits_.WaitForOne();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->process, ProcessName::Master());
  EXPECT_TRUE(WaitUntilReaped(child)) << "pid " << child << " outlived StopAll";
}

TEST_F(LocalBackendTest, WorkersTakeFreeSlotsOfCores) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  // Two slots of the CPUs this process may use; a worker records its
  // arguments and runs until told to stop.
  LocalBackendOptions options = Options(
      "case \"$1\" in worker) ;; *) exit 9 ;; esac\n"
      "id=${4#--worker_id=}\n"
      "echo \"$5\" > \"$DIR/args-$id.tmp\" && mv \"$DIR/args-$id.tmp\" \"$DIR/args-$id\"\n"
      "while [ ! -e \"$DIR/stop-$id\" ]; do sleep 0.02; done");
  options.fork_server = false;
  const int width = static_cast<int>(cpus.size() / 2);
  options.worker_cpus = width;
  const std::string first = FormatCpuList({cpus.begin(), cpus.begin() + width});
  const std::string second = FormatCpuList({cpus.begin() + width, cpus.begin() + 2 * width});
  LocalBackend backend(std::move(options), exits_.Callback());
  auto args_of = [this](int id) -> std::string {
    for (int i = 0; i < 500; ++i) {
      auto text = ReadFileToString(dir_.File("args-" + std::to_string(id)));
      if (text.ok()) return *text;
      std::this_thread::sleep_for(10ms);
    }
    return "(never started)";
  };
  for (int id = 0; id < 3; ++id) ASSERT_TRUE(backend.StartWorker(WorkerId(id)).ok());
  EXPECT_EQ(args_of(0), "--cpus=" + first + "\n");
  EXPECT_EQ(args_of(1), "--cpus=" + second + "\n");
  EXPECT_EQ(args_of(2), "\n");  // every slot held: not bound
  // Worker 0 leaves: the next worker takes its slot.
  ASSERT_TRUE(WriteFileAtomically(dir_.File("stop-0"), "").ok());
  std::optional<ProcessExit> e = exits_.WaitForOne();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->process, ProcessName::Worker(WorkerId(0)));
  ASSERT_TRUE(backend.StartWorker(WorkerId(3)).ok());
  EXPECT_EQ(args_of(3), "--cpus=" + first + "\n");
  backend.StopAll(200ms);
}

}  // namespace
}  // namespace elasticdl::cluster
