// The per-job secret every call between the processes of a job carries.
//
// The client generates the token when it creates the job directory and
// leaves it there readable by the owner only (`<job_dir>/token`); the master,
// parameter servers and workers read it from there. Calls carry it as
// metadata; a server refuses a call without it (UNAUTHENTICATED) before
// looking at the request.
#ifndef ELASTICDL_RPC_JOB_TOKEN_H_
#define ELASTICDL_RPC_JOB_TOKEN_H_

#include <grpcpp/grpcpp.h>

#include <exception>
#include <string>

#include "common/strings.h"
#include "elasticdl/status.h"
#include "rpc/grpc_util.h"

namespace elasticdl::rpc {

// The metadata key of the token on every call.
inline constexpr char kTokenMetadataKey[] = "x-elasticdl-token";

// Generates a new random token and writes it to `job_dir`/token (mode 0600).
StatusOr<std::string> CreateJobToken(const std::string& job_dir);

// `job_dir`/token.
std::string JobTokenPath(const std::string& job_dir);

// The token of the job in `job_dir`.
StatusOr<std::string> ReadJobToken(const std::string& job_dir);

// OK when `context` carries `token`; UNAUTHENTICATED otherwise. An empty
// `token` accepts every call (in-process tests).
grpc::Status CheckToken(const grpc::ServerContext& context, const std::string& token);

// Adds `token` to the call's metadata (nothing when empty).
void AttachToken(grpc::ClientContext* context, const std::string& token);

// The body of a service method whose callers must present `token`: checks
// it (UNAUTHENTICATED), then runs `body` (returning a Status), turning any
// exception into INTERNAL naming `method`, so that none reaches gRPC's
// threads.
template <typename F>
grpc::Status GuardedCall(const grpc::ServerContext& context, const std::string& token,
                         const char* method, F&& body) {
  try {
    grpc::Status auth = CheckToken(context, token);
    if (!auth.ok()) return auth;
    return ToGrpc(body());
  } catch (const std::exception& e) {
    return ToGrpc(absl::InternalError(StrCat(method, ": ", e.what())));
  } catch (...) {
    return ToGrpc(absl::InternalError(StrCat(method, ": unknown exception")));
  }
}

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_JOB_TOKEN_H_
