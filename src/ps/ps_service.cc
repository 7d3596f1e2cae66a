#include "ps/ps_service.h"

#include <exception>

#include "common/strings.h"
#include "rpc/grpc_util.h"
#include "rpc/job_token.h"

namespace elasticdl::ps {
namespace {

// Checks the token, then runs `f` (returning a Status) with every exception
// turned into INTERNAL naming `method`.
template <typename F>
grpc::Status Guard(const grpc::ServerContext* context, const std::string& token, const char* method,
                   F&& f) {
  try {
    grpc::Status auth = rpc::CheckToken(*context, token);
    if (!auth.ok()) return auth;
    return rpc::ToGrpc(f());
  } catch (const std::exception& e) {
    return rpc::ToGrpc(absl::InternalError(StrCat(method, ": ", e.what())));
  } catch (...) {
    return rpc::ToGrpc(absl::InternalError(StrCat(method, ": unknown exception")));
  }
}

}  // namespace

grpc::Status PsService::Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                             proto::PullResponse* response) {
  return Guard(context, token_, "Pull", [&] { return store_->Pull(*request, response); });
}

grpc::Status PsService::Init(grpc::ServerContext* context, const proto::InitRequest* request,
                             proto::InitResponse* response) {
  return Guard(context, token_, "Init", [&] {
    bool accepted = false;
    int64_t version = 0;
    Status s = store_->Init(request->values(), &accepted, &version);
    response->set_accepted(accepted);
    response->set_version(version);
    return s;
  });
}

grpc::Status PsService::Push(grpc::ServerContext* context, const proto::PushRequest* request,
                             proto::PushResponse* response) {
  return Guard(context, token_, "Push", [&] { return store_->Push(*request, response); });
}

grpc::Status PsService::Flush(grpc::ServerContext* context, const proto::FlushRequest*,
                              proto::FlushResponse* response) {
  return Guard(context, token_, "Flush", [&] {
    int64_t version = 0;
    Status s = store_->Flush(&version);
    response->set_version(version);
    return s;
  });
}

}  // namespace elasticdl::ps
