// gRPC plumbing shared by every role: channels and servers that accept large
// tensors, and conversions between grpc::Status and our Status.
#ifndef ELASTICDL_RPC_GRPC_UTIL_H_
#define ELASTICDL_RPC_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "elasticdl/status.h"

namespace elasticdl::rpc {

// The largest message either side accepts. gRPC's default (4 MiB) is far too
// small for model parameters.
inline constexpr int kMaxMessageBytes = 1 << 30;

// A channel to `address` ("host:port") with the message limits raised.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Starts a server on `host` (port 0: any free port) with `services`
// registered and the message limits raised. `*address` receives
// "host:port" of the bound port. Requests larger than `max_request_bytes`
// are refused (RESOURCE_EXHAUSTED) before reaching a service.
StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& host, int port,
                                                    const std::vector<grpc::Service*>& services,
                                                    std::string* address,
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
