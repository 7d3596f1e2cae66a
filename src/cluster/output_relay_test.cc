#include "cluster/output_relay.h"

#include <gtest/gtest.h>

#include "cluster/captured_sink.h"
#include "cluster/process.h"

namespace elasticdl::cluster {
namespace {

using namespace std::chrono_literals;

TEST(OutputRelayTest, OutputOutlivesTheProcessThatStartedTheWriters) {
  CapturedSink out;
  auto relay = OutputRelay::Create(out.sink());
  ASSERT_TRUE(relay.ok()) << relay.status();
  // The first process starts a background writer and exits at once; the
  // writer's lines still arrive (and it gets no SIGPIPE).
  ProcessSpec spec;
  spec.label = "parent";
  spec.argv = {"/bin/sh", "-c",
               "echo '[parent] bye'; (sleep 0.3; echo '[orphan] still here'; echo '[orphan] done' "
               ">&2) &"};
  spec.output_fd = (*relay)->write_fd();
  auto parent = Process::Start(spec, out.sink());
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_TRUE((*parent)->Wait().ok());
  (*relay)->Stop(5s);
  EXPECT_EQ(out.Text(), "[parent] bye\n[orphan] still here\n[orphan] done\n");
}

TEST(OutputRelayTest, StopGivesUpOnWritersThatLinger) {
  CapturedSink out;
  auto relay = OutputRelay::Create(out.sink());
  ASSERT_TRUE(relay.ok()) << relay.status();
  ProcessSpec spec;
  spec.label = "lingerer";
  spec.argv = {"/bin/sh", "-c", "echo '[lingerer] up'; exec sleep 5"};
  spec.output_fd = (*relay)->write_fd();
  auto process = Process::Start(spec, out.sink());
  ASSERT_TRUE(process.ok()) << process.status();
  auto start = std::chrono::steady_clock::now();
  while (out.Text().empty() && std::chrono::steady_clock::now() - start < 5s) {
    std::this_thread::sleep_for(10ms);
  }
  (*relay)->Stop(50ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  EXPECT_EQ(out.Text(), "[lingerer] up\n");
}

}  // namespace
}  // namespace elasticdl::cluster
