#include "ps/ps_server.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>

#include <algorithm>
#include <thread>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "job/job_spec.h"
#include "job/trained_model.h"
#include "ps/checkpoint.h"
#include "ps/checkpoint_writer.h"
#include "ps/parameter_store.h"
#include "ps/ps_service.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"
#include "zoo/lr_schedule_config.h"

namespace elasticdl::ps {
namespace {

using Clock = std::chrono::steady_clock;

bool Cancelled(const PsServerOptions& options) {
  return options.cancel != nullptr && options.cancel->is_set();
}

// Sleeps `d`, waking when cancelled.
void SleepUnlessCancelled(const PsServerOptions& options, std::chrono::milliseconds d) {
  if (options.cancel != nullptr) {
    options.cancel->WaitFor(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

std::string DescribeUpdates(const ParameterStoreOptions& o) {
  if (o.use_async) {
    return o.max_staleness < 0 ? std::string("async")
                               : StrCat("async, max staleness ", o.max_staleness);
  }
  return StrCat(
      "sync, ",
      o.grads_to_wait > 0
          ? StrCat(o.grads_to_wait, o.grads_to_wait == 1 ? " gradient" : " gradients", " per step")
          : std::string("one gradient per training worker per step"),
      ", staleness tolerance ", o.staleness_tolerance);
}

// Initializes `store` from a checkpoint when asked to (relaunch, or
// --checkpoint_dir_for_init) and fills what the registration reports.
Status InitializeFromCheckpoints(const PsServerOptions& options, const proto::PsSpec& spec,
                                 const std::string& checkpoint_dir, ParameterStore* store,
                                 CheckpointWriter* writer, proto::RegisterPsRequest* request) {
  if (options.restore) {
    std::vector<std::string> skipped;
    StatusOr<proto::ShardCheckpoint> checkpoint =
        ReadNewestCheckpoint(checkpoint_dir, options.ps_id, std::max(spec.num_ps(), 1), &skipped);
    for (const auto& why : skipped) {
      spdlog::warn("parameter server {}: skipping an unreadable checkpoint: {}", options.ps_id,
                   why);
    }
    if (checkpoint.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(StrCat("parameter server ", options.ps_id,
                                        ": no checkpoint to restore in ", checkpoint_dir));
    }
    EDL_RETURN_IF_ERROR(checkpoint.status());
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(
        store->Restore(*checkpoint),
        StrCat("parameter server ", options.ps_id, ": restoring version ", checkpoint->version(),
               " from ", checkpoint_dir));
    request->set_restored(true);
    request->set_restored_version(checkpoint->version());
    *request->mutable_applied() = checkpoint->applied();
    spdlog::info("parameter server {}: restored version {} from {} ({} tasks in progress)",
                 options.ps_id, checkpoint->version(), checkpoint_dir, checkpoint->applied_size());
    return absl::OkStatus();
  }
  const std::string& init_dir = spec.checkpoint_dir_for_init();
  if (init_dir.empty()) return absl::OkStatus();
  EDL_ASSIGN_OR_RETURN(std::vector<proto::ShardCheckpoint> shards,
                       ReadNewestCompleteCheckpoint(init_dir));
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(
      store->InitFromCheckpoints(shards),
      StrCat("parameter server ", options.ps_id, ": initializing from ", init_dir));
  spdlog::info("parameter server {}: initialized from version {} in {} ({} shards)", options.ps_id,
               shards[0].version(), init_dir, shards.size());
  // The initial checkpoint of this job.
  EDL_ASSIGN_OR_RETURN(ShardSnapshot snapshot, store->Snapshot());
  writer->Offer(std::move(snapshot));
  return absl::OkStatus();
}

// The master, looked for again at the address in the job directory when it
// does not answer: a master started again on another node serves there.
class MasterChannel {
 public:
  MasterChannel(const PsServerOptions& options, rpc::JobCredentials credentials)
      : job_dir_(options.job_dir),
        ps_id_(options.ps_id),
        address_(options.master_address),
        credentials_(std::move(credentials)),
        stub_(proto::Master::NewStub(rpc::MakeChannel(address_, credentials_))) {}

  proto::Master::Stub* stub() { return stub_.get(); }
  const std::string& address() const { return address_; }
  // Connects to the address the job directory names now, if another.
  void Follow() {
    std::string address = CurrentMasterAddress(job_dir_, address_);
    if (address == address_) return;
    spdlog::info("parameter server {}: the master now serves at {} (was {})", ps_id_, address,
                 address_);
    address_ = std::move(address);
    stub_ = proto::Master::NewStub(rpc::MakeChannel(address_, credentials_));
  }

 private:
  const std::string job_dir_;
  const int ps_id_;
  std::string address_;
  const rpc::JobCredentials credentials_;
  std::unique_ptr<proto::Master::Stub> stub_;
};

Status Register(const PsServerOptions& options, MasterChannel* master, const std::string& token,
                const proto::RegisterPsRequest& request) {
  const auto deadline = Clock::now() + options.master_patience;
  while (true) {
    proto::RegisterPsResponse response;
    auto context = rpc::MakeContext(std::chrono::seconds(10), token);
    Status s = rpc::FromGrpc(master->stub()->RegisterPs(context.get(), request, &response));
    if (s.ok()) return s;
    if (!rpc::IsUnreachable(s) || Clock::now() > deadline) {
      return Annotate(s, StrCat("parameter server ", options.ps_id,
                                ": registering with the master at ", master->address()));
    }
    SleepUnlessCancelled(options, std::chrono::milliseconds(100));
    if (Cancelled(options)) return absl::CancelledError("cancelled while registering");
    master->Follow();
  }
}

// Serves until cancelled (OK) or the master is unreachable for longer than
// the patience (UNAVAILABLE).
Status ServeWhileMasterLives(const PsServerOptions& options, MasterChannel* master,
                             const std::string& token) {
  auto last_answer = Clock::now();
  bool warned = false;
  while (!Cancelled(options)) {
    SleepUnlessCancelled(options, options.master_check_interval);
    if (Cancelled(options)) break;
    proto::GetJobStatusResponse response;
    auto context = rpc::MakeContext(
        std::max(options.master_check_interval, std::chrono::milliseconds(1000)), token);
    Status s = rpc::FromGrpc(master->stub()->GetJobStatus(context.get(), {}, &response));
    // A master that answers, even with an error, is alive; a finished job
    // keeps us serving until the master stops us.
    if (!rpc::IsUnreachable(s)) {
      if (warned) {
        spdlog::info("parameter server {}: the master at {} is back", options.ps_id,
                     master->address());
      }
      last_answer = Clock::now();
      warned = false;
      continue;
    }
    const auto silent = Clock::now() - last_answer;
    if (silent > options.master_patience) {
      return absl::UnavailableError(
          StrCat("parameter server ", options.ps_id, ": the master at ", master->address(),
                 " has not answered for ",
                 std::chrono::duration_cast<std::chrono::seconds>(silent).count(), " s; exiting"));
    }
    if (!warned) {
      spdlog::warn(
          "parameter server {}: the master at {} does not answer ({}); waiting up to {} s",
          options.ps_id, master->address(), std::string(s.message()),
          std::chrono::duration_cast<std::chrono::seconds>(options.master_patience).count());
      warned = true;
    }
    master->Follow();
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ParameterStoreOptions> StoreOptionsOf(const proto::PsSpec& spec,
                                               const proto::OptimizerConfig& optimizer, int ps_id) {
  ParameterStoreOptions o;
  EDL_ASSIGN_OR_RETURN(o.optimizer, ParseOptimizer(optimizer.SerializeAsString()));
  if (optimizer.has_lr_schedule()) {
    EDL_ASSIGN_OR_RETURN(o.lr_schedule, LrScheduleFromProto(optimizer.lr_schedule()));
  }
  const proto::UpdateRule& update = spec.update();
  switch (update.mode()) {
    case proto::UpdateRule::ASYNC:
      o.use_async = true;
      o.max_staleness = update.max_version_lag();
      o.lr_staleness_modulation = update.lr_staleness_modulation();
      break;
    case proto::UpdateRule::SYNC_FIXED:
      o.use_async = false;
      o.grads_to_wait = std::max(update.grads_to_wait(), 1);
      o.staleness_tolerance = update.max_version_lag();
      break;
    default:
      o.use_async = false;
      o.grads_to_wait = 0;  // one gradient of every worker of the training group
      o.staleness_tolerance = update.max_version_lag();
      break;
  }
  o.ps_id = ps_id;
  o.num_ps = std::max(spec.num_ps(), 1);
  if (ps_id < 0 || ps_id >= o.num_ps) {
    return absl::InvalidArgumentError(
        StrCat("--ps_id=", ps_id, " is outside the job's ", o.num_ps, " parameter servers"));
  }
  o.snapshot_every = std::max<int64_t>(spec.checkpoint_steps(), 0);
  return o;
}

std::string CheckpointDirOf(const proto::PsSpec& spec, const std::string& job_dir) {
  return spec.checkpoint_dir().empty() ? CheckpointsDir(job_dir) : spec.checkpoint_dir();
}

Status RunPsServer(const PsServerOptions& options) {
  EDL_ASSIGN_OR_RETURN(proto::JobSpec job, ReadJobSpec(options.job_dir));
  EDL_ASSIGN_OR_RETURN(rpc::JobCredentials credentials, rpc::ReadJobCredentials(options.job_dir));
  const std::string& token = credentials.token;
  // A parameter server's part of the job: its settings and the optimizer.
  const proto::PsSpec& spec = job.ps();
  EDL_ASSIGN_OR_RETURN(ParameterStoreOptions store_options,
                       StoreOptionsOf(spec, job.model().optimizer_config(), options.ps_id));
  store_options.max_version = std::max<int64_t>(job.tasks().max_steps(), 0);
  if (!store_options.lr_schedule.is_constant()) {
    spdlog::info("learning-rate schedule {} over the optimizer's {}",
                 store_options.lr_schedule.Describe(), DescribeOptimizer(store_options.optimizer));
  }
  const std::string checkpoint_dir = CheckpointDirOf(spec, options.job_dir);
  CheckpointWriterOptions writer_options;
  writer_options.dir = checkpoint_dir;
  writer_options.ps_id = options.ps_id;
  writer_options.num_ps = store_options.num_ps;
  writer_options.keep_max = std::max(spec.keep_checkpoint_max(), 0);
  CheckpointWriter writer(writer_options);
  store_options.on_snapshot = [&writer](ShardSnapshot s) { writer.Offer(std::move(s)); };
  // Optimizer steps are small next to a worker's forward and backward; one
  // thread leaves the cores to the workers.
  at::set_num_threads(1);
  ParameterStore store(store_options);

  proto::RegisterPsRequest request;
  request.set_ps_id(options.ps_id);
  EDL_RETURN_IF_ERROR(
      InitializeFromCheckpoints(options, spec, checkpoint_dir, &store, &writer, &request));

  // The trained model's embedding tables, where the master has them written
  // (the model being built beside the output, PublishTrainedModel).
  const std::string export_dir =
      job.output().empty()
          ? std::string()
          : StrCat(TrainedModelStagingDir(AbsolutePath(job.output())), "/", kEmbeddingsDir);
  // Workers reach this server through the job's sockets where they run on
  // its machine; their pushes' tensors then pass through shared memory.
  PsService service(&store, token, &writer, export_dir,
                    credentials.socket_dir.empty() ? "" : rpc::SharedTensorRegion::DefaultDir());
  std::string address;
  EDL_ASSIGN_OR_RETURN(
      std::unique_ptr<grpc::Server> server,
      rpc::StartServer(options.host, options.port, {&service}, &address, credentials));
  request.set_address(address);
  MasterChannel master(options, credentials);
  Status s = Register(options, &master, token, request);
  if (s.ok()) {
    spdlog::info("parameter server {} serving on {} ({}, {}; checkpoints in {})", options.ps_id,
                 address, DescribeOptimizer(store_options.optimizer),
                 DescribeUpdates(store_options), checkpoint_dir);
    s = ServeWhileMasterLives(options, &master, token);
  }
  // A pull waiting for a step would hold the shutdown up to 5 s.
  store.StopWaiting();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  return s;
}

}  // namespace elasticdl::ps
