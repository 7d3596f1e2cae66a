#include "ps/ps_server.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>

#include <chrono>
#include <thread>

#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "ps/parameter_store.h"
#include "ps/ps_service.h"
#include "rpc/grpc_util.h"
#include "rpc/job_spec.h"

namespace elasticdl::ps {

Status RunPsServer(const PsServerOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec spec, rpc::ReadJobSpec(options.job_dir));
  ParameterStoreOptions store_options;
  EDL_ASSIGN_OR_RETURN(store_options.optimizer,
                       ParseOptimizer(spec.optimizer_config().SerializeAsString()));
  store_options.use_async = spec.use_async();
  store_options.grads_to_wait = std::max(spec.grads_to_wait(), 1);
  store_options.staleness_tolerance = spec.sync_version_tolerance();
  store_options.lr_staleness_modulation = spec.lr_staleness_modulation();
  // Optimizer steps are small next to a worker's forward and backward; one
  // thread leaves the cores to the workers.
  at::set_num_threads(1);
  ParameterStore store(store_options);
  PsService service(&store);
  std::string address;
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<grpc::Server> server,
                       rpc::StartServer(options.host, options.port, {&service}, &address));

  auto master = proto::Master::NewStub(rpc::MakeChannel(options.master_address));
  proto::RegisterPsRequest request;
  request.set_ps_id(options.ps_id);
  request.set_address(address);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    proto::RegisterPsResponse response;
    auto context = rpc::MakeContext(std::chrono::seconds(10));
    Status s = rpc::FromGrpc(master->RegisterPs(context.get(), request, &response));
    if (s.ok()) break;
    if (s.code() != absl::StatusCode::kUnavailable || std::chrono::steady_clock::now() > deadline) {
      return Annotate(s, "registering with the master");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  spdlog::info("parameter server {} serving on {} ({}, {})", options.ps_id, address,
               DescribeOptimizer(store_options.optimizer),
               store_options.use_async
                   ? std::string("async")
                   : StrCat("sync, grads_to_wait=", store_options.grads_to_wait,
                            ", staleness tolerance ", store_options.staleness_tolerance));
  while (options.cancel == nullptr || !options.cancel->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  return absl::OkStatus();
}

}  // namespace elasticdl::ps
