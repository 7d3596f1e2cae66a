// What starting a job's process costs: `elasticdl worker`-like children of
// elasticdl-torch started by exec (elasticdl execs elasticdl-torch, which
// loads LibTorch's libraries) and by a fork server that loaded them once
// (cluster/fork_server.h). Each child runs `--version` and exits, so the
// figures are the start alone. Rounds alternate the two ways.
//
// Usage: process_start_bench ELASTICDL_BINARY [STARTS_PER_ROUND [ROUNDS]]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cluster/fork_server.h"
#include "cluster/log_sink.h"
#include "cluster/process.h"

namespace {

using elasticdl::cluster::ForkServer;
using elasticdl::cluster::LogSink;
using elasticdl::cluster::Process;
using elasticdl::cluster::ProcessSpec;
using Clock = std::chrono::steady_clock;

double ChildCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Round {
  double wall_per_start;  // start to exit, seconds
  double cpu_per_start;   // CPU seconds, the server's own start included
};

Round Run(const std::string& binary, int starts, bool fork_server, std::FILE* out) {
  LogSink sink(out);
  ProcessSpec spec;
  spec.label = "worker";
  spec.argv = {binary, "--version"};
  spec.output_fd = ::fileno(out);
  spec.die_with_parent_signal = 0;
  const double cpu_before = ChildCpuSeconds();
  const Clock::time_point start = Clock::now();
  {
    if (fork_server) {
      ProcessSpec server = spec;
      server.label = "fork-server";
      server.argv = {binary, "fork-server"};
      server.die_with_parent_signal = SIGKILL;
      spec.fork_server = std::make_shared<ForkServer>(std::move(server), &sink);
    }
    for (int i = 0; i < starts; ++i) {
      auto child = Process::Start(spec, &sink);
      if (!child.ok() || !(*child)->Wait().ok()) {
        std::fprintf(stderr, "child %d failed\n", i);
        std::exit(1);
      }
    }
    spec.fork_server.reset();  // the server exits and is reaped: its CPU is counted
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  return Round{wall / starts, (ChildCpuSeconds() - cpu_before) / starts};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ELASTICDL_BINARY [STARTS_PER_ROUND [ROUNDS]]\n", argv[0]);
    return 2;
  }
  const std::string binary = argv[1];
  const int starts = argc > 2 ? std::atoi(argv[2]) : 10;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  std::FILE* null = std::fopen("/dev/null", "w");
  std::vector<double> ratio;
  std::printf("round  exec wall/start  exec cpu/start  fork wall/start  fork cpu/start\n");
  for (int r = 0; r < rounds; ++r) {
    const Round exec = Run(binary, starts, false, null);
    const Round fork = Run(binary, starts, true, null);
    std::printf("%5d  %13.3f s  %12.3f s  %13.3f s  %12.3f s\n", r, exec.wall_per_start,
                exec.cpu_per_start, fork.wall_per_start, fork.cpu_per_start);
  }
  std::printf("(%d starts a round; the fork server's own start is in its round's figures)\n",
              starts);
  return 0;
}
