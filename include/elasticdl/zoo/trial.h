// Seed 004's trials (PEDL's TFKerasTrial) in C++: a class whose methods
// build the whole program of a job from its hyperparameters.
//
//   class MnistTrial : public Trial {
//    public:
//     CompiledModel build_model(const Hparams& hparams) override {
//       auto model = std::make_shared<MnistNet>(hparams.get<int>("conv1_channels"));
//       return Compile(model)
//           .optimizer(torch::optim::AdamOptions(hparams.get<double>("learning_rate")))
//           .loss(cross_entropy)
//           .metrics({{"accuracy", Accuracy}});
//     }
//     DataLoaders make_data_loaders(const Hparams& hparams) override {
//       return {DataAdapter(parse_record).workers(2).shuffle(1024),  // training
//               DataAdapter(parse_record).workers(0)};               // validation
//     }
//     std::vector<Callback> callbacks(const Hparams& hparams) override {
//       return {MaxStepsStopping(1000)};
//     }
//   };
//   ELASTICDL_REGISTER_TRIAL(MnistTrial);
//
// `--model_def=mnist.mnist_trial.MnistTrial` names it (module path and class
// name, as any entry). A job's hyperparameters are its --params; a
// hyperparameter search gives each trial its own. The trial defines the
// model, loss, optimizer, metrics and input, so --dataset_fn/--input_fn,
// --loss, --optimizer, --eval_metrics_fn and --learning_rate_schedule are
// refused with it.
//
// The framework constructs the trial once per process that runs the job's
// program (the client, each worker) and calls build_model, make_data_loaders
// and callbacks there first, so that a hyperparameter missing or of the wrong
// type is reported before any process starts. Later it calls build_model
// again for every new model it needs (a worker's replica; parameters come from
// the parameter servers), never two methods at once. A throw in any method
// (Params::get's included) becomes an error naming the file, the class and the
// method: "mnist/mnist_trial.cc: MnistTrial: build_model threw: --params:
// missing required key 'dropout'".
#ifndef ELASTICDL_ZOO_TRIAL_H_
#define ELASTICDL_ZOO_TRIAL_H_

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "elasticdl/data/dataset.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/metrics.h"
#include "elasticdl/zoo/model.h"
#include "elasticdl/zoo/optimizer.h"
#include "elasticdl/zoo/params.h"
#include "elasticdl/zoo/registry.h"

namespace elasticdl {

// A trial's hyperparameters: the job's --params, or a point of an
// experiment's search space.
using Hparams = Params;

// loss(labels, predictions): one floating-point value.
using LossFunction =
    std::function<torch::Tensor(const torch::Tensor& labels, const torch::Tensor& predictions)>;

// A model with what trains and evaluates it: tf.keras's model.compile().
// The loss and the optimizer are required, the metrics optional. The metrics
// are specs: every evaluation makes fresh ones from them.
class CompiledModel {
 public:
  CompiledModel() = default;
  explicit CompiledModel(std::shared_ptr<Model> model) : model_(std::move(model)) {}

  CompiledModel& optimizer(OptimizerSpec spec) {
    optimizer_ = std::move(spec);
    return *this;
  }
  CompiledModel& loss(LossFunction fn) {
    loss_ = std::move(fn);
    return *this;
  }
  CompiledModel& metrics(MetricMap metrics) {
    metrics_ = std::move(metrics);
    return *this;
  }

  const std::shared_ptr<Model>& model() const { return model_; }
  const std::optional<OptimizerSpec>& optimizer() const { return optimizer_; }
  const LossFunction& loss() const { return loss_; }
  const MetricMap& metrics() const { return metrics_; }

 private:
  std::shared_ptr<Model> model_;
  std::optional<OptimizerSpec> optimizer_;
  LossFunction loss_;
  MetricMap metrics_;
};

// `model.compile(...)`: Compile(model).optimizer(...).loss(...).metrics(...).
inline CompiledModel Compile(std::shared_ptr<Model> model) {
  return CompiledModel(std::move(model));
}

// Seed 004's KerasDataAdapter(sequence, workers=1, use_multiprocessing=False,
// max_queue_size=10) over the records of a task. The sequence is a function
// making one example of one record:
//
//   StatusOr<Example> parse(const Record& record, Mode mode);
//   StatusOr<Example> parse(const Record& record, Mode mode, at::Generator& gen);
//
// (or returning Example). In PREDICTION mode records may carry no labels: the
// example then has features only. The generator of the second form is for
// random augmentation: seeded from the job's --seed, the task and the
// record's position, so a seeded job makes the same examples on every run and
// every attempt of a task, whatever `workers` and `use_multiprocessing` say.
// The worker batches the examples (--minibatch_size).
//
// An error status or a throw fails the task with an error naming the record
// and the trial; a DATA_LOSS status (ParseExample's for malformed bytes) is
// reported as the data's fault instead.
class DataAdapter {
 public:
  // No sequence: refused when the trial is resolved.
  DataAdapter() = default;

  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, DataAdapter>>>
  explicit DataAdapter(F sequence);

  // Threads (processes, with use_multiprocessing) applying the sequence; 0
  // runs it on the training thread. Default 1. More keep more cores parsing
  // while the model trains; results leave in record order either way.
  DataAdapter& workers(size_t n) {
    workers_ = n;
    return *this;
  }
  // Processes instead of threads: each a fork of the worker, with one
  // LibTorch thread, applying the sequence to the records sent to it and
  // sending its examples back. For sequences that do not scale on threads.
  // The sequence then runs in another process: it must not count on memory,
  // locks or threads shared with the worker, and its examples must hold
  // dense CPU tensors (they are copied back). Default false; ignored with
  // workers(0).
  DataAdapter& use_multiprocessing(bool on) {
    use_multiprocessing_ = on;
    return *this;
  }
  // Examples prepared ahead of the training thread, at most (>= 1). Bounds
  // memory. Default 10.
  DataAdapter& max_queue_size(size_t n) {
    max_queue_size_ = n;
    return *this;
  }
  // Shuffles the task's records through a buffer of this many (as
  // Dataset::shuffle) before the sequence sees them; 0, the default: record
  // order. Seeded as the job's other random choices.
  DataAdapter& shuffle(size_t buffer_size) {
    shuffle_ = buffer_size;
    return *this;
  }

  size_t workers() const { return workers_; }
  bool use_multiprocessing() const { return use_multiprocessing_; }
  size_t max_queue_size() const { return max_queue_size_; }
  size_t shuffle() const { return shuffle_; }
  bool has_sequence() const { return fn_ != nullptr; }
  bool sequence_takes_generator() const { return takes_generator_; }

  // The examples of `records` for `mode`: shuffled if asked, then the
  // sequence applied by `workers` threads or processes (a Dataset::map stage
  // with MapOptions().workers(n).max_queue_size(m), or its counterpart over
  // processes). Requires has_sequence().
  Dataset<Example> Apply(Dataset<Record> records, Mode mode) const;

 private:
  // The sequence, given a generator when it takes one (else nullptr).
  using Fn = std::function<StatusOr<Example>(const Record&, Mode, at::Generator*)>;

  Fn fn_;
  bool takes_generator_ = false;
  size_t workers_ = 1;
  bool use_multiprocessing_ = false;
  size_t max_queue_size_ = 10;
  size_t shuffle_ = 0;
};

// What make_data_loaders returns: the training loader, and the validation
// loader, which evaluation and prediction use.
struct DataLoaders {
  DataAdapter training;
  DataAdapter validation;
};

// Callbacks (seed 004's keras_callbacks, as the original ElasticDL's
// callbacks): declarative settings of the training job, read when the job is
// prepared. Each sets what a command-line flag sets, and that flag, when
// given, wins over it.

// The learning rate follows `schedule` (as --lr_schedule; see
// elasticdl/zoo/lr_schedule.h).
struct LearningRateScheduler {
  explicit LearningRateScheduler(LearningRateSchedule schedule) : schedule(schedule) {}
  LearningRateSchedule schedule;
};

// Training stops once `metric` (one of the compiled metrics) has not improved
// by more than `min_delta` in `patience` evaluations in a row (as
// --early_stopping: the job needs --validation_data and --evaluation_steps).
struct EarlyStopping {
  enum Direction { kMax, kMin };  // which way is better
  EarlyStopping(std::string metric, Direction mode, int patience, double min_delta = 0)
      : metric(std::move(metric)), mode(mode), patience(patience), min_delta(min_delta) {}
  std::string metric;
  Direction mode;
  int patience;  // >= 1
  double min_delta;
};

// Training stops when the model version reaches `steps` (as --max_steps).
struct MaxStepsStopping {
  explicit MaxStepsStopping(int64_t steps) : steps(steps) {}
  int64_t steps;  // >= 1
};

using Callback = std::variant<LearningRateScheduler, EarlyStopping, MaxStepsStopping>;

// A trial: subclass it, construct it from `const Hparams&` or by default, and
// register it with ELASTICDL_REGISTER_TRIAL. The framework calls one method
// at a time (see the top of this file).
class Trial {
 public:
  virtual ~Trial() = default;

  // The model and how it trains: Compile(model).optimizer(...).loss(...).
  virtual CompiledModel build_model(const Hparams& hparams) = 0;
  // The training and the validation loaders.
  virtual DataLoaders make_data_loaders(const Hparams& hparams) = 0;
  // At most one callback of each kind. Default: none.
  virtual std::vector<Callback> callbacks(const Hparams& hparams);
};

// ---------------------------------------------------------------------------
// Implementation.

template <typename F, typename>
DataAdapter::DataAdapter(F sequence) {
  if constexpr (std::is_invocable_v<const F&, const Record&, Mode, at::Generator&>) {
    static_assert(
        std::is_convertible_v<std::invoke_result_t<const F&, const Record&, Mode, at::Generator&>,
                              StatusOr<Example>>,
        "DataAdapter: the sequence must return Example or StatusOr<Example>");
    takes_generator_ = true;
    fn_ = [fn = std::move(sequence)](const Record& record, Mode mode,
                                     at::Generator* generator) -> StatusOr<Example> {
      return fn(record, mode, *generator);
    };
  } else if constexpr (std::is_invocable_v<const F&, const Record&, Mode>) {
    static_assert(std::is_convertible_v<std::invoke_result_t<const F&, const Record&, Mode>,
                                        StatusOr<Example>>,
                  "DataAdapter: the sequence must return Example or StatusOr<Example>");
    fn_ = [fn = std::move(sequence)](const Record& record, Mode mode,
                                     at::Generator*) -> StatusOr<Example> {
      return fn(record, mode);
    };
  } else {
    static_assert(!std::is_same_v<F, F>,
                  "DataAdapter: the sequence must be callable as "
                  "StatusOr<Example>(const Record& record, Mode mode) or "
                  "StatusOr<Example>(const Record& record, Mode mode, at::Generator& gen)");
  }
}

namespace zoo_internal {

template <typename T>
ZooEntry MakeTrialEntry() {
  static_assert(std::is_base_of_v<Trial, T>,
                "ELASTICDL_REGISTER_TRIAL: the class must derive from elasticdl::Trial");
  static_assert(std::is_constructible_v<T, const Hparams&> || std::is_default_constructible_v<T>,
                "ELASTICDL_REGISTER_TRIAL: the class needs a constructor taking "
                "(const Hparams&) or none");
  ZooEntry e;
  e.kind = EntryKind::kTrial;
  e.trial = [](const Params& hparams) -> std::shared_ptr<Trial> {
    if constexpr (std::is_constructible_v<T, const Hparams&>) {
      return std::make_shared<T>(hparams);
    } else {
      return std::make_shared<T>();
    }
  };
  return e;
}

}  // namespace zoo_internal
}  // namespace elasticdl

#define ELASTICDL_REGISTER_TRIAL(Class)                                    \
  static const ::elasticdl::zoo_internal::Registrar ELASTICDL_ZOO_CONCAT_( \
      elasticdl_zoo_entry_, __LINE__)(ELASTICDL_ZOO_MODULE, #Class,        \
                                      ::elasticdl::zoo_internal::MakeTrialEntry<Class>())

#endif  // ELASTICDL_ZOO_TRIAL_H_
