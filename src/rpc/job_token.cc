#include "rpc/job_token.h"

namespace elasticdl::rpc {

grpc::Status CheckToken(const grpc::ServerContext& context, const std::string& token) {
  return CheckToken(context.client_metadata(), token);
}

grpc::Status CheckToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                        const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end() ||
      !ConstantTimeEquals(std::string_view(it->second.data(), it->second.size()), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the call lacks this job's token; only processes of the job may call");
  }
  return grpc::Status::OK;
}

void AttachToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata(kTokenMetadataKey, token);
}

}  // namespace elasticdl::rpc
