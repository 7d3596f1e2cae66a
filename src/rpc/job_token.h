// The per-job token every call between the processes of a job carries, as
// metadata: the second factor beside the job's certificate
// (rpc/job_credentials.h). A server refuses a call without it
// (UNAUTHENTICATED) before reading the request (rpc/grpc_util.h), and its
// services check it again (GuardedCall).
#ifndef ELASTICDL_RPC_JOB_TOKEN_H_
#define ELASTICDL_RPC_JOB_TOKEN_H_

#include <grpcpp/grpcpp.h>

#include <exception>
#include <map>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "common/strings.h"
#include "elasticdl/status.h"
#include "rpc/grpc_util.h"

namespace elasticdl::rpc {

// The metadata key of the token on every call.
inline constexpr char kTokenMetadataKey[] = "x-elasticdl-token";

// OK when `context` carries `token`; UNAUTHENTICATED otherwise. An empty
// `token` accepts every call (in-process tests).
grpc::Status CheckToken(const grpc::ServerContext& context, const std::string& token);
// The same on a call's headers (as an AuthMetadataProcessor sees them).
grpc::Status CheckToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                        const std::string& token);

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
