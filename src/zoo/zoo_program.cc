#include "zoo/zoo_program.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <exception>

#include "common/strings.h"

namespace elasticdl {
namespace {

// The first lines of an exception's message, without c10's backtrace.
std::string ShortWhat(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string_view what = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  std::string_view head = what;
  if (size_t raised = head.find("Exception raised from"); raised != std::string_view::npos) {
    head = head.substr(0, raised);
  }
  constexpr int kMaxLines = 4;
  size_t end = 0;
  for (int line = 0; line < kMaxLines && end != std::string_view::npos; ++line) {
    end = head.find('\n', end);
    if (end != std::string_view::npos) ++end;
  }
  head = head.substr(0, end);
  while (!head.empty() && std::isspace(static_cast<unsigned char>(head.back()))) {
    head.remove_suffix(1);
  }
  return std::string(head);
}

// Keeps the zoo library loaded while a dataset made by its dataset_fn lives:
// the pipeline's stages run the library's code. Members are destroyed in
// reverse order: the stages, then the library.
class LibraryBoundSource final : public internal::Source<Example> {
 public:
  LibraryBoundSource(std::shared_ptr<ZooLibrary> library,
                     std::shared_ptr<internal::Source<Example>> source)
      : library_(std::move(library)), source_(std::move(source)) {}
  StatusOr<std::optional<Example>> Next() override { return source_->Next(); }

 private:
  std::shared_ptr<ZooLibrary> library_;
  std::shared_ptr<internal::Source<Example>> source_;
};

// The same for a metric.
class LibraryBoundMetric final : public Metric {
 public:
  LibraryBoundMetric(std::shared_ptr<ZooLibrary> library, std::unique_ptr<Metric> metric)
      : library_(std::move(library)), metric_(std::move(metric)) {}
  void Update(const torch::Tensor& labels, const torch::Tensor& predictions) override {
    metric_->Update(labels, predictions);
  }
  MetricState state() const override { return metric_->state(); }

 private:
  std::shared_ptr<ZooLibrary> library_;
  std::unique_ptr<Metric> metric_;
};

// The same for a model, through shared_ptr's aliasing constructor.
std::shared_ptr<Model> BindToLibrary(std::shared_ptr<ZooLibrary> library,
                                     std::shared_ptr<Model> model) {
  struct Holder {
    std::shared_ptr<ZooLibrary> library;
    std::shared_ptr<Model> model;
  };
  auto holder = std::make_shared<Holder>(Holder{std::move(library), std::move(model)});
  Model* raw = holder->model.get();
  return std::shared_ptr<Model>(std::move(holder), raw);
}

std::string ShapeString(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

// The entry of `kind` that the flag --`flag`=`value` names; errors name the flag.
StatusOr<const ZooEntry*> FindFlagEntry(const ZooLibrary& library, std::string_view flag,
                                        std::string_view value, std::string_view model_module,
                                        EntryKind kind) {
  StatusOr<EntryRef> ref = ResolveEntry(value, model_module);
  StatusOr<const ZooEntry*> entry = ref.ok() ? library.Find(*ref, kind) : ref.status();
  if (!entry.ok()) return Annotate(entry.status(), StrCat("--", flag));
  return entry;
}

}  // namespace

StatusOr<ZooProgram> ZooProgram::Resolve(std::shared_ptr<ZooLibrary> library,
                                         const ZooProgramNames& names, std::string_view params) {
  ZooProgram p;
  StatusOr<EntryRef> model_ref = ParseModelDef(names.model_def);
  if (!model_ref.ok()) return elasticdl::Annotate(model_ref.status(), "--model_def");
  const ZooLibrary& lib = *library;
  const std::string& module = model_ref->module;
  StatusOr<const ZooEntry*> model = lib.Find(*model_ref, EntryKind::kModel);
  if (!model.ok()) return elasticdl::Annotate(model.status(), "--model_def");
  p.model_ = *model;
  EDL_ASSIGN_OR_RETURN(p.dataset_fn_, FindFlagEntry(lib, "dataset_fn", names.dataset_fn, module,
                                                    EntryKind::kDatasetFn));
  EDL_ASSIGN_OR_RETURN(p.loss_, FindFlagEntry(lib, "loss", names.loss, module, EntryKind::kLoss));
  EDL_ASSIGN_OR_RETURN(p.optimizer_, FindFlagEntry(lib, "optimizer", names.optimizer, module,
                                                   EntryKind::kOptimizer));
  if (!names.eval_metrics_fn.empty()) {
    StatusOr<const ZooEntry*> metrics = FindFlagEntry(lib, "eval_metrics_fn", names.eval_metrics_fn,
                                                      module, EntryKind::kEvalMetricsFn);
    const bool optional = names.eval_metrics_fn == ZooProgramNames().eval_metrics_fn;
    if (metrics.ok()) {
      p.eval_metrics_fn_ = *metrics;
    } else if (!(optional && absl::IsNotFound(metrics.status()))) {
      return metrics.status();
    }
  }
  if (!names.learning_rate_schedule.empty()) {
    StatusOr<const ZooEntry*> schedule =
        FindFlagEntry(lib, "learning_rate_schedule", names.learning_rate_schedule, module,
                      EntryKind::kLearningRateSchedule);
    const bool optional = names.learning_rate_schedule == ZooProgramNames().learning_rate_schedule;
    if (schedule.ok()) {
      p.learning_rate_schedule_ = *schedule;
    } else if (!(optional && absl::IsNotFound(schedule.status()))) {
      return schedule.status();
    }
  }
  EDL_ASSIGN_OR_RETURN(p.params_, Params::Parse(params));
  p.library_ = std::move(library);
  return p;
}

std::string ZooProgram::Who(EntryKind kind, std::string_view action) const {
  return action.empty() ? EntryLocation(kind) : StrCat(EntryLocation(kind), ": ", action);
}

template <typename F>
auto ZooProgram::Call(EntryKind kind, std::string_view action, F&& fn) const
    -> StatusOr<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(StrCat(Who(kind, action), " threw: ", ShortWhat(e)));
  } catch (...) {
    return absl::InvalidArgumentError(StrCat(Who(kind, action), " threw a non-standard exception"));
  }
}

StatusOr<std::shared_ptr<Model>> ZooProgram::MakeModel() const {
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model,
                       Call(EntryKind::kModel, "", [&] { return model_->model(params_); }));
  if (model == nullptr) {
    return absl::InvalidArgumentError(StrCat(EntryLocation(EntryKind::kModel), ": returned null"));
  }
  return BindToLibrary(library_, std::move(model));
}

StatusOr<Dataset<Example>> ZooProgram::MakeDataset(Dataset<Record> records, Mode mode) const {
  EDL_ASSIGN_OR_RETURN(Dataset<Example> dataset, Call(EntryKind::kDatasetFn, "", [&] {
                         return dataset_fn_->dataset_fn(std::move(records), mode, params_);
                       }));
  return Dataset<Example>(std::make_shared<LibraryBoundSource>(library_, dataset.source()));
}

StatusOr<torch::Tensor> ZooProgram::Forward(Model& model, const FeatureMap& features,
                                            bool training) const {
  EDL_ASSIGN_OR_RETURN(torch::Tensor outputs, Call(EntryKind::kModel, "forward", [&] {
                         model.train(training);
                         return model.forward(features, training);
                       }));
  if (!outputs.defined()) {
    return absl::InvalidArgumentError(
        StrCat(EntryLocation(EntryKind::kModel), ": forward returned an undefined tensor"));
  }
  return outputs;
}

StatusOr<torch::Tensor> ZooProgram::Loss(const torch::Tensor& labels,
                                         const torch::Tensor& predictions) const {
  EDL_ASSIGN_OR_RETURN(torch::Tensor loss, Call(EntryKind::kLoss, "", [&] {
                         return loss_->loss(labels, predictions, params_);
                       }));
  if (!loss.defined() || loss.numel() != 1 || !loss.is_floating_point()) {
    return absl::InvalidArgumentError(
        StrCat(EntryLocation(EntryKind::kLoss), ": returned ",
               loss.defined() ? StrCat("a ", c10::toString(loss.scalar_type()), " tensor of shape ",
                                       ShapeString(loss))
                              : std::string("an undefined tensor"),
               "; a loss is one floating-point value (reduce it, e.g. with .mean())"));
  }
  return loss.reshape({});
}

StatusOr<OptimizerSpec> ZooProgram::Optimizer() const {
  EDL_ASSIGN_OR_RETURN(OptimizerSpec spec, Call(EntryKind::kOptimizer, "",
                                                [&] { return optimizer_->optimizer(params_); }));
  EDL_RETURN_IF_ERROR(Annotate(ValidateOptimizer(spec), EntryKind::kOptimizer));
  return spec;
}

StatusOr<std::optional<LearningRateSchedule>> ZooProgram::LearningRateScheduleOf() const {
  if (learning_rate_schedule_ == nullptr) return std::optional<LearningRateSchedule>();
  EDL_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                       Call(EntryKind::kLearningRateSchedule, "", [&] {
                         return learning_rate_schedule_->learning_rate_schedule(params_);
                       }));
  EDL_RETURN_IF_ERROR(Annotate(schedule.Validate(), EntryKind::kLearningRateSchedule));
  return std::optional<LearningRateSchedule>(schedule);
}

StatusOr<std::map<std::string, std::unique_ptr<Metric>>> ZooProgram::MakeMetrics() const {
  std::map<std::string, std::unique_ptr<Metric>> metrics;
  if (eval_metrics_fn_ == nullptr) return metrics;
  EDL_ASSIGN_OR_RETURN(MetricMap specs, Call(EntryKind::kEvalMetricsFn, "", [&] {
                         return eval_metrics_fn_->eval_metrics_fn(params_);
                       }));
  for (const auto& [name, spec] : specs) {
    const std::string action = StrCat("making metric '", name, "'");
    EDL_ASSIGN_OR_RETURN(std::unique_ptr<Metric> metric,
                         Call(EntryKind::kEvalMetricsFn, action, [&] { return spec.Make(); }));
    if (metric == nullptr) {
      return absl::InvalidArgumentError(
          StrCat(EntryLocation(EntryKind::kEvalMetricsFn), ": metric '", name, "' is null"));
    }
    metrics[name] = std::make_unique<LibraryBoundMetric>(library_, std::move(metric));
  }
  return metrics;
}

Status ZooProgram::UpdateMetrics(std::map<std::string, std::unique_ptr<Metric>>& metrics,
                                 const torch::Tensor& labels,
                                 const torch::Tensor& predictions) const {
  for (auto& [name, metric] : metrics) {
    const std::string action = StrCat("metric '", name, "'");
    EDL_RETURN_IF_ERROR(Call(EntryKind::kEvalMetricsFn, action, [&] {
                          metric->Update(labels, predictions);
                          return true;
                        }).status());
  }
  return Status();
}

const ZooEntry* ZooProgram::Entry(EntryKind kind) const {
  switch (kind) {
    case EntryKind::kModel:
      return model_;
    case EntryKind::kDatasetFn:
      return dataset_fn_;
    case EntryKind::kLoss:
      return loss_;
    case EntryKind::kOptimizer:
      return optimizer_;
    case EntryKind::kEvalMetricsFn:
      return eval_metrics_fn_;
    case EntryKind::kLearningRateSchedule:
      return learning_rate_schedule_;
  }
  return nullptr;
}

std::string ZooProgram::EntryLocation(EntryKind kind) const {
  const ZooEntry* e = Entry(kind);
  if (e == nullptr) return StrCat("(no ", EntryKindName(kind), ")");
  return StrCat(ModuleFile(e->module), ": ", e->name);
}

Status ZooProgram::Annotate(const Status& status, EntryKind kind) const {
  return elasticdl::Annotate(status, EntryLocation(kind));
}

}  // namespace elasticdl
