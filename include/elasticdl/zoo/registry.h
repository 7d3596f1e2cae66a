// Registration of model-zoo entries, one short line each:
//
//   ELASTICDL_REGISTER(custom_model);     // std::shared_ptr<Model>(const Params&) or ()
//   ELASTICDL_REGISTER(dataset_fn);       // Dataset<Example>(Dataset<Record>, Mode)
//   ELASTICDL_REGISTER(loss);             // torch::Tensor(labels, predictions)
//   ELASTICDL_REGISTER(optimizer);        // OptimizerSpec()
//   ELASTICDL_REGISTER(eval_metrics_fn);  // MetricMap()
//   ELASTICDL_REGISTER_MODEL(MnistModel); // a Model subclass, constructed from
//                                         // (const Params&) or by default
//
// Seed 002's files register input_fn, feature_columns and label_columns in
// place of dataset_fn (elasticdl/zoo/columns.h).
//
// Any of them may take a trailing `const Params&`, the job's --params (a
// dataset_fn that needs the number of features, an optimizer whose learning
// rate is a parameter); a function whose arguments all have defaults
// (seed 002's `OptimizerSpec optimizer(double lr = 0.1)`) registers as one
// taking none. The kind of an entry follows from its signature; a function
// matching none is a compile error naming the entry. Entries are named by the source
// file's module path and the C++ name: `mnist/mnist_functional_api.cc` registering `custom_model`
// is `mnist.mnist_functional_api.custom_model` (seed 003's rule). The zoo build defines
// ELASTICDL_ZOO_MODULE for every source file.
//
// Seed 003's model classes may carry their defaults as static members,
// which ELASTICDL_REGISTER_MODEL registers with the class:
//
//   struct CreditModel : Model {
//     static torch::Tensor default_loss(const torch::Tensor& labels,
//                                       const torch::Tensor& predictions);
//     static OptimizerSpec default_optimizer();
//     static StatusOr<Example> default_input(const Record& record, Mode mode);
//                                    // or a whole dataset_fn: (Dataset<Record>, Mode)
//     static MetricMap default_eval_metrics();
//   };
//
// They are used unless --loss, --optimizer, --input_fn / --dataset_fn or
// --eval_metrics_fn name another entry, and are named
// `<model_def>.default_loss` and so on in the trained model's record.
//
// Seed 004's trials register a class with build_model(hparams),
// make_data_loaders(hparams) and callbacks(hparams) (elasticdl/zoo/trial.h),
// which define the whole program; no other entry flag goes with them:
//
//   ELASTICDL_REGISTER_TRIAL(MnistTrial); // a Trial subclass, constructed from
//                                         // (const Hparams&) or by default
#ifndef ELASTICDL_ZOO_REGISTRY_H_
#define ELASTICDL_ZOO_REGISTRY_H_

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "elasticdl/data/dataset.h"
#include "elasticdl/zoo/columns.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/metrics.h"
#include "elasticdl/zoo/model.h"
#include "elasticdl/zoo/optimizer.h"
#include "elasticdl/zoo/params.h"

#ifndef ELASTICDL_ZOO_MODULE
#define ELASTICDL_ZOO_MODULE ""
#endif

namespace elasticdl {

enum class EntryKind {
  kModel,
  kDatasetFn,
  kLoss,
  kOptimizer,
  kEvalMetricsFn,
  kInputFn,  // seed 002
  kColumns,  // seed 002's feature_columns and label_columns
  kLearningRateSchedule,
  kTrial,  // seed 004
};
// "model", "dataset_fn", "loss", "optimizer", "eval_metrics_fn", "input_fn",
// "columns", "learning_rate_schedule", "trial": the name of the kind's
// command-line flag and default entry (but for "columns" and "trial").
const char* EntryKindName(EntryKind kind);

using ModelFactory = std::function<std::shared_ptr<Model>(const Params&)>;
// Entries as stored: each takes the job's params, whether or not the
// registered function does.
using DatasetFn = std::function<Dataset<Example>(Dataset<Record>, Mode, const Params&)>;
using LossFn = std::function<torch::Tensor(const torch::Tensor& labels,
                                           const torch::Tensor& predictions, const Params&)>;
using OptimizerFn = std::function<OptimizerSpec(const Params&)>;
using EvalMetricsFn = std::function<MetricMap(const Params&)>;
using InputFn =
    std::function<InputFnResult(const std::vector<Features>& records, Mode, const Params&)>;
using ColumnsFn = std::function<std::vector<NumericColumn>(const Params&)>;
using LearningRateScheduleFn = std::function<LearningRateSchedule(const Params&)>;
class Trial;  // elasticdl/zoo/trial.h
// A new trial built from the job's hyperparameters.
using TrialFactory = std::function<std::shared_ptr<Trial>(const Params&)>;

// One registered entry; exactly the member matching `kind` is set.
struct ZooEntry {
  std::string module;  // "mnist.mnist_functional_api"
  std::string name;    // "custom_model"
  EntryKind kind = EntryKind::kModel;
  ModelFactory model;
  DatasetFn dataset_fn;
  LossFn loss;
  OptimizerFn optimizer;
  EvalMetricsFn eval_metrics_fn;
  InputFn input_fn;
  ColumnsFn columns;
  // A model class's defaults (seed 003), named "Class.default_loss" and so
  // on, of kinds kLoss, kOptimizer, kDatasetFn and kEvalMetricsFn.
  std::vector<ZooEntry> class_defaults;
  LearningRateScheduleFn learning_rate_schedule;
  TrialFactory trial;
};

// The entries of one zoo library.
class ZooRegistry {
 public:
  void Add(ZooEntry entry) { entries_.push_back(std::move(entry)); }
  // `entry` as `name` of `module`; a model class's defaults become
  // "<name>.default_loss" and so on.
  void Add(const std::string& module, const std::string& name, ZooEntry entry) {
    entry.module = module;
    entry.name = name;
    for (ZooEntry& d : entry.class_defaults) {
      d.module = module;
      d.name = name + "." + d.name;
    }
    Add(std::move(entry));
  }
  const std::vector<ZooEntry>& entries() const { return entries_; }

 private:
  std::vector<ZooEntry> entries_;
};

// The version of this registration interface; a zoo library built against
// another version is refused when loaded.
inline constexpr int kZooAbiVersion = 5;

namespace zoo_internal {

// The registry of the library being built: defined once per zoo library (by
// share/elasticdl/zoo_registry.cc, which the zoo build adds) with hidden
// visibility, so each loaded zoo has its own. The loader reaches it through
// the exported `elasticdl_zoo_registry_v1`.
__attribute__((visibility("hidden"))) ZooRegistry& LocalRegistry();

template <typename F>
ZooEntry MakeEntry(F fn) {
  ZooEntry e;
  // is_invocable_r, not invoke_result: the latter is a hard error for a
  // callable of another signature.
  if constexpr (std::is_invocable_r_v<std::shared_ptr<Model>, F, const Params&>) {
    e.kind = EntryKind::kModel;
    e.model = [fn](const Params& p) -> std::shared_ptr<Model> { return fn(p); };
  } else if constexpr (std::is_invocable_r_v<std::shared_ptr<Model>, F>) {
    e.kind = EntryKind::kModel;
    e.model = [fn](const Params&) -> std::shared_ptr<Model> { return fn(); };
  } else if constexpr (std::is_invocable_r_v<Dataset<Example>, F, Dataset<Record>, Mode,
                                             const Params&>) {
    e.kind = EntryKind::kDatasetFn;
    e.dataset_fn = fn;
  } else if constexpr (std::is_invocable_r_v<Dataset<Example>, F, Dataset<Record>, Mode>) {
    e.kind = EntryKind::kDatasetFn;
    e.dataset_fn = [fn](Dataset<Record> d, Mode m, const Params&) { return fn(std::move(d), m); };
  } else if constexpr (std::is_invocable_r_v<torch::Tensor, F, const torch::Tensor&,
                                             const torch::Tensor&, const Params&>) {
    e.kind = EntryKind::kLoss;
    e.loss = fn;
  } else if constexpr (std::is_invocable_r_v<torch::Tensor, F, const torch::Tensor&,
                                             const torch::Tensor&>) {
    e.kind = EntryKind::kLoss;
    e.loss = [fn](const torch::Tensor& labels, const torch::Tensor& predictions,
                  const Params&) -> torch::Tensor { return fn(labels, predictions); };
  } else if constexpr (std::is_invocable_r_v<OptimizerSpec, F, const Params&>) {
    e.kind = EntryKind::kOptimizer;
    e.optimizer = [fn](const Params& p) -> OptimizerSpec { return fn(p); };
  } else if constexpr (std::is_invocable_r_v<OptimizerSpec, F>) {
    e.kind = EntryKind::kOptimizer;
    e.optimizer = [fn](const Params&) -> OptimizerSpec { return fn(); };
  } else if constexpr (std::is_invocable_r_v<MetricMap, F, const Params&>) {
    e.kind = EntryKind::kEvalMetricsFn;
    e.eval_metrics_fn = [fn](const Params& p) -> MetricMap { return fn(p); };
  } else if constexpr (std::is_invocable_r_v<MetricMap, F>) {
    e.kind = EntryKind::kEvalMetricsFn;
    e.eval_metrics_fn = [fn](const Params&) -> MetricMap { return fn(); };
  } else if constexpr (std::is_invocable_r_v<InputFnResult, F, const std::vector<Features>&, Mode,
                                             const Params&>) {
    e.kind = EntryKind::kInputFn;
    e.input_fn = fn;
  } else if constexpr (std::is_invocable_r_v<InputFnResult, F, const std::vector<Features>&,
                                             Mode>) {
    e.kind = EntryKind::kInputFn;
    e.input_fn = [fn](const std::vector<Features>& r, Mode m, const Params&) -> InputFnResult {
      return fn(r, m);
    };
  } else if constexpr (std::is_invocable_r_v<InputFnResult, F, const std::vector<Features>&,
                                             const Params&>) {
    e.kind = EntryKind::kInputFn;
    e.input_fn = [fn](const std::vector<Features>& r, Mode, const Params& p) -> InputFnResult {
      return fn(r, p);
    };
  } else if constexpr (std::is_invocable_r_v<InputFnResult, F, const std::vector<Features>&>) {
    e.kind = EntryKind::kInputFn;
    e.input_fn = [fn](const std::vector<Features>& r, Mode, const Params&) -> InputFnResult {
      return fn(r);
    };
  } else if constexpr (std::is_invocable_r_v<std::vector<NumericColumn>, F, const Params&>) {
    e.kind = EntryKind::kColumns;
    e.columns = [fn](const Params& p) -> std::vector<NumericColumn> { return fn(p); };
  } else if constexpr (std::is_invocable_r_v<std::vector<NumericColumn>, F>) {
    e.kind = EntryKind::kColumns;
    e.columns = [fn](const Params&) -> std::vector<NumericColumn> { return fn(); };
  } else if constexpr (std::is_invocable_r_v<LearningRateSchedule, F, const Params&>) {
    e.kind = EntryKind::kLearningRateSchedule;
    e.learning_rate_schedule = [fn](const Params& p) -> LearningRateSchedule { return fn(p); };
  } else if constexpr (std::is_invocable_r_v<LearningRateSchedule, F>) {
    e.kind = EntryKind::kLearningRateSchedule;
    e.learning_rate_schedule = [fn](const Params&) -> LearningRateSchedule { return fn(); };
  } else {
    static_assert(!std::is_same_v<F, F>,
                  "ELASTICDL_REGISTER: the entry matches none of the signatures "
                  "std::shared_ptr<Model>(const Params&), std::shared_ptr<Model>(), "
                  "Dataset<Example>(Dataset<Record>, Mode), "
                  "torch::Tensor(const torch::Tensor& labels, const torch::Tensor& predictions), "
                  "OptimizerSpec(), MetricMap(), "
                  "InputFnResult(const std::vector<Features>& records[, Mode]), "
                  "std::vector<NumericColumn>(); all but the model's optionally with a "
                  "trailing const Params&");
  }
  return e;
}

// Whether model class M declares a member `default_...` (seed 003).
#define ELASTICDL_ZOO_HAS_MEMBER_(member)   \
  template <typename M, typename = void>    \
  struct Has_##member : std::false_type {}; \
  template <typename M>                     \
  struct Has_##member<M, std::void_t<decltype(&M::member)>> : std::true_type {}
ELASTICDL_ZOO_HAS_MEMBER_(default_loss);
ELASTICDL_ZOO_HAS_MEMBER_(default_optimizer);
ELASTICDL_ZOO_HAS_MEMBER_(default_input);
ELASTICDL_ZOO_HAS_MEMBER_(default_eval_metrics);
#undef ELASTICDL_ZOO_HAS_MEMBER_

// A callable that calls `fn` by name: overloads and default arguments work.
#define ELASTICDL_ZOO_FORWARD_(fn)                                            \
  [](auto&&... args) -> decltype(fn(std::forward<decltype(args)>(args)...)) { \
    return fn(std::forward<decltype(args)>(args)...);                         \
  }

template <typename M>
std::vector<ZooEntry> MakeClassDefaults() {
  std::vector<ZooEntry> defaults;
  if constexpr (Has_default_loss<M>::value) {
    auto fn = ELASTICDL_ZOO_FORWARD_(M::default_loss);
    static_assert(std::is_invocable_r_v<torch::Tensor, decltype(fn), const torch::Tensor&,
                                        const torch::Tensor&>,
                  "default_loss: expected static torch::Tensor default_loss(const torch::Tensor& "
                  "labels, const torch::Tensor& predictions)");
    defaults.push_back(MakeEntry(fn));
    defaults.back().name = "default_loss";
  }
  if constexpr (Has_default_optimizer<M>::value) {
    auto fn = ELASTICDL_ZOO_FORWARD_(M::default_optimizer);
    static_assert(std::is_invocable_r_v<OptimizerSpec, decltype(fn)> ||
                      std::is_invocable_r_v<OptimizerSpec, decltype(fn), const Params&>,
                  "default_optimizer: expected static OptimizerSpec default_optimizer()");
    defaults.push_back(MakeEntry(fn));
    defaults.back().name = "default_optimizer";
  }
  if constexpr (Has_default_input<M>::value) {
    auto fn = ELASTICDL_ZOO_FORWARD_(M::default_input);
    ZooEntry e;
    e.kind = EntryKind::kDatasetFn;
    if constexpr (std::is_invocable_r_v<Dataset<Example>, decltype(fn), Dataset<Record>, Mode>) {
      e.dataset_fn = [fn](Dataset<Record> d, Mode m, const Params&) { return fn(std::move(d), m); };
    } else if constexpr (std::is_invocable_r_v<StatusOr<Example>, decltype(fn), const Record&,
                                               Mode>) {
      e.dataset_fn = [fn](Dataset<Record> d, Mode m, const Params&) {
        return d.map([fn, m](const Record& r) -> StatusOr<Example> { return fn(r, m); });
      };
    } else {
      static_assert(!std::is_same_v<M, M>,
                    "default_input: expected static StatusOr<Example> default_input(const "
                    "Record& record, Mode mode), or a dataset_fn: static Dataset<Example> "
                    "default_input(Dataset<Record> records, Mode mode)");
    }
    e.name = "default_input";
    defaults.push_back(std::move(e));
  }
  if constexpr (Has_default_eval_metrics<M>::value) {
    auto fn = ELASTICDL_ZOO_FORWARD_(M::default_eval_metrics);
    static_assert(std::is_invocable_r_v<MetricMap, decltype(fn)> ||
                      std::is_invocable_r_v<MetricMap, decltype(fn), const Params&>,
                  "default_eval_metrics: expected static MetricMap default_eval_metrics()");
    defaults.push_back(MakeEntry(fn));
    defaults.back().name = "default_eval_metrics";
  }
  return defaults;
}

template <typename M>
ZooEntry MakeModelClassEntry() {
  static_assert(std::is_base_of_v<Model, M>,
                "ELASTICDL_REGISTER_MODEL: the class must derive from elasticdl::Model");
  static_assert(std::is_constructible_v<M, const Params&> || std::is_default_constructible_v<M>,
                "ELASTICDL_REGISTER_MODEL: the class needs a constructor taking "
                "(const Params&) or none");
  ZooEntry e;
  e.kind = EntryKind::kModel;
  e.model = [](const Params& p) -> std::shared_ptr<Model> {
    if constexpr (std::is_constructible_v<M, const Params&>) {
      return std::make_shared<M>(p);
    } else {
      return std::make_shared<M>();
    }
  };
  e.class_defaults = MakeClassDefaults<M>();
  return e;
}

struct Registrar {
  Registrar(const char* module, const char* name, ZooEntry entry) {
    LocalRegistry().Add(module, name, std::move(entry));
  }
};

}  // namespace zoo_internal
}  // namespace elasticdl

// The entry point of a zoo library (defined by zoo_registry.cc): sets
// `*abi_version` to the kZooAbiVersion the library was built with and returns
// its registry.
extern "C" const elasticdl::ZooRegistry* elasticdl_zoo_registry_v1(int* abi_version);

#define ELASTICDL_ZOO_CONCAT_INNER_(a, b) a##b
#define ELASTICDL_ZOO_CONCAT_(a, b) ELASTICDL_ZOO_CONCAT_INNER_(a, b)

#define ELASTICDL_REGISTER(fn)                                                                  \
  static const ::elasticdl::zoo_internal::Registrar ELASTICDL_ZOO_CONCAT_(elasticdl_zoo_entry_, \
                                                                          __LINE__)(            \
      ELASTICDL_ZOO_MODULE, #fn, ::elasticdl::zoo_internal::MakeEntry(ELASTICDL_ZOO_FORWARD_(fn)))

#define ELASTICDL_REGISTER_MODEL(Class)                                    \
  static const ::elasticdl::zoo_internal::Registrar ELASTICDL_ZOO_CONCAT_( \
      elasticdl_zoo_entry_, __LINE__)(ELASTICDL_ZOO_MODULE, #Class,        \
                                      ::elasticdl::zoo_internal::MakeModelClassEntry<Class>())

#endif  // ELASTICDL_ZOO_REGISTRY_H_
