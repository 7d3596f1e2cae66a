// A worker's view of the embedding tables: the row source of the model's
// Embedding layers (elasticdl/zoo/embedding.h), reading rows from the
// parameter servers that hold them and gathering their gradients for the
// push.
//
// Every forward looks up the unique ids of each layer: one PullRows request
// per server holding some of them, to all of them at once. In training the
// rows come back as leaves requiring grad; after backward, CollectGradients
// sums each table's gradient rows (an id looked up by several layers, or
// several times, once) and splits them by server for FillPush.
//
// A forward cannot return a Status: a failed lookup throws, and the worker
// asks TakeError() for the failure itself (an unreachable server is a
// reconnect, not an error of the model). Ids outside a table's range are
// refused here, before any request, so that the error can name the record.
#ifndef ELASTICDL_WORKER_SERVER_ROWS_H_
#define ELASTICDL_WORKER_SERVER_ROWS_H_

#include <torch/types.h>

#include <optional>
#include <string>
#include <vector>

#include "elasticdl/data/dataset.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/embedding.h"
#include "worker/model_calls.h"
#include "worker/peers.h"

namespace elasticdl::worker {

class ServerRows : public EmbeddingRowSource {
 public:
  // The servers to read from; null until connected. Not owned.
  void set_servers(rpc::ParameterServers* servers) { servers_ = servers; }
  // Whose calls' clocks stop while a lookup waits for the servers (forward
  // is a call of the model's code; the servers' answer is not); may be
  // null. Not owned.
  void set_calls(ModelCalls* calls) { calls_ = calls; }

  torch::Tensor Rows(const EmbeddingImpl& table, const torch::Tensor& ids, bool training) override;

  // Forgets the last forward's lookups and gradients; before every forward.
  void Clear();
  // The failure of the last lookup that threw, once; OK if none. An id
  // outside its table's range is found in `batch` (the minibatch of the
  // forward): the error names the feature holding it and its record.
  Status TakeError(const Example& batch);

  // After backward: each table's gradient rows, summed per id and split by
  // server. INVALID_ARGUMENT naming the table when a gradient holds NaN or
  // an infinity (*nonfinite names it then).
  Status CollectGradients(std::optional<std::string>* nonfinite);
  // The sparse gradients of shard `shard` into `request`.
  void FillPush(int shard, proto::PushRequest* request) const;

 private:
  struct Lookup {
    std::string table;
    torch::Tensor ids;
    torch::Tensor rows;
  };
  rpc::ParameterServers* servers_ = nullptr;
  ModelCalls* calls_ = nullptr;
  std::vector<Lookup> lookups_;
  std::vector<std::vector<proto::EmbeddingRows>> by_shard_;
  Status error_;
  // The id that made error_, when it is an id out of its table's range.
  std::optional<int64_t> bad_id_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_SERVER_ROWS_H_
