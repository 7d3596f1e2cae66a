#include "ps/ps_service.h"

#include <pthread.h>

#include <exception>
#include <filesystem>
#include <string_view>

#include "common/strings.h"
#include "ps/checkpoint.h"
#include "rpc/histogram_codec.h"
#include "rpc/job_token.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

using Area = rpc::SharedTensorRegion::Area;

// Answers with `values` through `entry`'s region: their tensors' values in
// its values area, their descriptions in `out`, where they lie in `shared`.
// In `out` itself when they do not fit.
void AnswerValues(const proto::ModelValues& values, rpc::SharedTensorRegions::Entry& entry,
                  proto::ModelValues* out, proto::SharedTensors* shared) {
  out->Clear();
  out->set_version(values.version());
  *out->mutable_embedding_tables() = values.embedding_tables();
  StatusOr<uint64_t> sequence;
  {
    // The worker reads them once answered; an earlier call of it that gave
    // up waiting may be answered at the same time.
    std::lock_guard<std::mutex> lock(entry.mu);
    sequence =
        entry.region->PutCopies(Area::kValues, {{&values.parameters(), out->mutable_parameters()},
                                                {&values.buffers(), out->mutable_buffers()}});
  }
  if (!sequence.ok()) {
    *out = values;
    return;
  }
  shared->set_region(entry.region->name());
  shared->set_sequence(*sequence);
}

}  // namespace

grpc::Status PsService::Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                             proto::PullResponse* response) {
  return rpc::GuardedCall(*context, token_, "Pull", [&]() -> Status {
    if (!request->has_shared()) return store_->Pull(*request, response);
    StatusOr<std::shared_ptr<rpc::SharedTensorRegions::Entry>> entry =
        shared_.Get(request->shared().region());
    if (entry.ok()) return PullShared(*request, **entry, response);
    std::shared_ptr<const proto::ModelValues> values;
    EDL_RETURN_IF_ERROR(store_->Pull(*request, response, &values));
    response->set_shared_unreadable(true);
    if (values != nullptr) *response->mutable_values() = *values;
    return absl::OkStatus();
  });
}

Status PsService::PullShared(const proto::PullRequest& request,
                             rpc::SharedTensorRegions::Entry& entry,
                             proto::PullResponse* response) {
  std::shared_ptr<const proto::ModelValues> values;
  EDL_RETURN_IF_ERROR(store_->Pull(request, response, &values));
  if (values != nullptr) {
    AnswerValues(*values, entry, response->mutable_values(), response->mutable_shared_values());
  }
  return absl::OkStatus();
}

grpc::Status PsService::PullRows(grpc::ServerContext* context,
                                 const proto::PullRowsRequest* request,
                                 proto::PullRowsResponse* response) {
  return rpc::GuardedCall(*context, token_, "PullRows",
                          [&] { return store_->PullRows(*request, response); });
}

grpc::Status PsService::Init(grpc::ServerContext* context, const proto::InitRequest* request,
                             proto::InitResponse* response) {
  return rpc::GuardedCall(*context, token_, "Init", [&] {
    bool accepted = false;
    int64_t version = 0;
    Status s = store_->Init(request->values(), &accepted, &version);
    response->set_accepted(accepted);
    response->set_version(version);
    return s;
  });
}

PsService::~PsService() {
  stopping_ = true;
  std::lock_guard<std::mutex> lock(call_threads_mu_);
  for (std::thread& t : call_threads_) t.join();
}

Status PsService::PushShared(const proto::PushRequest& request,
                             rpc::SharedTensorRegions::Entry& entry, proto::PushResponse* response,
                             Decoded* decoded) {
  // Decoded straight from the region, between two checks that the worker
  // has not begun writing another push there.
  const rpc::SharedTensorRegion& region = *entry.region;
  const uint64_t sequence = request.shared().sequence();
  EDL_RETURN_IF_ERROR(region.Check(Area::kPush, sequence));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors gradients,
                       rpc::DecodeTensors(request.gradients(), region.Bytes(Area::kPush),
                                          decoded ? &decoded->gradients : nullptr));
  EDL_ASSIGN_OR_RETURN(rpc::NamedTensors updates,
                       rpc::DecodeTensors(request.buffer_updates(), region.Bytes(Area::kPush),
                                          decoded ? &decoded->buffer_updates : nullptr));
  EDL_RETURN_IF_ERROR(region.Check(Area::kPush, sequence));
  std::shared_ptr<const proto::ModelValues> values;
  EDL_RETURN_IF_ERROR(
      store_->Push(request, std::move(gradients), std::move(updates), response, &values));
  if (values != nullptr) {
    AnswerValues(*values, entry, response->mutable_values(), response->mutable_shared_values());
  }
  return absl::OkStatus();
}

std::string PsService::AnswerRegionCall(rpc::SharedTensorRegions::Entry& entry,
                                        std::string_view bytes, Decoded* decoded) {
  proto::RegionAnswer answer;
  Status s;
  const std::string& region = entry.region->name();
  try {
    proto::RegionCall call;
    const bool parsed = call.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
    const proto::SharedTensors* named = call.has_push()   ? &call.push().shared()
                                        : call.has_pull() ? &call.pull().shared()
                                                          : nullptr;
    if (!parsed) {
      s = absl::InvalidArgumentError("a call through the region that does not parse");
    } else if (named == nullptr) {
      s = absl::InvalidArgumentError("a call through the region that is neither a push nor a pull");
    } else if (named->region() != region) {
      s = absl::InvalidArgumentError(
          StrCat("a call through region ", region, " naming region '", named->region(), "'"));
    } else if (call.has_push()) {
      s = PushShared(call.push(), entry, answer.mutable_push(), decoded);
    } else {
      s = PullShared(call.pull(), entry, answer.mutable_pull());
    }
  } catch (const std::exception& e) {
    s = absl::InternalError(StrCat("a call through the region: ", e.what()));
  }
  answer.set_code(static_cast<int>(s.code()));
  answer.set_message(std::string(s.message()));
  if (!s.ok()) answer.clear_response();
  std::string out = answer.SerializeAsString();
  if (out.size() <= rpc::SharedTensorRegion::kCallBytes) return out;
  // Values too big for the answer (they did not fit the values area either).
  if (answer.has_push()) {
    // The push was applied; the worker pulls the values.
    answer.mutable_push()->clear_values();
    answer.mutable_push()->clear_shared_values();
  } else {
    answer.clear_response();
    answer.set_too_big(true);
  }
  return answer.SerializeAsString();
}

bool PsService::ServeRegionCalls(const std::shared_ptr<rpc::SharedTensorRegions::Entry>& entry) {
  if (entry->served.exchange(true)) return true;
  std::lock_guard<std::mutex> lock(call_threads_mu_);
  if (stopping_) return false;
  // Open before the answer says so: the worker's next push is taken even if
  // the thread has not begun to wait for it.
  entry->region->OpenCalls();
  call_threads_.emplace_back([this, entry] {
    pthread_setname_np(pthread_self(), "edl-ps-region");
    Decoded decoded;  // one worker pushes here, one push at a time
    entry->region->ServeCalls(
        [this, &entry, &decoded](std::string_view bytes) {
          return AnswerRegionCall(*entry, bytes, &decoded);
        },
        [this, &entry] { return stopping_.load() || entry->dropped.load(); }, kRegionCallPoll);
  });
  return true;
}

grpc::Status PsService::Push(grpc::ServerContext* context, const proto::PushRequest* request,
                             proto::PushResponse* response) {
  return rpc::GuardedCall(*context, token_, "Push", [&]() -> Status {
    if (!request->has_shared()) return store_->Push(*request, response);
    StatusOr<std::shared_ptr<rpc::SharedTensorRegions::Entry>> entry =
        shared_.Get(request->shared().region());
    if (!entry.ok()) {
      response->set_shared_unreadable(true);  // nothing applied: the worker pushes again
      return absl::OkStatus();
    }
    EDL_RETURN_IF_ERROR(PushShared(*request, **entry, response));
    // The region is this worker's: its next pushes come through it.
    if (ServeRegionCalls(*entry)) response->set_region_calls(true);
    return absl::OkStatus();
  });
}

grpc::Status PsService::Flush(grpc::ServerContext* context, const proto::FlushRequest* request,
                              proto::FlushResponse* response) {
  return rpc::GuardedCall(*context, token_, "Flush", [&]() -> Status {
    int64_t version = 0;
    EDL_RETURN_IF_ERROR(store_->Flush(&version));
    response->set_version(version);
    if (!request->checkpoint() || checkpoints_ == nullptr) return absl::OkStatus();
    EDL_ASSIGN_OR_RETURN(ShardSnapshot snapshot, store_->Snapshot());
    return checkpoints_->WriteNow(std::move(snapshot));
  });
}

grpc::Status PsService::Export(grpc::ServerContext* context, const proto::ExportRequest* request,
                               proto::ExportResponse* response) {
  return rpc::GuardedCall(*context, token_, "Export", [&]() -> Status {
    if (request->dir().empty() || request->dir()[0] != '/') {
      return absl::InvalidArgumentError(
          StrCat("export to '", request->dir(), "': an absolute directory is expected"));
    }
    // Only where the job's trained model goes: an authenticated caller
    // cannot make the server write elsewhere.
    if (export_dir_.empty() || std::filesystem::path(request->dir()).lexically_normal() !=
                                   std::filesystem::path(export_dir_).lexically_normal()) {
      return absl::PermissionDeniedError(
          StrCat("export to '", request->dir(), "': this server exports only to ",
                 export_dir_.empty() ? "no directory (the job has no --output)" : export_dir_));
    }
    EDL_ASSIGN_OR_RETURN(ShardSnapshot snapshot, store_->Snapshot());
    response->set_version(snapshot.version);
    proto::ShardCheckpoint checkpoint;
    EDL_RETURN_IF_ERROR(EncodeSnapshot(std::move(snapshot), &checkpoint));
    if (request->version() > 0) checkpoint.set_version(request->version());
    return WriteCheckpoint(request->dir(), &checkpoint);
  });
}

grpc::Status PsService::SetGroup(grpc::ServerContext* context,
                                 const proto::SetGroupRequest* request, proto::SetGroupResponse*) {
  return rpc::GuardedCall(*context, token_, "SetGroup", [&] {
    store_->SetGroup(request->generation(),
                     std::vector<int32_t>(request->workers().begin(), request->workers().end()));
    return absl::OkStatus();
  });
}

grpc::Status PsService::Stats(grpc::ServerContext* context, const proto::PsStatsRequest*,
                              proto::PsStatsResponse* response) {
  return rpc::GuardedCall(*context, token_, "Stats", [&] {
    response->set_version(store_->version());
    const ParameterStore::DenseSize dense = store_->dense_size();
    response->set_dense_elements(dense.elements);
    response->set_dense_bytes(dense.bytes);
    for (const auto& [name, c] : store_->embedding_counters()) {
      proto::EmbeddingTableStats* table = response->add_tables();
      table->set_name(name);
      table->set_rows(c.rows);
      table->set_bytes(c.bytes);
      table->set_created(c.created);
      table->set_evicted_by_age(c.evicted_by_age);
      table->set_evicted_by_budget(c.evicted_by_budget);
      table->set_awaiting_admission(c.awaiting_admission);
      table->set_dropped_gradients(c.dropped_gradients);
    }
    if (checkpoints_ != nullptr) {
      const CheckpointStats stats = checkpoints_->stats();
      rpc::HistogramToProto(stats.seconds, response->mutable_checkpoint_seconds());
      response->set_checkpoints_failed(stats.failed);
      response->set_checkpoints_skipped(stats.skipped);
    }
    return absl::OkStatus();
  });
}

}  // namespace elasticdl::ps
