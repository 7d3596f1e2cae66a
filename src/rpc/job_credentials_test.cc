// A job's credentials file, and gRPC between processes of a job over mutual
// TLS: a caller needs the job's certificate and its token; a plaintext
// caller, one with another job's certificate and one without the token are
// refused before the service runs.
#include "rpc/job_credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/file.h"
#include "common/job_dir.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/job_token.h"
#include "testing/temp_dir.h"

namespace elasticdl::rpc {
namespace {

using std::chrono::milliseconds;

JobCredentials Generate(bool tls = true) {
  StatusOr<JobCredentials> c = GenerateJobCredentials(tls);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(JobCredentialsTest, ANewFileIsItsOwnReadableByItsOwnerOnly) {
  testing::TempDir dir;
  // A link planted where the credentials go: its target is left alone.
  std::ofstream(dir.File("victim")) << "keep";
  std::filesystem::create_symlink(dir.File("victim"), CredentialsFile(dir.path()));
  StatusOr<JobCredentials> made = CreateJobCredentials(dir.path());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*ReadFileToString(dir.File("victim")), "keep");
  struct stat st {};
  ASSERT_EQ(::lstat(CredentialsFile(dir.path()).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  StatusOr<JobCredentials> read = ReadJobCredentials(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->token, made->token);
  EXPECT_EQ(read->token.size(), 64u);
  EXPECT_EQ(read->certificate, made->certificate);
  EXPECT_EQ(read->ca_certificate, made->ca_certificate);
  EXPECT_EQ(read->private_key, made->private_key);
  EXPECT_TRUE(read->uses_tls());
  // The job's sockets directory, for this user alone.
  EXPECT_EQ(read->socket_dir, SocketsDir(dir.path()));
  ASSERT_EQ(::lstat(read->socket_dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // --local_sockets=false: none, an earlier run's removed.
  ASSERT_TRUE(CreateJobCredentials(dir.path(), true, /*local_sockets=*/false).ok());
  EXPECT_FALSE(std::filesystem::exists(SocketsDir(dir.path())));
  EXPECT_EQ(ReadJobCredentials(dir.path())->socket_dir, "");
}

// As ssh takes a private key: a credentials file its group or others may
// read or write, or another user's, is refused naming it and the fix.
TEST(JobCredentialsTest, AFileOthersCanReadOrWriteIsRefused) {
  testing::TempDir dir;
  ASSERT_TRUE(CreateJobCredentials(dir.path()).ok());
  const std::string copy = dir.File("wr.cred");
  std::filesystem::copy_file(CredentialsFile(dir.path()), copy);
  ASSERT_EQ(::chmod(copy.c_str(), 0600), 0);
  ASSERT_TRUE(ReadCredentialsFile(copy).ok());
  ASSERT_EQ(::chmod(copy.c_str(), 0400), 0);
  ASSERT_TRUE(ReadCredentialsFile(copy).ok());
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602, 0666}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::chmod(copy.c_str(), mode), 0);
    StatusOr<JobCredentials> read = ReadCredentialsFile(copy);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied) << read.status();
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(read.status().message().find(copy + ": mode " + octal), std::string::npos)
        << read.status();
    EXPECT_NE(read.status().message().find("chmod 600 " + copy), std::string::npos)
        << read.status();
  }
  // The job directory's own file too.
  ASSERT_EQ(::chmod(CredentialsFile(dir.path()).c_str(), 0644), 0);
  EXPECT_EQ(ReadJobCredentials(dir.path()).status().code(), absl::StatusCode::kPermissionDenied);
  // Root reads the job's user's file (a pod running as root on the job
  // directory's volume), at mode 0600 only.
  if (::getuid() == 0) {
    ASSERT_EQ(::chmod(copy.c_str(), 0600), 0);
    ASSERT_EQ(::chown(copy.c_str(), 12345, 12345), 0);
    EXPECT_TRUE(ReadCredentialsFile(copy).ok());
    ASSERT_EQ(::chmod(copy.c_str(), 0640), 0);
    EXPECT_EQ(ReadCredentialsFile(copy).status().code(), absl::StatusCode::kPermissionDenied);
  }
}

TEST(JobCredentialsTest, EveryJobGetsAnotherCaAndToken) {
  JobCredentials a = Generate(), b = Generate();
  EXPECT_NE(a.token, b.token);
  EXPECT_NE(a.ca_certificate, b.ca_certificate);
  EXPECT_NE(a.private_key, b.private_key);
}

TEST(JobCredentialsTest, APlaintextJobHasATokenOnly) {
  JobCredentials plain = Generate(/*tls=*/false);
  StatusOr<JobCredentials> back = DecodeJobCredentials(EncodeJobCredentials(plain), "f");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->token, plain.token);
  EXPECT_FALSE(back->uses_tls());
}

TEST(JobCredentialsTest, BadFilesAreRefusedNamingTheFile) {
  JobCredentials a = Generate(), b = Generate();
  auto refused = [](const std::string& text, const std::string& expected) {
    StatusOr<JobCredentials> c = DecodeJobCredentials(text, "/jobs/j/credentials");
    ASSERT_FALSE(c.ok()) << expected;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_NE(c.status().message().find("/jobs/j/credentials"), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status();
  };
  // The old token file.
  refused(a.token + "\n", "pass the job's credentials file");
  refused("", "no ELASTICDL JOB TOKEN");
  // Another job's CA beside this job's certificate.
  JobCredentials mixed = a;
  mixed.ca_certificate = b.ca_certificate;
  refused(EncodeJobCredentials(mixed), "not issued by the CA beside it");
  JobCredentials wrong_key = a;
  wrong_key.private_key = b.private_key;
  refused(EncodeJobCredentials(wrong_key), "not the certificate's");
  JobCredentials no_ca = a;
  no_ca.ca_certificate.clear();
  refused(EncodeJobCredentials(no_ca), "a token, a certificate, its private key");
  std::string cut = EncodeJobCredentials(a);
  cut.resize(cut.size() - 40);
  refused(cut, "PEM block");
}

// A master service whose GetJobStatus answers; counts the calls that reach it.
class CountingMaster final : public proto::Master::Service {
 public:
  explicit CountingMaster(std::string token) : token_(std::move(token)) {}
  grpc::Status GetJobStatus(grpc::ServerContext* context, const proto::GetJobStatusRequest*,
                            proto::GetJobStatusResponse* response) override {
    ++calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_peer_ = context->peer();
    }
    return GuardedCall(*context, token_, "GetJobStatus", [&]() -> Status {
      response->set_epoch(7);
      return absl::OkStatus();
    });
  }
  std::atomic<int> calls{0};

  std::string last_peer() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_peer_;
  }

 private:
  const std::string token_;
  std::mutex mu_;
  std::string last_peer_;
};

class MutualTlsTest : public ::testing::Test {
 protected:
  // GetJobStatus of the master at `address`, called as `as` with `token`.
  static Status CallMaster(const std::string& address, const JobCredentials& as,
                           const std::string& token) {
    auto stub = proto::Master::NewStub(MakeChannel(address, as));
    auto context = MakeContext(milliseconds(3000), token);
    proto::GetJobStatusResponse response;
    return FromGrpc(stub->GetJobStatus(context.get(), {}, &response));
  }

  JobCredentials job_ = Generate();
};

TEST_F(MutualTlsTest, OnlyTheJobsCertificateWithItsTokenIsServed) {
  CountingMaster service(job_.token);
  std::string address;
  auto server = StartServer("127.0.0.1", 0, {&service}, &address, job_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto call = [&](const JobCredentials& as, const std::string& token) {
    return CallMaster(address, as, token);
  };
  Status ok = call(job_, job_.token);
  EXPECT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(service.calls.load(), 1);

  // Plaintext: the TLS handshake fails, nothing reaches the service.
  Status plain = call(JobCredentials{job_.token}, job_.token);
  EXPECT_EQ(plain.code(), absl::StatusCode::kUnavailable) << plain;
  // Another job's certificate (and this job's token): refused in the
  // handshake; with the other job's CA the client refuses the server too.
  JobCredentials other = Generate();
  Status foreign = call(other, job_.token);
  EXPECT_EQ(foreign.code(), absl::StatusCode::kUnavailable) << foreign;
  JobCredentials other_cert_this_ca = other;
  other_cert_this_ca.ca_certificate = job_.ca_certificate;
  Status foreign_cert = call(other_cert_this_ca, job_.token);
  EXPECT_EQ(foreign_cert.code(), absl::StatusCode::kUnavailable) << foreign_cert;
  // The job's certificate without the token, or with another: refused from
  // the headers, before the service runs.
  for (const std::string& token : {std::string(), other.token}) {
    Status no_token = call(job_, token);
    EXPECT_EQ(no_token.code(), absl::StatusCode::kUnauthenticated) << no_token;
  }
  EXPECT_EQ(service.calls.load(), 1);
  (*server)->Shutdown();
}

TEST_F(MutualTlsTest, AJobsChannelRefusesAPlaintextServer) {
  CountingMaster plain_service("");
  std::string address;
  auto server = StartServer("127.0.0.1", 0, {&plain_service}, &address, JobCredentials{});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = proto::Master::NewStub(MakeChannel(address, job_));
  auto context = MakeContext(milliseconds(3000), job_.token);
  proto::GetJobStatusResponse response;
  Status s = FromGrpc(stub->GetJobStatus(context.get(), {}, &response));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // The token never went out in the clear: the service saw no call.
  EXPECT_EQ(plain_service.calls.load(), 0);
  (*server)->Shutdown();
}

// Processes sharing the job directory call one another through Unix sockets
// in its 0700 sockets directory, the token still required; others use TCP.
TEST_F(MutualTlsTest, CallersOnThisMachineGoThroughTheJobsSocketsWithTheToken) {
  testing::TempDir dir;
  JobCredentials local = job_;
  local.socket_dir = SocketsDir(dir.path());
  ASSERT_TRUE(CreatePrivateDirectory(local.socket_dir, true).ok());
  CountingMaster service(job_.token);
  std::string address;
  auto server = StartServer("127.0.0.1", 0, {&service}, &address, local);
  ASSERT_TRUE(server.ok()) << server.status();
  auto call = [&](const JobCredentials& as, const std::string& token) {
    return CallMaster(address, as, token);
  };
  Status ok = call(local, job_.token);
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(service.last_peer().rfind("unix:", 0), 0u) << service.last_peer();
  // A copy of the credentials file elsewhere (no sockets directory): TCP, TLS.
  ok = call(job_, job_.token);
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(service.last_peer().rfind("ipv4:", 0), 0u) << service.last_peer();
  EXPECT_EQ(service.calls.load(), 2);
  // Through the socket without the token, or with another job's: refused
  // from the headers.
  for (const std::string& token : {std::string(), Generate().token}) {
    Status refused = call(local, token);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  }
  EXPECT_EQ(service.calls.load(), 2);
  (*server)->Shutdown();
}

// A sockets directory others may enter is not listened in.
TEST_F(MutualTlsTest, NoSocketInADirectoryOthersCanEnter) {
  testing::TempDir dir;
  JobCredentials local = job_;
  local.socket_dir = SocketsDir(dir.path());
  ASSERT_TRUE(CreatePrivateDirectory(local.socket_dir, true).ok());
  ASSERT_EQ(::chmod(local.socket_dir.c_str(), 0755), 0);
  CountingMaster service(job_.token);
  std::string address;
  auto server = StartServer("127.0.0.1", 0, {&service}, &address, local);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(std::filesystem::is_empty(local.socket_dir));
  (*server)->Shutdown();
}

// A socket nobody accepts on (its server died, or it is another host's on
// shared storage) is passed over for TCP.
TEST_F(MutualTlsTest, ASocketNobodyServesIsPassedOverForTcp) {
  testing::TempDir dir;
  CountingMaster service(job_.token);
  std::string address;
  auto server = StartServer("127.0.0.1", 0, {&service}, &address, job_);  // TCP only
  ASSERT_TRUE(server.ok()) << server.status();
  JobCredentials local = job_;
  local.socket_dir = SocketsDir(dir.path());
  ASSERT_TRUE(CreatePrivateDirectory(local.socket_dir, true).ok());
  std::filesystem::create_symlink("gone.sock", local.socket_dir + "/" + address);
  Status s = CallMaster(address, local, job_.token);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(service.last_peer().rfind("ipv4:", 0), 0u) << service.last_peer();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace elasticdl::rpc
