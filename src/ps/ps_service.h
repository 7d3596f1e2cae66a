// The gRPC face of a parameter-server shard: checks the job token, decodes
// requests, calls the ParameterStore, never lets an exception reach gRPC's
// threads. A refused request (UNAUTHENTICATED, INVALID_ARGUMENT, ...) changes
// nothing and the server keeps serving. The pushes and pulls a worker on this
// machine makes through its region of shared memory (rpc/shared_tensors.h)
// carry no token: the region is the job user's alone, and a call that
// carried the token named it first.
#ifndef ELASTICDL_PS_PS_SERVICE_H_
#define ELASTICDL_PS_PS_SERVICE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "ps/checkpoint_writer.h"
#include "ps/parameter_store.h"
#include "rpc/shared_tensors.h"

namespace elasticdl::ps {

class PsService final : public proto::ParameterServer::Service {
 public:
  // `store` (and `checkpoints`, whose figures Stats reports, if any) must
  // outlive the service. Every call must carry `token` (see
  // rpc/job_token.h); an empty token accepts every call (in-process tests).
  // Export writes to `export_dir` alone (the job's trained model's
  // embeddings/; empty: nowhere), whatever directory a caller names. Pushes
  // of workers on this machine may pass their tensors through regions of
  // shared memory in `shared_dir` (rpc/shared_tensors.h; empty: none).
  PsService(ParameterStore* store, std::string token, CheckpointWriter* checkpoints = nullptr,
            std::string export_dir = "", std::string shared_dir = "")
      : store_(store),
        token_(std::move(token)),
        checkpoints_(checkpoints),
        export_dir_(std::move(export_dir)),
        shared_(std::move(shared_dir)) {}

  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    proto::PullResponse* response) override;
  grpc::Status PullRows(grpc::ServerContext* context, const proto::PullRowsRequest* request,
                        proto::PullRowsResponse* response) override;
  grpc::Status Init(grpc::ServerContext* context, const proto::InitRequest* request,
                    proto::InitResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const proto::PushRequest* request,
                    proto::PushResponse* response) override;
  grpc::Status Flush(grpc::ServerContext* context, const proto::FlushRequest* request,
                     proto::FlushResponse* response) override;
  grpc::Status Export(grpc::ServerContext* context, const proto::ExportRequest* request,
                      proto::ExportResponse* response) override;
  grpc::Status SetGroup(grpc::ServerContext* context, const proto::SetGroupRequest* request,
                        proto::SetGroupResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::PsStatsRequest* request,
                     proto::PsStatsResponse* response) override;

  // Stops answering calls through regions (the last taken answered).
  ~PsService() override;

 private:
  // How often a thread that answers a region's calls looks whether to stop.
  static constexpr std::chrono::milliseconds kRegionCallPoll{200};

  // The tensors a region's last push was decoded into, kept by the thread
  // that answers its calls: the next push is decoded into those the store
  // has let go of (rpc::DecodeTensors' reuse) instead of new ones. They
  // keep one push's worth of memory per worker between its pushes, what a
  // synchronous step holds of every worker at once anyway.
  struct Decoded {
    rpc::NamedTensors gradients;
    rpc::NamedTensors buffer_updates;
  };
  // A push whose tensors lie in `entry`'s region; `decoded`: see Decoded.
  Status PushShared(const proto::PushRequest& request, rpc::SharedTensorRegions::Entry& entry,
                    proto::PushResponse* response, Decoded* decoded = nullptr);
  // A pull answered in `entry`'s values area (in the message when they do
  // not fit there).
  Status PullShared(const proto::PullRequest& request, rpc::SharedTensorRegions::Entry& entry,
                    proto::PullResponse* response);
  // A call made through `entry`'s region (a serialised RegionCall): the
  // serialised RegionAnswer. `decoded`: PushShared's.
  std::string AnswerRegionCall(rpc::SharedTensorRegions::Entry& entry, std::string_view bytes,
                               Decoded* decoded);
  // Answers the calls made through `entry`'s region from now on, on a
  // thread of its own until the region is dropped or the service goes.
  // False when the service is going. A pull there that waits for a
  // synchronous step holds the thread until the step, its wait_ms or the
  // store's StopWaiting.
  bool ServeRegionCalls(const std::shared_ptr<rpc::SharedTensorRegions::Entry>& entry);

  ParameterStore* const store_;
  const std::string token_;
  CheckpointWriter* const checkpoints_;
  const std::string export_dir_;
  rpc::SharedTensorRegions shared_;
  std::atomic<bool> stopping_{false};
  std::mutex call_threads_mu_;
  std::vector<std::thread> call_threads_;  // guarded by call_threads_mu_
};

}  // namespace elasticdl::ps

#endif  // ELASTICDL_PS_PS_SERVICE_H_
