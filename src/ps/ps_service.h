// The gRPC face of a parameter-server shard: decodes requests, calls the
// ParameterStore, never lets an exception reach gRPC's threads.
#ifndef ELASTICDL_PS_PS_SERVICE_H_
#define ELASTICDL_PS_PS_SERVICE_H_

#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "ps/parameter_store.h"

namespace elasticdl::ps {

class PsService final : public proto::ParameterServer::Service {
 public:
  explicit PsService(ParameterStore* store) : store_(store) {}

  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    proto::PullResponse* response) override;
  grpc::Status Init(grpc::ServerContext* context, const proto::InitRequest* request,
                    proto::InitResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const proto::PushRequest* request,
                    proto::PushResponse* response) override;

 private:
  ParameterStore* const store_;
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PS_SERVICE_H_
