#include "rpc/grpc_util.h"

#include "common/strings.h"
#include "rpc/job_token.h"

namespace elasticdl::rpc {
namespace {

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

}  // namespace

grpc::ChannelArguments ChannelArgumentsOf(const JobCredentials& credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Fail fast and reconnect quickly when a peer restarts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
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

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const JobCredentials& credentials) {
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
    server_credentials = grpc::SslServerCredentials(ssl);
    if (!credentials.token.empty()) {
      server_credentials->SetAuthMetadataProcessor(
          std::make_shared<TokenProcessor>(credentials.token));
    }
  }
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(StrCat(host, ":", port), server_credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(max_request_bytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", host, ":", port));
  }
  *address = StrCat(host, ":", bound_port);
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
