#include "rpc/grpc_util.h"

#include "common/strings.h"
#include "rpc/job_token.h"

namespace elasticdl::rpc {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Fail fast and reconnect quickly when a peer restarts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& host, int port,
                                                    const std::vector<grpc::Service*>& services,
                                                    std::string* address, int max_request_bytes) {
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(StrCat(host, ":", port), grpc::InsecureServerCredentials(), &bound_port);
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
