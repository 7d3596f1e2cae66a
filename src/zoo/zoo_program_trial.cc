// ZooProgram's part for seed 004's trials: --model_def naming a Trial
// subclass, whose methods define the program.
#include <cmath>
#include <type_traits>
#include <variant>

#include "zoo/zoo_program.h"

namespace elasticdl {
namespace {

// The entry flags a trial replaces: the flag, what the trial defines it
// with, and the name resolved() records for it.
struct ReplacedFlag {
  const char* flag;
  const char* defined_by;
  const char* method;
};
constexpr ReplacedFlag kReplacedFlags[] = {
    {"--dataset_fn", "its make_data_loaders makes the input", "make_data_loaders"},
    {"--loss", "its build_model compiles the loss", "build_model"},
    {"--optimizer", "its build_model compiles the optimizer", "build_model"},
    {"--eval_metrics_fn", "its build_model compiles the metrics", "build_model"},
    {"--learning_rate_schedule",
     "its callbacks set the learning-rate schedule (--lr_schedule replaces it)", "callbacks"},
};

const std::string& FlagValue(const ZooProgramNames& names, size_t i) {
  const std::string* values[] = {&names.dataset_fn, &names.loss, &names.optimizer,
                                 &names.eval_metrics_fn, &names.learning_rate_schedule};
  return *values[i];
}

Status CheckLoader(const DataAdapter& loader, std::string_view which) {
  if (!loader.has_sequence()) {
    return absl::InvalidArgumentError(StrCat("the ", which,
                                             " loader has no sequence: DataAdapter(fn) with ",
                                             "StatusOr<Example> fn(const Record&, Mode)"));
  }
  if (loader.max_queue_size() < 1) {
    return absl::InvalidArgumentError(StrCat("the ", which, " loader's max_queue_size is 0"));
  }
  return Status();
}

// The callbacks as settings: at most one of each kind, each valid.
StatusOr<TrialCallbacks> Collect(const std::vector<Callback>& callbacks, const MetricMap& metrics) {
  TrialCallbacks out;
  for (const Callback& callback : callbacks) {
    Status s = std::visit(
        [&](const auto& c) -> Status {
          using C = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<C, LearningRateScheduler>) {
            if (out.learning_rate_schedule) {
              return absl::InvalidArgumentError("two LearningRateSchedulers");
            }
            EDL_RETURN_IF_ERROR_WITH_CONTEXT(c.schedule.Validate(), "LearningRateScheduler");
            out.learning_rate_schedule = c.schedule;
          } else if constexpr (std::is_same_v<C, EarlyStopping>) {
            if (out.early_stopping) return absl::InvalidArgumentError("two EarlyStoppings");
            if (metrics.count(c.metric) == 0) {
              std::vector<std::string> names;
              for (const auto& [name, spec] : metrics) names.push_back(name);
              return absl::InvalidArgumentError(fmt::format(
                  "EarlyStopping: metric '{}' is not one that build_model compiles "
                  "({})",
                  c.metric, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
            }
            if (c.patience < 1) {
              return absl::InvalidArgumentError(
                  StrCat("EarlyStopping: patience ", c.patience, " must be at least 1"));
            }
            if (!(c.min_delta >= 0) || !std::isfinite(c.min_delta)) {
              return absl::InvalidArgumentError(
                  StrCat("EarlyStopping: min_delta ", c.min_delta, " must be a number >= 0"));
            }
            out.early_stopping = c;
          } else {
            if (out.max_steps) return absl::InvalidArgumentError("two MaxStepsStoppings");
            if (c.steps < 1) {
              return absl::InvalidArgumentError(
                  StrCat("MaxStepsStopping: steps ", c.steps, " must be at least 1"));
            }
            out.max_steps = c.steps;
          }
          return Status();
        },
        callback);
    EDL_RETURN_IF_ERROR(s);
  }
  return out;
}

}  // namespace

StatusOr<bool> ZooProgram::NamesTrial(const ZooLibrary& library, std::string_view model_def) {
  StatusOr<EntryRef> ref = ParseModelDef(model_def);
  if (!ref.ok()) return elasticdl::Annotate(ref.status(), "--model_def");
  StatusOr<const ZooEntry*> entry =
      library.Find(ref->module, ref->name, {EntryKind::kModel, EntryKind::kTrial});
  if (!entry.ok()) return elasticdl::Annotate(entry.status(), "--model_def");
  return (*entry)->kind == EntryKind::kTrial;
}

const char* ZooProgram::TrialPart(EntryKind kind) {
  switch (kind) {
    case EntryKind::kModel:
    case EntryKind::kEvalMetricsFn:
    case EntryKind::kTrial:
      return "build_model";
    case EntryKind::kLoss:
      return "loss";
    case EntryKind::kOptimizer:
      return "optimizer";
    case EntryKind::kDatasetFn:
    case EntryKind::kInputFn:
    case EntryKind::kColumns:
      return "make_data_loaders";
    case EntryKind::kLearningRateSchedule:
      return "callbacks";
  }
  return "";
}

const TrialCallbacks& ZooProgram::trial_callbacks() const {
  static const TrialCallbacks kNone;
  return trial_ != nullptr ? trial_->callbacks : kNone;
}

Status ZooProgram::ResolveTrial(const ZooProgramNames& names) {
  const std::string& trial = resolved_.model_def;
  for (size_t i = 0; i < std::size(kReplacedFlags); ++i) {
    const std::string& value = FlagValue(names, i);
    const ReplacedFlag& f = kReplacedFlags[i];
    if (value.empty() || value == StrCat(trial, ".", f.method)) continue;
    return absl::InvalidArgumentError(StrCat(f.flag, "=", value, ": ", trial,
                                             " is a trial (seed 004): ", f.defined_by, "; drop ",
                                             f.flag));
  }

  auto state = std::make_shared<TrialState>();
  EDL_ASSIGN_OR_RETURN(state->trial, CallEntry(model_, "", [&] { return model_->trial(params_); }));
  if (state->trial == nullptr) {
    return absl::InvalidArgumentError(StrCat(Who(model_, ""), ": constructed no trial"));
  }
  Trial& t = *state->trial;
  EDL_ASSIGN_OR_RETURN(CompiledModel compiled,
                       CallEntry(model_, "build_model", [&] { return t.build_model(params_); }));
  const std::string build_model = Who(model_, "build_model");
  if (compiled.model() == nullptr) {
    return absl::InvalidArgumentError(StrCat(build_model, ": the compiled model has no model"));
  }
  if (!compiled.loss()) {
    return absl::InvalidArgumentError(
        StrCat(build_model, ": the compiled model has no loss: Compile(model).loss(fn)"));
  }
  if (!compiled.optimizer().has_value()) {
    return absl::InvalidArgumentError(StrCat(
        build_model, ": the compiled model has no optimizer: Compile(model).optimizer(spec)"));
  }
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(ValidateOptimizer(*compiled.optimizer()),
                                   Who(model_, "optimizer"));
  state->loss = compiled.loss();
  state->optimizer = compiled.optimizer();
  state->metrics = compiled.metrics();

  EDL_ASSIGN_OR_RETURN(state->loaders, CallEntry(model_, "make_data_loaders",
                                                 [&] { return t.make_data_loaders(params_); }));
  const std::string loaders = Who(model_, "make_data_loaders");
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(CheckLoader(state->loaders.training, "training"), loaders);
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(CheckLoader(state->loaders.validation, "validation"), loaders);

  EDL_ASSIGN_OR_RETURN(std::vector<Callback> callbacks,
                       CallEntry(model_, "callbacks", [&] { return t.callbacks(params_); }));
  StatusOr<TrialCallbacks> collected = Collect(callbacks, state->metrics);
  if (!collected.ok()) return elasticdl::Annotate(collected.status(), Who(model_, "callbacks"));
  state->callbacks = std::move(*collected);

  resolved_.dataset_fn = StrCat(trial, ".make_data_loaders");
  resolved_.loss = StrCat(trial, ".build_model");
  resolved_.optimizer = resolved_.loss;
  resolved_.eval_metrics_fn = state->metrics.empty() ? "" : resolved_.loss;
  resolved_.learning_rate_schedule =
      state->callbacks.learning_rate_schedule ? StrCat(trial, ".callbacks") : "";
  trial_ = std::move(state);
  return Status();
}

StatusOr<CompiledModel> ZooProgram::BuildTrialModel() const {
  std::lock_guard<std::mutex> lock(trial_->mu);
  EDL_ASSIGN_OR_RETURN(CompiledModel compiled, CallEntry(model_, "build_model", [&] {
                         return trial_->trial->build_model(params_);
                       }));
  if (compiled.model() == nullptr) {
    return absl::InvalidArgumentError(
        StrCat(Who(model_, "build_model"), ": the compiled model has no model"));
  }
  return compiled;
}

}  // namespace elasticdl
