// The entries of a zoo that make up one job's program: the model, its
// dataset_fn, loss, optimizer and eval_metrics_fn, resolved from the command
// line's names. It is the one place that calls model code: every call turns
// an exception (c10::Error included) into a status naming the file and entry,
// e.g. "mnist/mnist_functional_api.cc: custom_model: forward threw: ...".
#ifndef ELASTICDL_ZOO_ZOO_PROGRAM_H_
#define ELASTICDL_ZOO_ZOO_PROGRAM_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "elasticdl/status.h"
#include "elasticdl/zoo/registry.h"
#include "zoo/zoo_library.h"

namespace elasticdl {

// The command line's entry names (seed 001's --model_def, --dataset_fn,
// --loss, --optimizer, --eval_metrics_fn). A name without a dot is an entry
// of model_def's module; a dotted one is module.name.
struct ZooProgramNames {
  // module.entry of the model, e.g. "mnist.mnist_functional_api.custom_model".
  // Required.
  std::string model_def;
  std::string dataset_fn = "dataset_fn";
  std::string loss = "loss";
  std::string optimizer = "optimizer";
  // Optional under its default name: a zoo file without eval_metrics_fn has
  // no metrics. Any other name must exist.
  std::string eval_metrics_fn = "eval_metrics_fn";
  // Optional under its default name, like eval_metrics_fn: without it the
  // learning rate is constant (unless the job's --lr_schedule sets one).
  std::string learning_rate_schedule = "learning_rate_schedule";
};

// Copyable; const methods are thread-safe as far as the model file's own
// functions are. Everything it makes (models, datasets, metrics) keeps the
// library loaded.
class ZooProgram {
 public:
  // Finds the entries and parses `params` (--params). Errors: a missing entry
  // or file (NOT_FOUND), an entry of the wrong kind, bad --params
  // (INVALID_ARGUMENT).
  static StatusOr<ZooProgram> Resolve(std::shared_ptr<ZooLibrary> library,
                                      const ZooProgramNames& names, std::string_view params);

  // A new model built by the model entry from the params.
  StatusOr<std::shared_ptr<Model>> MakeModel() const;
  // dataset_fn(records, mode). Errors while iterating the result come from
  // the pipeline (see Dataset); Annotate(status, EntryKind::kDatasetFn) puts
  // the entry in front of them.
  StatusOr<Dataset<Example>> MakeDataset(Dataset<Record> records, Mode mode) const;
  // model.train(training), then model.forward(features, training).
  StatusOr<torch::Tensor> Forward(Model& model, const FeatureMap& features, bool training) const;
  // loss(labels, predictions), which must be a single floating-point value;
  // returned as a 0-dimensional tensor.
  StatusOr<torch::Tensor> Loss(const torch::Tensor& labels, const torch::Tensor& predictions) const;
  // optimizer(), validated.
  StatusOr<OptimizerSpec> Optimizer() const;
  // learning_rate_schedule(), validated; nullopt when the zoo has none.
  StatusOr<std::optional<LearningRateSchedule>> LearningRateScheduleOf() const;
  // A fresh set of the metrics of eval_metrics_fn (empty without one).
  StatusOr<std::map<std::string, std::unique_ptr<Metric>>> MakeMetrics() const;
  // Update of every metric with one batch.
  Status UpdateMetrics(std::map<std::string, std::unique_ptr<Metric>>& metrics,
                       const torch::Tensor& labels, const torch::Tensor& predictions) const;

  // "mnist/mnist_functional_api.cc: custom_model" for the model entry.
  std::string EntryLocation(EntryKind kind) const;
  // `status` with EntryLocation(kind) in front; OK stays OK.
  Status Annotate(const Status& status, EntryKind kind) const;

  bool has_eval_metrics() const { return eval_metrics_fn_ != nullptr; }
  const Params& params() const { return params_; }
  const std::shared_ptr<ZooLibrary>& library() const { return library_; }
  // The model entry's module.name, as --model_def names it.
  std::string model_def() const { return model_->module + "." + model_->name; }

 private:
  ZooProgram() = default;

  const ZooEntry* Entry(EntryKind kind) const;
  // "<file>: <entry>" or "<file>: <entry>: <action>".
  std::string Who(EntryKind kind, std::string_view action) const;
  // Runs `fn`, turning an exception into INVALID_ARGUMENT
  // "<Who(kind, action)> threw: <what>", the first lines of what().
  template <typename F>
  auto Call(EntryKind kind, std::string_view action, F&& fn) const -> StatusOr<decltype(fn())>;

  std::shared_ptr<ZooLibrary> library_;
  Params params_;
  const ZooEntry* model_ = nullptr;
  const ZooEntry* dataset_fn_ = nullptr;
  const ZooEntry* loss_ = nullptr;
  const ZooEntry* optimizer_ = nullptr;
  const ZooEntry* eval_metrics_fn_ = nullptr;         // null: no metrics
  const ZooEntry* learning_rate_schedule_ = nullptr;  // null: none
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_PROGRAM_H_
