// An embedding table on the parameter servers, used like
// torch::nn::Embedding:
//
//   struct Ctr : elasticdl::Model {
//     Ctr() {
//       ids_ = register_module("ids", Embedding(EmbeddingOptions("features", 16)
//                                                   .normal(0, 0.01)
//                                                   .optimizer(FtrlOptions(0.05))));
//     }
//     torch::Tensor forward(const FeatureMap& in, bool training) override {
//       return ids_(in.at("ids")).sum(-1);  // [batch, fields, 16] -> ...
//     }
//     Embedding ids_{nullptr};
//   };
//
// Its rows are keyed by int64 id (any id, or [0, num_rows) when the table
// has a range) and live on the parameter servers, spread by id: the table is
// never whole in a worker. A forward looks up the unique ids of its batch
// (one request per server holding some, in parallel); in training, the
// backward's gradient of those rows is pushed as a sparse gradient and the
// servers step only the rows it holds (embedding_table.h on the servers
// describes the optimizers' lazy semantics).
//
// Multi-valued features: with a combiner, forward(ids [batch, n]) combines
// each example's n rows into one [batch, dim] (sum, mean, or sum / sqrt(n)),
// and forward(ids, mask) leaves out the positions where `mask` is false.
#ifndef ELASTICDL_ZOO_EMBEDDING_H_
#define ELASTICDL_ZOO_EMBEDDING_H_

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "elasticdl/zoo/optimizer.h"

namespace elasticdl {

// FTRL-proximal (McMahan et al. 2013), for embedding tables.
struct FtrlOptions {
  explicit FtrlOptions(double lr) : lr(lr) {}
  double lr;
  double lr_power = -0.5;
  double l1 = 0;
  double l2 = 0;
  double initial_accumulator_value = 0.1;
};

// A table's own update rule: any of the dense optimizers or FTRL.
using TableOptimizerSpec =
    std::variant<torch::optim::SGDOptions, torch::optim::AdamOptions, torch::optim::AdagradOptions,
                 torch::optim::RMSpropOptions, torch::optim::AdamWOptions, FtrlOptions>;

enum class Combiner { kNone, kSum, kMean, kSqrtN };

class EmbeddingOptions {
 public:
  // `name` identifies the table across the job (checkpoints, trained
  // models): unique within the model.
  EmbeddingOptions(std::string name, int64_t dim);

  // Initial values of a row: uniform in [low, high) (the default: -0.05,
  // 0.05), normal, zeros or a constant. A function of (job seed, table name,
  // id): every server and every restart agrees on it.
  EmbeddingOptions& uniform(double low, double high);
  EmbeddingOptions& normal(double mean, double stddev);
  EmbeddingOptions& zeros();
  EmbeddingOptions& constant(double value);
  // The table's own optimizer, which keeps its lr under a learning-rate
  // schedule; without one the table follows the model's optimizer() and
  // its schedule.
  EmbeddingOptions& optimizer(TableOptimizerSpec spec);
  EmbeddingOptions& combiner(Combiner combiner);
  // Ids must lie in [0, num_rows) (a vocabulary); an id outside is an error
  // naming the table and the id.
  EmbeddingOptions& num_rows(int64_t rows);
  // Admission: a row is created at the k-th minibatch that trains it; until
  // then it reads `unadmitted_value` and its gradients are dropped.
  EmbeddingOptions& admit_after(int32_t k, double unadmitted_value = 0);
  // Eviction: rows not updated for this many model versions are dropped.
  EmbeddingOptions& evict_after_versions(int64_t versions);
  // Eviction: at most this many rows per parameter server, the least
  // recently updated dropped first.
  EmbeddingOptions& max_rows_per_server(int64_t rows);
  // torch::kFloat32 (the default) or torch::kFloat64.
  EmbeddingOptions& dtype(torch::Dtype dtype);

  const std::string& name() const { return name_; }
  int64_t dim() const { return dim_; }
  Combiner combiner() const { return combiner_; }
  torch::Dtype dtype() const { return dtype_; }

  // What the servers are told (see EmbeddingTableSpec in elasticdl.proto).
  struct Initializer {
    enum Kind { kUniform, kNormal, kZeros, kConstant } kind = kUniform;
    double a = -0.05;
    double b = 0.05;
  };
  const Initializer& initializer() const { return initializer_; }
  const std::optional<TableOptimizerSpec>& optimizer() const { return optimizer_; }
  int64_t num_rows() const { return num_rows_; }
  int32_t admit_after() const { return admit_after_; }
  double unadmitted_value() const { return unadmitted_value_; }
  int64_t evict_after_versions() const { return evict_after_versions_; }
  int64_t max_rows_per_server() const { return max_rows_; }

 private:
  std::string name_;
  int64_t dim_;
  Initializer initializer_;
  std::optional<TableOptimizerSpec> optimizer_;
  Combiner combiner_ = Combiner::kNone;
  int64_t num_rows_ = 0;
  int32_t admit_after_ = 0;
  double unadmitted_value_ = 0;
  int64_t evict_after_versions_ = 0;
  int64_t max_rows_ = 0;
  torch::Dtype dtype_ = torch::kFloat32;
};

class EmbeddingImpl;

// Where an Embedding's rows come from: the worker installs one that reads
// them from the parameter servers (and collects their gradients).
class EmbeddingRowSource {
 public:
  virtual ~EmbeddingRowSource() = default;
  // The rows of `ids` (int64, 1-D, unique) of `table`: [ids, dim] in the
  // table's dtype. In training, a leaf that requires grad: its gradient
  // after backward is the table's sparse gradient.
  virtual torch::Tensor Rows(const EmbeddingImpl& table, const torch::Tensor& ids,
                             bool training) = 0;
};

class EmbeddingImpl : public torch::nn::Module {
 public:
  explicit EmbeddingImpl(EmbeddingOptions options);

  // ids: int64 of any shape. Without a combiner: [..., dim]. With one:
  // ids [batch, n] -> [batch, dim]; `mask` (bool, same shape as ids) leaves
  // positions out (an example with none left gets zeros).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& mask = {});

  const EmbeddingOptions& options() const { return options_; }
  // Set by the framework before the first forward.
  void set_row_source(EmbeddingRowSource* source) { source_ = source; }
  void pretty_print(std::ostream& stream) const override;

 private:
  EmbeddingOptions options_;
  EmbeddingRowSource* source_ = nullptr;
};

TORCH_MODULE(Embedding);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_EMBEDDING_H_
