#include "worker/server_rows.h"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

#include "common/strings.h"
#include "ps/placement.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::worker {

torch::Tensor ServerRows::Rows(const EmbeddingImpl& table, const torch::Tensor& ids,
                               bool training) {
  const EmbeddingOptions& options = table.options();
  const int num_shards = servers_ == nullptr ? 0 : servers_->num_shards();
  auto fail = [&](Status s) -> torch::Tensor {
    error_ = s;
    throw std::runtime_error(std::string(s.message()));
  };
  if (num_shards == 0) {
    return fail(absl::FailedPreconditionError(StrCat(
        "Embedding '", options.name(), "': this job has no parameter servers to hold its rows")));
  }
  torch::Tensor id = ids.contiguous();
  const int64_t n = id.numel();
  const int64_t* values = id.data_ptr<int64_t>();
  if (const int64_t range = options.num_rows(); range > 0) {
    for (int64_t i = 0; i < n; ++i) {
      if (values[i] < 0 || values[i] >= range) {
        bad_id_ = values[i];
        return fail(
            absl::InvalidArgumentError(StrCat("id ", values[i], " outside [0, ", range,
                                              ") of embedding table '", options.name(), "'")));
      }
    }
  }
  // Which request, and which position in it, each id goes to.
  std::vector<proto::PullRowsRequest> requests(static_cast<size_t>(num_shards));
  std::vector<int> shard_of(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int shard = ps::RowShardOf(values[i], num_shards);
    shard_of[static_cast<size_t>(i)] = shard;
    proto::PullRowsRequest& r = requests[static_cast<size_t>(shard)];
    if (r.tables_size() == 0) r.add_tables()->set_table(options.name());
    r.mutable_tables(0)->add_ids(values[i]);
  }
  std::vector<int> shards;
  for (int s = 0; s < num_shards; ++s) {
    if (requests[static_cast<size_t>(s)].tables_size() > 0) shards.push_back(s);
  }
  torch::Tensor rows = torch::empty({n, options.dim()}, torch::dtype(options.dtype()));
  if (!shards.empty()) {
    std::vector<proto::PullRowsResponse> responses;
    std::optional<ModelCalls::Waiting> waiting;
    if (calls_ != nullptr) waiting.emplace(calls_->Wait());
    Status s = servers_->PullRows(requests, &responses, shards);
    waiting.reset();
    if (!s.ok()) return fail(s);
    const size_t row_bytes = static_cast<size_t>(options.dim()) * rows.element_size();
    std::vector<size_t> next(static_cast<size_t>(num_shards), 0);
    char* out = static_cast<char*>(rows.data_ptr());
    for (int shard : shards) {
      const auto& answer = responses[static_cast<size_t>(shard)];
      const size_t expected =
          static_cast<size_t>(requests[static_cast<size_t>(shard)].tables(0).ids_size()) *
          row_bytes;
      if (answer.tables_size() != 1 || answer.tables(0).values().size() != expected) {
        return fail(absl::InternalError(
            StrCat("parameter server ", shard, " answered ",
                   answer.tables_size() == 1 ? answer.tables(0).values().size() : 0,
                   " bytes of rows of '", options.name(), "', not ", expected)));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto shard = static_cast<size_t>(shard_of[static_cast<size_t>(i)]);
      const std::string& bytes = responses[shard].tables(0).values();
      std::memcpy(out + i * row_bytes, bytes.data() + next[shard]++ * row_bytes, row_bytes);
    }
  }
  if (training) {
    rows.requires_grad_(true);
    lookups_.push_back({options.name(), id, rows});
  }
  return rows;
}

void ServerRows::Clear() {
  lookups_.clear();
  by_shard_.clear();
}

Status ServerRows::TakeError(const Example& batch) {
  Status error = std::exchange(error_, absl::OkStatus());
  std::optional<int64_t> bad = std::exchange(bad_id_, std::nullopt);
  if (error.ok() || !bad.has_value()) return error;
  // The first feature holding the id, and where: the id's row of the
  // minibatch is its example, and the example's record is known.
  for (const auto& [name, tensor] : batch.features) {
    if (!tensor.defined() || tensor.scalar_type() != torch::kInt64 || tensor.dim() == 0) continue;
    torch::Tensor hits = (tensor == *bad).nonzero();
    if (hits.size(0) == 0) continue;
    const int64_t row = hits[0][0].item<int64_t>();
    std::string where = StrCat("feature '", name, "'");
    if (tensor.dim() > 1) {
      where += " at [";
      for (int64_t d = 1; d < hits.size(1); ++d) {
        where += StrCat(d > 1 ? ", " : "", hits[0][d].item<int64_t>());
      }
      where += "]";
    }
    const bool traced = static_cast<int64_t>(batch.origins.size()) == tensor.size(0);
    return Annotate(
        error, traced ? StrCat(internal::DescribeOrigin({batch.origins[static_cast<size_t>(row)]}),
                               ": ", where)
                      : StrCat("example ", row, " of the minibatch: ", where));
  }
  return Annotate(error, "an id the model computed (no feature of the minibatch holds it)");
}

Status ServerRows::CollectGradients(std::optional<std::string>* nonfinite) {
  const int num_shards = servers_ == nullptr ? 0 : servers_->num_shards();
  by_shard_.assign(static_cast<size_t>(num_shards), {});
  // Each table's lookups, in the order of the forward.
  std::map<std::string, std::vector<const Lookup*>> tables;
  for (const Lookup& l : lookups_) {
    if (l.rows.grad().defined()) tables[l.table].push_back(&l);
  }
  for (const auto& [name, lookups] : tables) {
    torch::Tensor ids;
    torch::Tensor grads;
    if (lookups.size() == 1) {
      ids = lookups[0]->ids;
      grads = lookups[0]->rows.grad();
    } else {
      std::vector<torch::Tensor> all_ids;
      std::vector<torch::Tensor> all_grads;
      for (const Lookup* l : lookups) {
        all_ids.push_back(l->ids);
        all_grads.push_back(l->rows.grad());
      }
      torch::Tensor inverse;
      std::tie(ids, inverse, std::ignore) = at::_unique2(
          torch::cat(all_ids), /*sorted=*/false, /*return_inverse=*/true, /*return_counts=*/false);
      torch::Tensor cat = torch::cat(all_grads);
      grads = torch::zeros({ids.size(0), cat.size(1)}, cat.options()).index_add_(0, inverse, cat);
    }
    if (!rpc::AllFinite(grads)) {
      *nonfinite = StrCat("the gradient of embedding table '", name, "'");
      return absl::InvalidArgumentError(StrCat(**nonfinite, " holds non-finite values"));
    }
    ids = ids.contiguous();
    grads = grads.contiguous();
    const int64_t* id = ids.data_ptr<int64_t>();
    const size_t row_bytes = static_cast<size_t>(grads.size(1)) * grads.element_size();
    const char* g = static_cast<const char*>(grads.data_ptr());
    std::vector<proto::EmbeddingRows*> out(static_cast<size_t>(num_shards), nullptr);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      const auto shard = static_cast<size_t>(ps::RowShardOf(id[i], num_shards));
      if (out[shard] == nullptr) {
        out[shard] = &by_shard_[shard].emplace_back();
        out[shard]->set_table(name);
      }
      out[shard]->add_ids(id[i]);
      out[shard]->mutable_values()->append(g + i * row_bytes, row_bytes);
    }
  }
  return absl::OkStatus();
}

void ServerRows::FillPush(int shard, proto::PushRequest* request) const {
  if (static_cast<size_t>(shard) >= by_shard_.size()) return;
  for (const proto::EmbeddingRows& rows : by_shard_[static_cast<size_t>(shard)]) {
    *request->add_sparse_gradients() = rows;
  }
}

}  // namespace elasticdl::worker
