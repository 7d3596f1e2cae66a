// The Slurm backend's end of a job, against stand-ins for sbatch, squeue and
// scancel that keep each job's state in a file: the orders of events that a
// real cluster produces only by chance (a job that ends between two looks,
// one stuck on a lost node). tests/scenario/slurm_test.py runs the backend
// against a real Slurm cluster.
#include "cluster/slurm_backend.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "testing/backend_exits.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

using namespace std::chrono_literals;

// Each job's state is in state-<id>, written whole (a temporary file
// renamed) so that squeue never reads it half-written. `scancel
// --signal=TERM` runs on-term-<id> where there is one (a process that
// leaves on SIGTERM); `scancel` alone makes the job CANCELLED, or
// COMPLETING where stuck-<id> exists (a job on a node that no longer
// answers). Every scancel's arguments go to scancel.log, every squeue's to
// squeue.log once it has read the states, a line each.
constexpr const char* kSbatch = R"(#!/bin/sh
n=$(cat "$D/next" 2>/dev/null || echo 1)
echo $((n + 1)) > "$D/next"
echo RUNNING > "$D/state-$n.tmp" && mv "$D/state-$n.tmp" "$D/state-$n"
echo "$n"
)";
constexpr const char* kSqueue = R"(#!/bin/sh
for a in "$@"; do
  case "$a" in --jobs=*) ids=$(echo "${a#--jobs=}" | tr , ' ') ;; esac
done
for id in $ids; do
  [ -f "$D/state-$id" ] && echo "$id|$(cat "$D/state-$id")|None|n1"
done
echo "$*" >> "$D/squeue.log"
)";
constexpr const char* kScancel = R"(#!/bin/sh
echo "$*" >> "$D/scancel.log"
if [ "$1" = --signal=TERM ]; then
  for id in $(echo "$2" | tr , ' '); do
    [ -f "$D/on-term-$id" ] && . "$D/on-term-$id"
  done
  exit 0
fi
for id in $(echo "$1" | tr , ' '); do
  if [ -f "$D/stuck-$id" ]; then state=COMPLETING; else state=CANCELLED; fi
  echo $state > "$D/state-$id.tmp" && mv "$D/state-$id.tmp" "$D/state-$id"
done
)";

class SlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto [name, text] :
         {std::pair{"sbatch", kSbatch}, {"squeue", kSqueue}, {"scancel", kScancel}}) {
      const std::string path = dir_.File(name);
      std::ofstream(path) << text;
      ::chmod(path.c_str(), 0755);
    }
    const char* path = std::getenv("PATH");
    old_path_ = path != nullptr ? path : "";
    ::setenv("PATH", (dir_.path() + ":" + old_path_).c_str(), 1);
    ::setenv("D", dir_.path().c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    ::unsetenv("D");
  }

  std::unique_ptr<SlurmBackend> Backend(std::chrono::milliseconds poll) {
    SlurmBackendOptions o;
    o.binary = "elasticdl";
    o.job_dir = dir_.File("job");
    o.master_address = "localhost:1";
    o.job_name = "job";
    o.poll = poll;
    return std::make_unique<SlurmBackend>(o, exits_.Callback());
  }
  // Whole, as the stand-ins write theirs.
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.File(name + ".tmp")) << text << "\n";
    std::filesystem::rename(dir_.File(name + ".tmp"), dir_.File(name));
  }
  // Slurm job `id` ends COMPLETED on SIGTERM, as a process that leaves.
  void LeavesOnSigterm(int id) {
    const std::string state = "\"$D/state-" + std::to_string(id);
    Write("on-term-" + std::to_string(id),
          "echo COMPLETED > " + state + ".tmp\" && mv " + state + ".tmp\" " + state + "\"");
  }
  // What the stand-in `command` was asked, a call a line.
  std::vector<std::string> Calls(const std::string& command) {
    std::vector<std::string> calls;
    std::ifstream f(dir_.File(command + ".log"));
    for (std::string line; std::getline(f, line);) calls.push_back(line);
    return calls;
  }

  testing::TempDir dir_;
  testing::BackendExits exits_;
  std::string old_path_;
};

TEST_F(SlurmBackendTest, AJobThatEndsBetweenTheWatchersLooksIsNotCancelled) {
  // The watcher looks once, at the submission, and not again within the
  // grace: only a look of StopAll's own sees the job has ended.
  auto backend = Backend(60s);
  ASSERT_TRUE(backend->StartPs(PsId(0), {}).ok());
  for (int i = 0; i < 500 && Calls("squeue").empty(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(Calls("squeue").size(), 1u);
  LeavesOnSigterm(1);
  const auto began = std::chrono::steady_clock::now();
  backend->StopAll(300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - began, 300ms);
  EXPECT_EQ(Calls("scancel"), std::vector<std::string>{"--signal=TERM 1"});
  std::vector<ProcessExit> exits = exits_.WaitFor(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].ok) << exits[0].description;
  EXPECT_EQ(exits[0].description, "Slurm job 1 COMPLETED on n1");
}

TEST_F(SlurmBackendTest, AJobStillRunningAfterTheGraceIsCancelled) {
  auto backend = Backend(50ms);
  ASSERT_TRUE(backend->StartPs(PsId(0), {}).ok());
  ASSERT_TRUE(backend->StartWorker(WorkerId(0)).ok());
  LeavesOnSigterm(2);
  const auto began = std::chrono::steady_clock::now();
  backend->StopAll(300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - began, 300ms);
  EXPECT_EQ(Calls("scancel"), (std::vector<std::string>{"--signal=TERM 1,2", "1"}));
  std::vector<ProcessExit> exits = exits_.WaitFor(2);
  ASSERT_EQ(exits.size(), 2u);
  for (const ProcessExit& e : exits) {
    // Cancelled by the backend itself: a clean end, not someone's scancel.
    EXPECT_TRUE(e.ok) << e.description;
    EXPECT_FALSE(e.cancelled) << e.description;
  }
}

TEST_F(SlurmBackendTest, AJobAlreadyCancelledGetsNoSigtermAndIsNotCancelledAgain) {
  auto backend = Backend(50ms);
  ASSERT_TRUE(backend->StartWorker(WorkerId(0)).ok());
  ASSERT_TRUE(backend->StartWorker(WorkerId(1)).ok());
  // Worker 0's lease lapsed on a node that no longer answers: killed, its
  // job COMPLETING until Slurm gives the node up.
  Write("stuck-1", "");
  ASSERT_TRUE(backend->Signal(ProcessName::Worker(WorkerId(0)), SIGKILL).ok());
  LeavesOnSigterm(2);
  std::thread node_given_up([this] {
    std::this_thread::sleep_for(1s);
    Write("state-1", "NODE_FAIL");
  });
  backend->StopAll(10s);
  node_given_up.join();
  EXPECT_EQ(Calls("scancel"), (std::vector<std::string>{"1", "--signal=TERM 2"}));
  EXPECT_EQ(exits_.WaitFor(2).size(), 2u);
}

TEST_F(SlurmBackendTest, AJobStillPendingIsCancelledAtOnce) {
  auto backend = Backend(50ms);
  ASSERT_TRUE(backend->StartPs(PsId(0), {}).ok());
  ASSERT_TRUE(backend->StartWorker(WorkerId(0)).ok());
  // The worker waits for room: it has done nothing, and Slurm would refuse
  // it a signal.
  Write("state-2", "PENDING");
  LeavesOnSigterm(1);
  const auto began = std::chrono::steady_clock::now();
  backend->StopAll(10s);
  EXPECT_LT(std::chrono::steady_clock::now() - began, 5s);
  EXPECT_EQ(Calls("scancel"), (std::vector<std::string>{"2", "--signal=TERM 1"}));
  std::vector<ProcessExit> exits = exits_.WaitFor(2);
  ASSERT_EQ(exits.size(), 2u);
  for (const ProcessExit& e : exits) EXPECT_TRUE(e.ok) << e.description;
}

}  // namespace
}  // namespace elasticdl::cluster
