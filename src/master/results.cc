#include "master/results.h"

#include <algorithm>
#include <filesystem>

#include "common/file.h"
#include "common/finite.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "job/trained_model.h"
#include "ps/checkpoint.h"

namespace elasticdl::master {
namespace {

namespace fs = std::filesystem;

// Every parameter and buffer from all parameter servers.
StatusOr<proto::ModelValues> PullModel(rpc::ParameterServers* servers) {
  std::vector<proto::PullRequest> requests(static_cast<size_t>(servers->num_shards()));
  for (auto& r : requests) r.set_known_version(-1);
  std::vector<proto::PullResponse> responses;
  EDL_RETURN_IF_ERROR(servers->Pull(requests, &responses));
  proto::ModelValues all;
  for (const proto::PullResponse& r : responses) {
    if (!r.initialized()) return absl::FailedPreconditionError("a parameter server has no model");
    all.set_version(std::max(all.version(), r.values().version()));
    for (const auto& t : r.values().parameters()) *all.add_parameters() = t;
    for (const auto& t : r.values().buffers()) *all.add_buffers() = t;
  }
  // Every shard declares every table.
  if (!responses.empty()) {
    *all.mutable_embedding_tables() = responses.front().values().embedding_tables();
  }
  return all;
}

// The first tensor of `values` holding a NaN or an infinity; empty if none.
std::string FirstNonFinite(const proto::ModelValues& values) {
  // A 2-byte float (little-endian) whose exponent's bits are all set is an
  // infinity or a NaN.
  auto all_finite_16 = [](const std::string& bytes, uint16_t exponent) {
    for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
      const auto bits = static_cast<uint16_t>(static_cast<uint8_t>(bytes[i]) |
                                              static_cast<uint8_t>(bytes[i + 1]) << 8);
      if ((bits & exponent) == exponent) return false;
    }
    return true;
  };
  auto scan = [&all_finite_16](const proto::Tensor& t) {
    const std::string& bytes = t.content();
    if (t.dtype() == proto::DT_FLOAT32) return AllFiniteFloat32(bytes.data(), bytes.size() / 4);
    if (t.dtype() == proto::DT_FLOAT64) return AllFiniteFloat64(bytes.data(), bytes.size() / 8);
    if (t.dtype() == proto::DT_FLOAT16) return all_finite_16(bytes, 0x7c00);
    if (t.dtype() == proto::DT_BFLOAT16) return all_finite_16(bytes, 0x7f80);
    return true;
  };
  for (const auto* tensors : {&values.parameters(), &values.buffers()}) {
    for (const proto::Tensor& t : *tensors) {
      if (!scan(t)) return t.name();
    }
  }
  return "";
}

Status CopyTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(StrCat("copying ", from, " to ", to, ": ", ec.message()));
  return absl::OkStatus();
}

proto::TrainedModel ModelRecord(const proto::JobSpec& spec, const proto::ModelValues& values) {
  proto::TrainedModel record;
  record.set_zoo_identity(spec.model().zoo_identity());
  record.set_model_def(spec.model().model_def());
  record.set_model_def_params(spec.model().params());
  record.set_params_filename(kParametersFile);
  record.set_input_function(spec.model().dataset_fn());
  record.set_loss(spec.model().loss());
  record.set_optimizer(spec.model().optimizer());
  record.set_eval_metrics_fn(spec.model().eval_metrics_fn());
  record.set_model_zoo(spec.model().model_zoo());
  record.set_zoo_commit(spec.model().zoo_commit());
  record.set_image(spec.cluster().kubernetes().image());
  record.set_model_version(values.version());
  record.set_seed(spec.seed());
  record.set_has_embedding_tables(values.embedding_tables_size() > 0);
  *record.mutable_optimizer_config() = spec.model().optimizer_config();
  record.set_lr_schedule(spec.model().lr_schedule_description());
  return record;
}

// Publishes `values` as the trained model; the servers (when the model has
// embedding tables) export their rows into it.
Status PublishModel(const proto::JobSpec& spec, const proto::ModelValues& values,
                    rpc::ParameterServers* servers,
                    const std::function<Status(const std::string&)>& add_files) {
  if (std::string bad = FirstNonFinite(values); !bad.empty()) {
    return absl::DataLossError(StrCat("'", bad, "' holds non-finite values at model version ",
                                      values.version(), "; the model is not written"));
  }
  return PublishTrainedModel(spec.output(), [&](const std::string& staging) -> Status {
    if (values.embedding_tables_size() > 0) {
      // The tables stay where they are big: each server writes its rows.
      std::vector<proto::ExportResponse> exported;
      // One version directory for all: the model's version.
      EDL_RETURN_IF_ERROR(
          servers->Export(staging + "/" + kEmbeddingsDir, values.version(), &exported));
    }
    EDL_RETURN_IF_ERROR(WriteTrainedModel(staging, ModelRecord(spec, values), values));
    EDL_RETURN_IF_ERROR(CopyTree(spec.job_dir() + "/" + kZooDir, staging + "/" + kZooDir));
    return add_files ? add_files(staging) : absl::OkStatus();
  });
}

}  // namespace

Status WriteTrainingResults(const proto::JobSpec& spec, bool checkpoint,
                            rpc::ParameterServers* servers,
                            const std::function<Status(const std::string&)>& add_files) {
  if (checkpoint) {
    std::vector<proto::FlushResponse> flushed;
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(servers->Flush(&flushed, /*checkpoint=*/true),
                                     "writing the last checkpoint");
  }
  if (!spec.output().empty()) {
    StatusOr<proto::ModelValues> values = PullModel(servers);
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(
        values.ok() ? PublishModel(spec, *values, servers, add_files) : values.status(),
        "writing the trained model");
  }
  return absl::OkStatus();
}

Status WriteCollectiveTrainingResults(const proto::JobSpec& spec, int64_t model_version,
                                      const std::function<Status(const std::string&)>& add_files) {
  if (spec.output().empty()) return absl::OkStatus();
  const std::string dir = spec.ps().checkpoint_dir().empty() ? CheckpointsDir(spec.job_dir())
                                                             : spec.ps().checkpoint_dir();
  const std::string path = ps::CheckpointPath(dir, model_version, 0, 1);
  StatusOr<proto::ShardCheckpoint> checkpoint = ps::ReadCheckpoint(path);
  if (absl::IsNotFound(checkpoint.status())) {
    return absl::UnavailableError(StrCat("waiting for the workers' checkpoint of model version ",
                                         model_version, " (", path, ")"));
  }
  EDL_RETURN_IF_ERROR(checkpoint.status());
  proto::ModelValues values = ps::ModelValuesOf({*checkpoint});
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(PublishModel(spec, values, nullptr, add_files),
                                   "writing the trained model");
  return absl::OkStatus();
}

Status MergePredictions(const proto::JobSpec& spec,
                        const std::vector<std::pair<Range, TaskId>>& tasks) {
  std::string out_path = spec.output();
  if (!HasSuffix(out_path, ".csv")) {
    EDL_RETURN_IF_ERROR(CreateDirectories(out_path));
    out_path += "/predictions.csv";
  }
  std::string body;
  size_t columns = 0;
  for (const auto& [range, id] : tasks) {
    EDL_ASSIGN_OR_RETURN(std::string part, ReadFileToString(StrCat(
                                               spec.job_dir(), "/predictions/task-", id, ".csv")));
    if (columns == 0 && !part.empty()) {
      std::string first = part.substr(0, part.find('\n'));
      // Columns after file and index; a quoted file name has no bare comma
      // count we can trust, so count from the right.
      columns = std::count(first.begin(), first.end(), ',') - 1;
      if (!first.empty() && first[0] == '"') {
        columns = std::count(first.begin() + first.rfind('"'), first.end(), ',') - 1;
      }
    }
    body += part;
  }
  std::string header = "file,index";
  for (size_t i = 0; i < columns; ++i) header += StrCat(",output_", i);
  return WriteFileAtomically(out_path, header + "\n" + body);
}

}  // namespace elasticdl::master
