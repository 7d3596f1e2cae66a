// The program cluster/fork_server_test.cc's servers run: `fork-server` serves forks
// (cluster/fork_server.h); `report CODE` prints what a child inherited and
// exits with CODE; `sleep` waits for a signal; `spare-owner OUTPUT
// [VAR=VALUE] [--pad=...]` forks a spare server as it starts, then, as a
// master does, has a ForkServer that adopts it start `report 7` (with
// VAR=VALUE in its environment, if given), its output appended to OUTPUT, and
// prints the exit and the lines the ForkServer logged. (--pad lengthens the
// command line the spare writes its children's over.)
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "cluster/fork_server.h"
#include "cluster/log_sink.h"
#include "cluster/process.h"

namespace {

int Child(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "report") == 0) {
    char cwd[4096];
    const char* var = std::getenv("EDL_FORK_TEST");
    std::ifstream file("/proc/self/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) c = c == '\0' ? '|' : c;
    std::printf("cwd=%s\nvar=%s\nppid=%d\npgid=%d\ncmdline=%s\n", ::getcwd(cwd, sizeof cwd),
                var != nullptr ? var : "(unset)", static_cast<int>(::getppid()),
                static_cast<int>(::getpgrp()), cmdline.c_str());
    return std::atoi(argv[2]);
  }
  if (argc > 1 && std::strcmp(argv[1], "sleep") == 0) {
    ::pause();
    return 0;
  }
  std::fprintf(stderr, "usage: %s report CODE | sleep | fork-server\n", argv[0]);
  return 2;
}

int SpareOwner(int argc, char** argv) {
  using elasticdl::cluster::ForkServer;
  using elasticdl::cluster::Process;
  using elasticdl::cluster::ProcessSpec;
  const int spare = elasticdl::cluster::TakeSpareForkServer();
  if (argc < 3 || spare < 0) {
    std::fprintf(stderr, "usage: %s spare-owner OUTPUT [VAR=VALUE] (no spare: %d)\n", argv[0],
                 spare);
    return 2;
  }
  const int output = ::open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (output < 0 || length <= 0) return 2;
  self[length] = '\0';
  // The spare joins the process group of its owner, which a master leads.
  ::setpgid(0, 0);
  ProcessSpec spec;
  spec.label = "fork-server";
  spec.argv = {self, "fork-server"};
  spec.output_fd = output;
  spec.die_with_parent_signal = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string var = argv[i];
    if (var.rfind("--pad=", 0) == 0) continue;
    spec.env = {{var.substr(0, var.find('=')), var.substr(var.find('=') + 1)}};
  }
  elasticdl::cluster::LogSink sink(stdout);
  auto server = std::make_shared<ForkServer>(spec, &sink, spare);
  spec.label = "child";
  spec.argv = {self, "report", "7"};
  spec.fork_server = server;
  auto child = Process::Start(spec, &sink);
  if (!child.ok()) {
    std::printf("start: %s\n", std::string(child.status().message()).c_str());
    return 1;
  }
  std::printf("owner=%d\nexit=%s\n", static_cast<int>(::getpid()),
              (*child)->Wait().ToString().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fork-server") == 0) {
    return elasticdl::cluster::ServeForks(argc, argv, Child);
  }
  if (argc > 1 && std::strcmp(argv[1], "spare-owner") == 0) {
    elasticdl::cluster::StartSpareForkServer(argc, argv, Child);
    return SpareOwner(argc, argv);
  }
  return Child(argc, argv);
}
