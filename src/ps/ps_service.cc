#include "ps/ps_service.h"

#include <exception>

#include "common/strings.h"
#include "rpc/grpc_util.h"

namespace elasticdl::ps {
namespace {

template <typename F>
grpc::Status Guard(const char* method, F&& f) {
  try {
    return rpc::ToGrpc(f());
  } catch (const std::exception& e) {
    return rpc::ToGrpc(absl::InternalError(StrCat(method, ": ", e.what())));
  }
}

}  // namespace

grpc::Status PsService::Pull(grpc::ServerContext*, const proto::PullRequest* request,
                             proto::PullResponse* response) {
  return Guard("Pull", [&] { return store_->Pull(request->known_version(), response); });
}

grpc::Status PsService::Init(grpc::ServerContext*, const proto::InitRequest* request,
                             proto::InitResponse* response) {
  return Guard("Init", [&] {
    bool accepted = false;
    int64_t version = 0;
    Status s = store_->Init(request->values(), &accepted, &version);
    response->set_accepted(accepted);
    response->set_version(version);
    return s;
  });
}

grpc::Status PsService::Push(grpc::ServerContext*, const proto::PushRequest* request,
                             proto::PushResponse* response) {
  return Guard("Push", [&] { return store_->Push(*request, response); });
}

}  // namespace elasticdl::ps
