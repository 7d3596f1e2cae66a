#include "rpc/grpc_util.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "common/strings.h"
#include "rpc/job_token.h"

namespace elasticdl::rpc {
namespace {

// A synchronous gRPC server runs each call on a thread of its own pool, and
// by default keeps at most two of them idle: every call that overlaps one
// still in its handler (a pull waiting for a synchronous step, a heartbeat
// beside a report) then starts a thread, and a call that ends beyond two idle
// threads ends one: about six a second in each server of a job of two
// workers. Kept idle instead, they cost a stack each until the server ends.
constexpr int kIdleServerThreads = 16;

// Refuses a call whose headers lack the job's token, before the call reaches
// a service and before its request is read. Runs on gRPC's own thread: a
// compare, nothing that blocks.
class TokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenProcessor(std::string token) : token_(std::move(token)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* /*context*/,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    return CheckToken(metadata, token_);
  }

 private:
  const std::string token_;
};

std::shared_ptr<grpc::ServerCredentials> WithToken(std::shared_ptr<grpc::ServerCredentials> creds,
                                                   const std::string& token) {
  if (!token.empty()) creds->SetAuthMetadataProcessor(std::make_shared<TokenProcessor>(token));
  return creds;
}

// `<socket_dir>/<name>`, or "" when there is no sockets directory or the path
// does not fit a socket address.
std::string SocketPath(const std::string& socket_dir, const std::string& name) {
  if (socket_dir.empty()) return "";
  std::string path = StrCat(socket_dir, "/", name);
  return path.size() < sizeof(sockaddr_un::sun_path) ? path : "";
}

// The socket through which the server at `address` serves callers on this
// machine, or "" when there is none: a socket a server of this kernel
// accepts on (one left by a server that died refuses, and so does one that
// a server on another host made in a job directory on shared storage).
std::string LocalSocketOf(const std::string& address, const JobCredentials& credentials) {
  std::string path = SocketPath(credentials.socket_dir, address);
  if (path.empty()) return "";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  path.copy(sa.sun_path, path.size());
  int rc = 0;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } while (rc != 0 && errno == EINTR);
  ::close(fd);
  return rc == 0 ? path : "";
}

// Whether `dir` is a directory that only this user can enter (what makes
// its sockets as safe as the TLS port): theirs, mode 0700, not a link.
bool PrivateSocketDir(const std::string& dir) {
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() &&
         (st.st_mode & 0777) == 0700;
}

// Publishes `socket` under the server's TCP address in its directory (a
// relative link, replacing a predecessor's: a master restarted on its port).
void PublishSocket(const std::string& socket_dir, const std::string& socket,
                   const std::string& address) {
  const std::string link = SocketPath(socket_dir, address);
  if (link.empty()) return;
  const std::string tmp = StrCat(link, ".tmp.", ::getpid());
  ::unlink(tmp.c_str());
  const std::string target = socket.substr(socket_dir.size() + 1);
  if (::symlink(target.c_str(), tmp.c_str()) != 0 || std::rename(tmp.c_str(), link.c_str()) != 0) {
    ::unlink(tmp.c_str());  // callers use TCP
  }
}

}  // namespace

grpc::ChannelArguments ChannelArgumentsOf(const JobCredentials& credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly when a peer restarts: retries 100 ms after a failed
  // attempt, backing off to 1 s. gRPC also takes the minimum reconnect
  // backoff as the least time it gives one attempt to connect: 10 s, so that
  // an attempt whose handshake is slow on a loaded machine is not cut off
  // (at 100 ms, attempts bounded by the backoff could all time out).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Whatever address is dialled, the server must hold the job's certificate.
  if (credentials.uses_tls()) args.SetSslTargetNameOverride(kJobServerName);
  return args;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsOf(const JobCredentials& credentials) {
  if (!credentials.uses_tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = credentials.ca_certificate;
  ssl.pem_cert_chain = credentials.certificate;
  ssl.pem_private_key = credentials.private_key;
  return grpc::SslCredentials(ssl);
}

bool ServedLocally(const std::string& address, const JobCredentials& credentials) {
  return !LocalSocketOf(address, credentials).empty();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const JobCredentials& credentials) {
  if (std::string socket = LocalSocketOf(address, credentials); !socket.empty()) {
    JobCredentials local;  // no certificate: no TLS arguments
    return grpc::CreateCustomChannel(StrCat("unix:", socket),
                                     grpc::experimental::LocalCredentials(UDS),
                                     ChannelArgumentsOf(local));
  }
  return grpc::CreateCustomChannel(address, ChannelCredentialsOf(credentials),
                                   ChannelArgumentsOf(credentials));
}

StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& host, int port,
                                                    const std::vector<grpc::Service*>& services,
                                                    std::string* address,
                                                    const JobCredentials& credentials,
                                                    int max_request_bytes) {
  std::shared_ptr<grpc::ServerCredentials> server_credentials = grpc::InsecureServerCredentials();
  if (credentials.uses_tls()) {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = credentials.ca_certificate;
    ssl.pem_key_cert_pairs.push_back({credentials.private_key, credentials.certificate});
    server_credentials = WithToken(grpc::SslServerCredentials(ssl), credentials.token);
  }
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(StrCat(host, ":", port), server_credentials, &bound_port);
  // The same services on a socket of this process's own in the job's sockets
  // directory, published under the TCP address once it is known.
  static std::atomic<int> serial{0};
  std::string socket = SocketPath(credentials.socket_dir, StrCat(::getpid(), ".", serial++));
  if (!socket.empty() && PrivateSocketDir(credentials.socket_dir)) {
    ::unlink(socket.c_str());  // an earlier process's of the same pid
    builder.AddListeningPort(
        StrCat("unix:", socket),
        WithToken(grpc::experimental::LocalServerCredentials(UDS), credentials.token));
  } else {
    socket.clear();
  }
  builder.SetMaxReceiveMessageSize(max_request_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              kIdleServerThreads);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", host, ":", port));
  }
  *address = StrCat(host, ":", bound_port);
  if (!socket.empty()) PublishSocket(credentials.socket_dir, socket, *address);
  return server;
}

Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsUnreachable(const Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::unique_ptr<grpc::ClientContext> MakeContext(std::chrono::milliseconds timeout,
                                                 const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  AttachToken(context.get(), token);
  return context;
}

}  // namespace elasticdl::rpc
