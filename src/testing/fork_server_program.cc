// The program cluster/fork_server_test.cc's servers run: `fork-server` serves forks
// (cluster/fork_server.h); `report CODE` prints what a child inherited and
// exits with CODE; `sleep` waits for a signal.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "cluster/fork_server.h"

namespace {

int Child(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "report") == 0) {
    char cwd[4096];
    const char* var = std::getenv("EDL_FORK_TEST");
    std::ifstream file("/proc/self/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) c = c == '\0' ? '|' : c;
    std::printf("cwd=%s\nvar=%s\nppid=%d\ncmdline=%s\n", ::getcwd(cwd, sizeof cwd),
                var != nullptr ? var : "(unset)", static_cast<int>(::getppid()), cmdline.c_str());
    return std::atoi(argv[2]);
  }
  if (argc > 1 && std::strcmp(argv[1], "sleep") == 0) {
    ::pause();
    return 0;
  }
  std::fprintf(stderr, "usage: %s report CODE | sleep | fork-server\n", argv[0]);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fork-server") == 0) {
    return elasticdl::cluster::ServeForks(argc, argv, Child);
  }
  return Child(argc, argv);
}
