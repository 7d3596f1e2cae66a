// gRPC plumbing shared by every role: channels and servers of a job (mutual
// TLS with the job's certificate, the token checked before a request is
// read, large tensors accepted), and conversions between grpc::Status and
// our Status.
#ifndef ELASTICDL_RPC_GRPC_UTIL_H_
#define ELASTICDL_RPC_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "elasticdl/status.h"
#include "rpc/job_credentials.h"

namespace elasticdl::rpc {

// The largest message either side accepts. gRPC's default (4 MiB) is far too
// small for model parameters.
inline constexpr int kMaxMessageBytes = 1 << 30;

// A channel to `address` ("host:port") of the job whose `credentials` are
// given, with the message limits raised. With a certificate (uses_tls()):
// TLS, presenting the job's certificate and accepting only a server whose
// certificate the job's CA issued. Without: plaintext.
//
// When the server serves on this machine through a socket in the job's
// sockets directory (`credentials.socket_dir`; see StartServer), the channel
// goes through that socket instead, without TLS (job_credentials.h says why
// that is as safe).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const JobCredentials& credentials);
// Whether MakeChannel reaches `address` through a socket of this machine.
bool ServedLocally(const std::string& address, const JobCredentials& credentials);
// MakeChannel's parts, for a caller that adds arguments of its own.
grpc::ChannelArguments ChannelArgumentsOf(const JobCredentials& credentials);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsOf(const JobCredentials& credentials);

// Starts a server on `host` (port 0: any free port) with `services`
// registered and the message limits raised. `*address` receives
// "host:port" of the bound port. Requests larger than `max_request_bytes`
// are refused (RESOURCE_EXHAUSTED) before reaching a service.
//
// With a certificate in `credentials`: TLS that requires a client
// certificate issued by the job's CA (a plaintext client or another job's
// fails the handshake), and a call without the job's token is refused
// (UNAUTHENTICATED) from its headers, before any of its body is read.
// Without: plaintext, the token checked by the services only.
//
// With a sockets directory in `credentials`, the server also listens on a
// Unix socket there, linked under the name `*address`, for MakeChannel's
// callers on this machine; the token is checked from their headers too.
StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& host, int port,
                                                    const std::vector<grpc::Service*>& services,
                                                    std::string* address,
                                                    const JobCredentials& credentials,
                                                    int max_request_bytes = kMaxMessageBytes);

Status FromGrpc(const grpc::Status& status);

// The peer could not be reached or did not answer in time (UNAVAILABLE,
// DEADLINE_EXCEEDED): worth retrying, unlike an answer that refused.
bool IsUnreachable(const Status& status);
grpc::Status ToGrpc(const Status& status);

// A client context with a deadline `timeout` from now, carrying the job's
// `token` (see job_token.h) when it is not empty.
std::unique_ptr<grpc::ClientContext> MakeContext(std::chrono::milliseconds timeout,
                                                 const std::string& token = "");

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_GRPC_UTIL_H_
