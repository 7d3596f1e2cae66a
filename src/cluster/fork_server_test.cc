#include "cluster/fork_server.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cluster/captured_sink.h"
#include "cluster/process.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

using ::testing::HasSubstr;

// Children of fork_server_test_program, their output appended to a file.
class ForkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    output_ = ::open(dir_.File("out").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ASSERT_GE(output_, 0);
  }
  void TearDown() override { ::close(output_); }

  ProcessSpec Spec(std::string label, std::vector<std::string> args) const {
    ProcessSpec spec;
    spec.label = std::move(label);
    spec.argv = {FORK_SERVER_TEST_PROGRAM};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.env = {{"EDL_FORK_TEST", "set for the job"}};
    spec.output_fd = output_;
    spec.die_with_parent_signal = 0;
    return spec;
  }

  std::shared_ptr<ForkServer> Server(std::vector<std::string> args = {"fork-server"}) {
    ProcessSpec server = Spec("fork-server", std::move(args));
    server.die_with_parent_signal = SIGKILL;
    return std::make_shared<ForkServer>(std::move(server), sink_.sink());
  }

  std::string Output() const {
    std::ifstream file(dir_.File("out"));
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  }

  testing::TempDir dir_;
  CapturedSink sink_;
  int output_ = -1;
};

TEST_F(ForkServerTest, ChildLooksExecedAndReportsItsExit) {
  std::shared_ptr<ForkServer> server = Server();
  ProcessSpec spec = Spec("worker-0", {"report", "3"});
  spec.working_dir = dir_.path();
  ASSERT_TRUE(server->Serves(spec));
  spec.fork_server = server;
  auto child = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  ExitStatus status = (*child)->Wait();
  EXPECT_TRUE(status.exited);
  EXPECT_EQ(status.code, 3);
  const std::string out = Output();
  EXPECT_THAT(out, HasSubstr("cwd=" + dir_.path() + "\n"));
  EXPECT_THAT(out, HasSubstr("var=set for the job\n"));
  // The server's child, not ours; its command line is its own argv.
  EXPECT_THAT(out, ::testing::Not(HasSubstr("ppid=" + std::to_string(::getpid()) + "\n")));
  EXPECT_THAT(out, HasSubstr(std::string("cmdline=") + FORK_SERVER_TEST_PROGRAM + "|report|3|"));
}

TEST_F(ForkServerTest, KilledChildIsReportedKilled) {
  std::shared_ptr<ForkServer> server = Server();
  ProcessSpec spec = Spec("worker-1", {"sleep"});
  spec.fork_server = server;
  auto child = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_FALSE((*child)->TryWait().has_value());
  ASSERT_TRUE((*child)->Signal(SIGKILL).ok());
  ExitStatus status = (*child)->Wait();
  EXPECT_FALSE(status.exited);
  EXPECT_EQ(status.signal, SIGKILL);
}

TEST_F(ForkServerTest, SpecsAForkCannotGiveAreExeced) {
  std::shared_ptr<ForkServer> server = Server();
  ProcessSpec dies_with_us = Spec("worker-2", {"report", "0"});
  dies_with_us.die_with_parent_signal = SIGKILL;
  EXPECT_FALSE(server->Serves(dies_with_us));
  ProcessSpec other_env = Spec("worker-3", {"report", "0"});
  other_env.env = {{"OMP_NUM_THREADS", "1"}};
  EXPECT_FALSE(server->Serves(other_env));
  ProcessSpec piped = Spec("worker-4", {"report", "0"});
  piped.output_fd = -1;
  EXPECT_FALSE(server->Serves(piped));

  // Exec'ed: our child.
  dies_with_us.fork_server = server;
  auto child = Process::Start(dies_with_us, sink_.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->Wait().ok());
  EXPECT_THAT(Output(), HasSubstr("ppid=" + std::to_string(::getpid()) + "\n"));
}

TEST_F(ForkServerTest, LongCommandLineIsExeced) {
  std::shared_ptr<ForkServer> server = Server();
  ProcessSpec spec = Spec("worker-5", {"report", "0", std::string(2000, 'x')});
  spec.fork_server = server;
  auto child = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->Wait().ok());
  EXPECT_THAT(Output(), HasSubstr("ppid=" + std::to_string(::getpid()) + "\n"));
  EXPECT_FALSE(server->Fork(spec).ok());
}

TEST_F(ForkServerTest, ServerThatDoesNotServeMeansExec) {
  // The program's usage error: it exits at once.
  std::shared_ptr<ForkServer> server = Server({"no-such-command"});
  ProcessSpec spec = Spec("worker-6", {"report", "4"});
  spec.fork_server = server;
  auto first = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->Wait().code, 4);
  auto second = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->Wait().code, 4);
  EXPECT_THAT(Output(), HasSubstr("ppid=" + std::to_string(::getpid()) + "\n"));
  EXPECT_TRUE(absl::IsUnavailable(server->Fork(spec).status()));
}

TEST_F(ForkServerTest, MissingWorkingDirectoryIsTheChildsError) {
  std::shared_ptr<ForkServer> server = Server();
  ProcessSpec spec = Spec("worker-7", {"report", "0"});
  spec.working_dir = dir_.File("missing");
  spec.fork_server = server;
  auto child = Process::Start(spec, sink_.sink());
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(child.status().message(), HasSubstr("cannot start worker-7"));
  EXPECT_THAT(child.status().message(), HasSubstr("working directory " + dir_.File("missing")));
}

TEST_F(ForkServerTest, ChildrenOutliveTheServer) {
  auto server = Server();
  ProcessSpec spec = Spec("worker-8", {"sleep"});
  spec.fork_server = server;
  auto child = Process::Start(spec, sink_.sink());
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  spec.fork_server.reset();
  server.reset();  // (*child) still holds it
  EXPECT_EQ(::kill(pid, 0), 0);
  ASSERT_TRUE((*child)->Signal(SIGTERM).ok());
  EXPECT_EQ((*child)->Wait().signal, SIGTERM);
}

// `fork_server_test_program spare-owner`: a process that forks a spare server
// as it starts and has a ForkServer adopt it (as a job's client and master
// do); its stdout. Its command line is as long as a job client's usually is
// unless `short_command_line`.
std::string RunSpareOwner(const std::string& output, const std::string& var = "",
                          bool short_command_line = false) {
  std::string command = std::string(FORK_SERVER_TEST_PROGRAM) + " spare-owner " + output;
  if (!var.empty()) command += " " + var;
  if (!short_command_line) command += " --pad=" + std::string(300, 'x');
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  out += "status=" + std::to_string(::pclose(pipe));
  return out;
}

TEST_F(ForkServerTest, AdoptedSpareForksTheOwnersChildren) {
  const std::string out = RunSpareOwner(dir_.File("out"));
  EXPECT_THAT(out, HasSubstr("exit=exit code 7\n"));
  EXPECT_THAT(out, HasSubstr("status=0"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("spare server"))) << "not adopted";
  const std::string owner = out.substr(out.find("owner=") + 6,
                                       out.find('\n', out.find("owner=")) - out.find("owner=") - 6);
  const std::string child = Output();
  // Forked by the spare, which joined the owner's process group and writes
  // where the owner's children write.
  EXPECT_THAT(child, HasSubstr("pgid=" + owner + "\n"));
  EXPECT_THAT(child, ::testing::Not(HasSubstr("ppid=" + owner + "\n")));
  EXPECT_THAT(child, HasSubstr(std::string("cmdline=") + FORK_SERVER_TEST_PROGRAM + "|report|7|"));
}

TEST_F(ForkServerTest, SpareOfAnotherEnvironmentIsRefusedAndAServerExeced) {
  // A variable the owner's children get that the spare did not load with.
  const std::string out = RunSpareOwner(dir_.File("out"), "EDL_FORK_TEST=for-the-children");
  EXPECT_THAT(out, HasSubstr("the client's spare server was started in another environment"));
  EXPECT_THAT(out, HasSubstr("exit=exit code 7\n"));
  EXPECT_THAT(Output(), HasSubstr("var=for-the-children\n"));
}

TEST_F(ForkServerTest, SpareWithTooShortACommandLineIsRefusedQuietly) {
  // Its children's command lines are written over its own: a server is
  // exec'ed instead, without a word (a command typed by hand is short).
  const std::string out = RunSpareOwner(dir_.File("out"), "", /*short_command_line=*/true);
  EXPECT_THAT(out, ::testing::Not(HasSubstr("spare server")));
  EXPECT_THAT(out, HasSubstr("exit=exit code 7\n"));
}

}  // namespace
}  // namespace elasticdl::cluster
