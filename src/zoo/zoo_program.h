// The entries of a zoo that make up one job's program: the model, its
// dataset_fn, loss, optimizer and eval_metrics_fn, resolved from the command
// line's names, or the methods of a trial (seed 004) that --model_def names.
// It is the one place that calls model code: every call turns an exception
// (c10::Error included) into a status naming the file and entry, e.g.
// "mnist/mnist_functional_api.cc: custom_model: forward threw: ..." or
// "mnist/mnist_trial.cc: MnistTrial: build_model threw: ...".
#ifndef ELASTICDL_ZOO_ZOO_PROGRAM_H_
#define ELASTICDL_ZOO_ZOO_PROGRAM_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/registry.h"
#include "elasticdl/zoo/trial.h"
#include "zoo/zoo_library.h"

namespace elasticdl {

// The command line's entry names (seed 001's --model_def, --dataset_fn,
// --loss, --optimizer, --eval_metrics_fn). A name without a dot is an entry
// of model_def's module; a dotted one is module.name; `<model_def>.default_loss`
// and so on name a model class's defaults (seed 003). An empty name is the
// model's default, in this order:
//   dataset_fn: input_fn in a seed 002 file; the class's default_input;
//               dataset_fn
//   loss, optimizer: the class's default_loss / default_optimizer; loss /
//               optimizer
//   eval_metrics_fn: the class's default_eval_metrics; eval_metrics_fn if
//               the file has one; else no metrics
// A trial (seed 004) defines them all: with one, every other name is empty
// or the trial's own as resolved() records it (`<trial>.make_data_loaders`,
// `<trial>.build_model`, `<trial>.callbacks`).
struct ZooProgramNames {
  // module.entry of the model, e.g. "mnist.mnist_functional_api.custom_model".
  // Required.
  std::string model_def;
  // A dataset_fn, or seed 002's input_fn (--input_fn is the same flag).
  std::string dataset_fn;
  std::string loss;
  std::string optimizer;
  std::string eval_metrics_fn;
  // Optional: without one the learning rate is constant (unless the job's
  // --lr_schedule sets one).
  std::string learning_rate_schedule;

  // The modules these names refer to, sorted: model_def's (which undotted
  // names and the model's defaults are in) and those of dotted names. What
  // a zoo library for them holds (ZooBuildOptions::modules). A name that
  // does not parse adds nothing: Resolve reports it.
  std::vector<std::string> Modules() const;
};

// What a trial's callbacks() set (seed 004's keras_callbacks), validated:
// the job's settings they stand for unless the flags are given.
struct TrialCallbacks {
  std::optional<LearningRateSchedule> learning_rate_schedule;  // --lr_schedule
  std::optional<EarlyStopping> early_stopping;                 // --early_stopping
  std::optional<int64_t> max_steps;                            // --max_steps
};

// Copyable; const methods are thread-safe as far as the model file's own
// functions are (a trial's methods are called one at a time). Everything it
// makes (models, datasets, metrics) keeps the library loaded.
class ZooProgram {
 public:
  // Finds the entries and parses `params` (--params). Errors: a missing entry
  // or file (NOT_FOUND), an entry of the wrong kind, bad --params
  // (INVALID_ARGUMENT).
  //
  // A trial is constructed once, here, and its build_model,
  // make_data_loaders and callbacks are called with the params, so that
  // every hyperparameter they read is read now: a missing one is
  // INVALID_ARGUMENT "<file>: <Trial>: <method> threw: --params: missing
  // required key '<name>'". Also INVALID_ARGUMENT: another entry flag with a
  // trial, a compiled model without loss or optimizer, a loader without a
  // sequence, callbacks that are invalid or repeat a kind, EarlyStopping of
  // a metric build_model does not compile.
  static StatusOr<ZooProgram> Resolve(std::shared_ptr<ZooLibrary> library,
                                      const ZooProgramNames& names, std::string_view params);

  // Whether `model_def` names a trial of `library` (seed 004) rather than a
  // model, without resolving it (so without hyperparameters). Errors as
  // Resolve's for --model_def.
  static StatusOr<bool> NamesTrial(const ZooLibrary& library, std::string_view model_def);

  // A new model built by the model entry from the params (a trial's
  // build_model, called again).
  StatusOr<std::shared_ptr<Model>> MakeModel() const;
  // Minibatches of `minibatch_size` examples (the last may be smaller) from
  // `records`: dataset_fn(records, mode) batched, or seed 002's input_fn
  // applied to each group of records and checked against the columns.
  // Errors while iterating the result come from the pipeline (see Dataset);
  // Annotate(status, EntryKind::kDatasetFn) puts the entry in front of them.
  StatusOr<Dataset<Example>> MakeBatches(Dataset<Record> records, Mode mode,
                                         size_t minibatch_size) const;
  // Whether MakeBatches's pipeline runs Python code (a dataset_fn of a
  // Python model file), which holds the interpreter's lock while it runs.
  bool MakesBatchesInPython() const;
  // dataset_fn(records, mode), unbatched; a trial's training loader in
  // TRAINING mode, its validation loader otherwise. FAILED_PRECONDITION for
  // seed 002's input_fn, which works on batches only.
  StatusOr<Dataset<Example>> MakeDataset(Dataset<Record> records, Mode mode) const;
  // model.train(training), then model.forward(features, training).
  StatusOr<torch::Tensor> Forward(Model& model, const FeatureMap& features, bool training) const;
  // loss(labels, predictions), which must be a single floating-point value;
  // returned as a 0-dimensional tensor.
  StatusOr<torch::Tensor> Loss(const torch::Tensor& labels, const torch::Tensor& predictions) const;
  // optimizer(), validated.
  StatusOr<OptimizerSpec> Optimizer() const;
  // learning_rate_schedule() (a trial's LearningRateScheduler), validated;
  // nullopt when the zoo has none.
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
  // Where `threads` are in the model's Python code, for a call that does
  // not return (ZooLibrary::Where); "" for a compiled model.
  std::string Where(const std::vector<uint64_t>& threads,
                    std::chrono::milliseconds patience) const {
    return library_->Where(threads, patience);
  }

  // The entries in use, each as module.name (class defaults as
  // <model_def>.default_loss, ...): what the trained model records, and
  // what resolves to the same entries again. eval_metrics_fn is empty when
  // there are no metrics.
  const ZooProgramNames& resolved() const { return resolved_; }

  bool has_eval_metrics() const {
    return trial_ != nullptr ? !trial_->metrics.empty() : eval_metrics_fn_ != nullptr;
  }
  // Seed 004: whether --model_def names a trial.
  bool is_trial() const { return trial_ != nullptr; }
  // A trial's callbacks (empty for other programs).
  const TrialCallbacks& trial_callbacks() const;
  const Params& params() const { return params_; }
  const std::shared_ptr<ZooLibrary>& library() const { return library_; }
  // The model entry's module.name, as --model_def names it.
  std::string model_def() const { return model_->module + "." + model_->name; }

 private:
  ZooProgram() = default;

  // A trial's instance and what its methods returned at Resolve.
  struct TrialState {
    std::shared_ptr<Trial> trial;
    std::mutex mu;  // held while a method of `trial` runs
    LossFunction loss;
    std::optional<OptimizerSpec> optimizer;  // set by Resolve
    MetricMap metrics;
    DataLoaders loaders;
    TrialCallbacks callbacks;
  };

  // Resolve's part for a trial model_def (model_ set, params parsed).
  Status ResolveTrial(const ZooProgramNames& names);
  // build_model, called again: the compiled model, which holds a model.
  StatusOr<CompiledModel> BuildTrialModel() const;
  // The trial's method (or part of build_model's result) that stands for
  // the entry of `kind`: "build_model", "loss", "make_data_loaders", ...
  static const char* TrialPart(EntryKind kind);

  const ZooEntry* Entry(EntryKind kind) const;
  // The entry an entry flag names (see ZooProgramNames); errors name the flag.
  StatusOr<const ZooEntry*> FindEntry(std::string_view flag, std::string_view value,
                                      std::initializer_list<EntryKind> kinds) const;
  // The default entry of a flag given no value: the class's `class_default`
  // if the model class has one, else `entry` of the model's file.
  StatusOr<const ZooEntry*> FindDefault(std::string_view flag, std::string_view class_default,
                                        std::string_view entry,
                                        std::initializer_list<EntryKind> kinds) const;
  // Seed 002: the feature and label columns of input_fn's file, evaluated.
  Status ResolveColumns();
  // One group of records through input_fn.
  StatusOr<Example> InputBatch(const std::vector<Record>& records, Mode mode) const;
  // "<file>: <entry>" or "<file>: <entry>: <action>".
  std::string Who(const ZooEntry* entry, std::string_view action) const;
  // Runs `fn`, turning an exception into INVALID_ARGUMENT
  // "<Who(entry, action)> threw: <what>", the first lines of what().
  template <typename F>
  auto CallEntry(const ZooEntry* entry, std::string_view action, F&& fn) const
      -> StatusOr<decltype(fn())>;
  // CallEntry with the entry of `kind` (a trial's part of that kind when
  // `action` is empty).
  template <typename F>
  auto Call(EntryKind kind, std::string_view action, F&& fn) const -> StatusOr<decltype(fn())>;

  std::shared_ptr<ZooLibrary> library_;
  Params params_;
  ZooProgramNames resolved_;
  const ZooEntry* model_ = nullptr;
  // A dataset_fn, or seed 002's input_fn.
  const ZooEntry* dataset_fn_ = nullptr;
  // Seed 002: input_fn's columns; the loss takes (output, labels).
  const ZooEntry* feature_columns_ = nullptr;
  std::vector<NumericColumn> feature_cols_;
  std::vector<NumericColumn> label_cols_;
  bool loss_takes_output_first_ = false;
  const ZooEntry* loss_ = nullptr;
  const ZooEntry* optimizer_ = nullptr;
  const ZooEntry* eval_metrics_fn_ = nullptr;         // null: no metrics
  const ZooEntry* learning_rate_schedule_ = nullptr;  // null: none
  // Seed 004: set when model_ is a trial; declared after library_, whose
  // code it holds.
  std::shared_ptr<TrialState> trial_;
};

namespace zoo_internal {
// The first lines of an exception's message, without c10's backtrace; the
// whole message of a ZooCodeError.
std::string ShortWhat(const std::exception& e);
}  // namespace zoo_internal

template <typename F>
auto ZooProgram::CallEntry(const ZooEntry* entry, std::string_view action, F&& fn) const
    -> StatusOr<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        StrCat(Who(entry, action), " threw: ", zoo_internal::ShortWhat(e)));
  } catch (...) {
    return absl::InvalidArgumentError(
        StrCat(Who(entry, action), " threw a non-standard exception"));
  }
}

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_PROGRAM_H_
