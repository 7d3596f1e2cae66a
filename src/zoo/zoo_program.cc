#include "zoo/zoo_program.h"

#include <absl/strings/match.h>
#include <c10/util/Exception.h>

#include <cctype>
#include <exception>
#include <set>
#include <vector>

#include "common/strings.h"
#include "zoo/input_columns.h"
#include "zoo/zoo_code_error.h"

namespace elasticdl {

std::string zoo_internal::ShortWhat(const std::exception& e) {
  if (dynamic_cast<const ZooCodeError*>(&e) != nullptr) {
    std::string whole = e.what();
    while (!whole.empty() && std::isspace(static_cast<unsigned char>(whole.back()))) {
      whole.pop_back();
    }
    return whole;
  }
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

namespace {

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

// Whether `module` is a seed 002 file (input_fn, feature_columns,
// label_columns) rather than a seed 001 one (dataset_fn); one registering
// both is INVALID_ARGUMENT naming the entries of each.
StatusOr<bool> IsSeed002File(const ZooLibrary& library, const std::string& module) {
  std::vector<std::string> seed001;
  std::vector<std::string> seed002;
  for (const ZooEntry* e : library.ModuleEntries(module)) {
    if (e->kind == EntryKind::kDatasetFn) seed001.push_back(e->name);
    if (e->kind == EntryKind::kInputFn || e->kind == EntryKind::kColumns) {
      seed002.push_back(e->name);
    }
  }
  if (!seed001.empty() && !seed002.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} mixes two model-file contracts: {} (seed 001) and {} (seed 002); a file registers "
        "either dataset_fn, or input_fn with feature_columns and label_columns",
        library.FileOf(module), fmt::join(seed001, ", "), fmt::join(seed002, ", ")));
  }
  return !seed002.empty();
}

// Where a record of a group came from, for messages.
std::string RecordName(const Record& r, size_t position) {
  if (r.file == nullptr) return StrCat("record ", position, " of the minibatch");
  return StrCat(*r.file, " record ", r.index);
}

}  // namespace

StatusOr<const ZooEntry*> ZooProgram::FindEntry(std::string_view flag, std::string_view value,
                                                std::initializer_list<EntryKind> kinds) const {
  const std::string prefix = resolved_.model_def + ".";
  if (value.size() > prefix.size() && value.substr(0, prefix.size()) == prefix &&
      value.find('.', prefix.size()) == std::string_view::npos) {
    // <model_def>.default_loss: a default of the model class.
    const std::string name = StrCat(model_->name, ".", value.substr(prefix.size()));
    for (const ZooEntry& d : model_->class_defaults) {
      if (d.name != name) continue;
      if (std::find(kinds.begin(), kinds.end(), d.kind) == kinds.end()) {
        return absl::InvalidArgumentError(StrCat("--", flag, ": ", value, " is a ",
                                                 EntryKindName(d.kind), ", not a ",
                                                 EntryKindName(*kinds.begin())));
      }
      return &d;
    }
    std::vector<std::string> defaults;
    for (const ZooEntry& d : model_->class_defaults) defaults.push_back(d.name);
    return absl::NotFoundError(fmt::format(
        "--{}: model {} has no '{}'{}", flag, resolved_.model_def, value.substr(prefix.size()),
        defaults.empty() ? std::string(" (it declares no defaults)")
                         : fmt::format(" (its defaults: {})", fmt::join(defaults, ", "))));
  }
  StatusOr<EntryRef> ref = ResolveEntry(value, model_->module);
  StatusOr<const ZooEntry*> entry = ref.ok() ? library_->Find(ref->module, ref->name, kinds)
                                             : StatusOr<const ZooEntry*>(ref.status());
  if (!entry.ok()) return elasticdl::Annotate(entry.status(), StrCat("--", flag));
  return entry;
}

StatusOr<const ZooEntry*> ZooProgram::FindDefault(std::string_view flag,
                                                  std::string_view class_default,
                                                  std::string_view entry,
                                                  std::initializer_list<EntryKind> kinds) const {
  const std::string name = StrCat(model_->name, ".", class_default);
  for (const ZooEntry& d : model_->class_defaults) {
    if (d.name == name)
      return FindEntry(flag, StrCat(resolved_.model_def, ".", class_default), kinds);
  }
  return FindEntry(flag, entry, kinds);
}

std::vector<std::string> ZooProgramNames::Modules() const {
  StatusOr<EntryRef> model = ParseModelDef(model_def);
  if (!model.ok()) return {};
  std::set<std::string> modules{model->module};
  for (const std::string* name :
       {&dataset_fn, &loss, &optimizer, &eval_metrics_fn, &learning_rate_schedule}) {
    if (name->empty() || HasPrefix(*name, model_def + ".")) continue;  // the model's defaults
    StatusOr<EntryRef> ref = ResolveEntry(*name, model->module);
    if (ref.ok()) modules.insert(ref->module);
  }
  return {modules.begin(), modules.end()};
}

StatusOr<ZooProgram> ZooProgram::Resolve(std::shared_ptr<ZooLibrary> library,
                                         const ZooProgramNames& names, std::string_view params) {
  ZooProgram p;
  StatusOr<EntryRef> model_ref = ParseModelDef(names.model_def);
  if (!model_ref.ok()) return elasticdl::Annotate(model_ref.status(), "--model_def");
  const ZooLibrary& lib = *library;
  StatusOr<const ZooEntry*> model =
      lib.Find(model_ref->module, model_ref->name, {EntryKind::kModel, EntryKind::kTrial});
  if (!model.ok()) return elasticdl::Annotate(model.status(), "--model_def");
  p.model_ = *model;
  p.library_ = std::move(library);
  p.resolved_.model_def = p.model_def();
  EDL_ASSIGN_OR_RETURN(p.params_, Params::Parse(params));
  if (p.model_->kind == EntryKind::kTrial) {
    EDL_RETURN_IF_ERROR(p.ResolveTrial(names));
    return p;
  }
  EDL_ASSIGN_OR_RETURN(const bool seed002, IsSeed002File(lib, p.model_->module));

  using K = EntryKind;
  if (!names.dataset_fn.empty()) {
    EDL_ASSIGN_OR_RETURN(p.dataset_fn_,
                         p.FindEntry("dataset_fn", names.dataset_fn, {K::kDatasetFn, K::kInputFn}));
  } else if (seed002) {
    EDL_ASSIGN_OR_RETURN(p.dataset_fn_, p.FindEntry("input_fn", "input_fn", {K::kInputFn}));
  } else {
    EDL_ASSIGN_OR_RETURN(p.dataset_fn_, p.FindDefault("dataset_fn", "default_input", "dataset_fn",
                                                      {K::kDatasetFn, K::kInputFn}));
  }
  if (p.dataset_fn_->kind == K::kInputFn) EDL_RETURN_IF_ERROR(p.ResolveColumns());

  if (!names.loss.empty()) {
    EDL_ASSIGN_OR_RETURN(p.loss_, p.FindEntry("loss", names.loss, {K::kLoss}));
  } else {
    EDL_ASSIGN_OR_RETURN(p.loss_, p.FindDefault("loss", "default_loss", "loss", {K::kLoss}));
  }
  // A class's default_loss takes seed 001's (labels, predictions); a loss
  // of a seed 002 file takes (output, labels).
  const bool class_default = p.loss_->name.find('.') != std::string::npos;
  if (!class_default) {
    EDL_ASSIGN_OR_RETURN(p.loss_takes_output_first_, IsSeed002File(lib, p.loss_->module));
  }

  if (!names.optimizer.empty()) {
    EDL_ASSIGN_OR_RETURN(p.optimizer_, p.FindEntry("optimizer", names.optimizer, {K::kOptimizer}));
  } else {
    EDL_ASSIGN_OR_RETURN(p.optimizer_, p.FindDefault("optimizer", "default_optimizer", "optimizer",
                                                     {K::kOptimizer}));
  }

  if (!names.eval_metrics_fn.empty()) {
    EDL_ASSIGN_OR_RETURN(p.eval_metrics_fn_, p.FindEntry("eval_metrics_fn", names.eval_metrics_fn,
                                                         {K::kEvalMetricsFn}));
  } else {
    // Optional: a file without eval_metrics_fn has no metrics.
    StatusOr<const ZooEntry*> metrics = p.FindDefault("eval_metrics_fn", "default_eval_metrics",
                                                      "eval_metrics_fn", {K::kEvalMetricsFn});
    if (metrics.ok()) {
      p.eval_metrics_fn_ = *metrics;
    } else if (!absl::IsNotFound(metrics.status())) {
      return metrics.status();
    }
  }

  // Optional: without one the learning rate is constant (unless the job's
  // --lr_schedule sets one).
  if (!names.learning_rate_schedule.empty()) {
    EDL_ASSIGN_OR_RETURN(p.learning_rate_schedule_,
                         p.FindEntry("learning_rate_schedule", names.learning_rate_schedule,
                                     {K::kLearningRateSchedule}));
  } else {
    StatusOr<const ZooEntry*> schedule =
        p.FindEntry("learning_rate_schedule", "learning_rate_schedule", {K::kLearningRateSchedule});
    if (schedule.ok()) {
      p.learning_rate_schedule_ = *schedule;
    } else if (!absl::IsNotFound(schedule.status())) {
      return schedule.status();
    }
  }

  auto qualified = [](const ZooEntry* e) {
    return e == nullptr ? std::string() : StrCat(e->module, ".", e->name);
  };
  p.resolved_.dataset_fn = qualified(p.dataset_fn_);
  p.resolved_.loss = qualified(p.loss_);
  p.resolved_.optimizer = qualified(p.optimizer_);
  p.resolved_.eval_metrics_fn = qualified(p.eval_metrics_fn_);
  p.resolved_.learning_rate_schedule = qualified(p.learning_rate_schedule_);
  return p;
}

Status ZooProgram::ResolveColumns() {
  const std::string& module = dataset_fn_->module;
  const ZooEntry* label_columns = nullptr;
  for (const char* name : {"feature_columns", "label_columns"}) {
    StatusOr<const ZooEntry*> entry = library_->Find(module, name, EntryKind::kColumns);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(
          StrCat(library_->FileOf(module), " registers input_fn but no ", name,
                 ": seed 002's model files declare the schema of input_fn's outputs with "
                 "feature_columns() and label_columns() (",
                 entry.status().message(), ")"));
    }
    (std::string_view(name) == "feature_columns" ? feature_columns_ : label_columns) = *entry;
  }
  for (const ZooEntry* entry : {feature_columns_, label_columns}) {
    EDL_ASSIGN_OR_RETURN(std::vector<NumericColumn> columns,
                         CallEntry(entry, "", [&] { return entry->columns(params_); }));
    const bool labels = entry == label_columns;
    Status valid = ValidateColumns(columns, labels);
    if (!valid.ok()) return elasticdl::Annotate(valid, Who(entry, ""));
    (labels ? label_cols_ : feature_cols_) = std::move(columns);
  }
  return Status();
}

std::string ZooProgram::Who(const ZooEntry* entry, std::string_view action) const {
  const std::string where = StrCat(library_->FileOf(entry->module), ": ", entry->name);
  return action.empty() ? where : StrCat(where, ": ", action);
}

template <typename F>
auto ZooProgram::Call(EntryKind kind, std::string_view action, F&& fn) const
    -> StatusOr<decltype(fn())> {
  if (trial_ != nullptr && action.empty()) action = TrialPart(kind);
  return CallEntry(Entry(kind), action, std::forward<F>(fn));
}

StatusOr<std::shared_ptr<Model>> ZooProgram::MakeModel() const {
  std::shared_ptr<Model> model;
  if (trial_ != nullptr) {
    EDL_ASSIGN_OR_RETURN(CompiledModel compiled, BuildTrialModel());
    model = compiled.model();
  } else {
    EDL_ASSIGN_OR_RETURN(model,
                         Call(EntryKind::kModel, "", [&] { return model_->model(params_); }));
  }
  if (model == nullptr) {
    return absl::InvalidArgumentError(StrCat(EntryLocation(EntryKind::kModel), ": returned null"));
  }
  return BindToLibrary(library_, std::move(model));
}

StatusOr<Dataset<Example>> ZooProgram::MakeDataset(Dataset<Record> records, Mode mode) const {
  if (trial_ != nullptr) {
    const DataAdapter& loader =
        mode == Mode::TRAINING ? trial_->loaders.training : trial_->loaders.validation;
    EDL_ASSIGN_OR_RETURN(Dataset<Example> dataset, Call(EntryKind::kDatasetFn, "", [&] {
                           return loader.Apply(std::move(records), mode);
                         }));
    return Dataset<Example>(std::make_shared<LibraryBoundSource>(library_, dataset.source()));
  }
  if (dataset_fn_->kind == EntryKind::kInputFn) {
    return absl::FailedPreconditionError(
        StrCat(EntryLocation(EntryKind::kDatasetFn), " works on minibatches: use MakeBatches"));
  }
  EDL_ASSIGN_OR_RETURN(Dataset<Example> dataset, Call(EntryKind::kDatasetFn, "", [&] {
                         return dataset_fn_->dataset_fn(std::move(records), mode, params_);
                       }));
  return Dataset<Example>(std::make_shared<LibraryBoundSource>(library_, dataset.source()));
}

StatusOr<Dataset<Example>> ZooProgram::MakeBatches(Dataset<Record> records, Mode mode,
                                                   size_t minibatch_size) const {
  if (trial_ != nullptr || dataset_fn_->kind != EntryKind::kInputFn) {
    EDL_ASSIGN_OR_RETURN(Dataset<Example> examples, MakeDataset(std::move(records), mode));
    return examples.batch(minibatch_size);
  }
  // The program is copied into the pipeline: it holds the library.
  auto batches =
      records.group(minibatch_size).map([program = *this, mode](const std::vector<Record>& group) {
        return program.InputBatch(group, mode);
      });
  return Dataset<Example>(std::make_shared<LibraryBoundSource>(library_, batches.source()));
}

bool ZooProgram::MakesBatchesInPython() const {
  return trial_ == nullptr && dataset_fn_ != nullptr &&
         absl::EndsWith(library_->FileOf(dataset_fn_->module), ".py");
}

StatusOr<Example> ZooProgram::InputBatch(const std::vector<Record>& records, Mode mode) const {
  std::vector<Features> parsed;
  parsed.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    StatusOr<Features> features = ParseAllFeatures(records[i].data);
    if (!features.ok()) return elasticdl::Annotate(features.status(), RecordName(records[i], i));
    parsed.push_back(std::move(*features));
  }
  EDL_ASSIGN_OR_RETURN(InputFnResult result, Call(EntryKind::kInputFn, "", [&] {
                         return dataset_fn_->input_fn(parsed, mode, params_);
                       }));
  StatusOr<Example> batch = ApplyColumns(std::move(result), feature_cols_, label_cols_[0],
                                         static_cast<int64_t>(records.size()), mode);
  if (!batch.ok()) return elasticdl::Annotate(batch.status(), Who(dataset_fn_, ""));
  return batch;
}

StatusOr<torch::Tensor> ZooProgram::Forward(Model& model, const FeatureMap& features,
                                            bool training) const {
  StatusOr<torch::Tensor> called = Call(EntryKind::kModel, "forward", [&] {
    model.train(training);
    return model.forward(features, training);
  });
  if (!called.ok()) {
    const auto first = features.begin();
    if (training && first != features.end() && first->second.dim() > 0 &&
        first->second.size(0) == 1 &&
        absl::StrContains(called.status().message(), "more than 1 value per channel")) {
      return Status(called.status().code(),
                    StrCat(called.status().message(),
                           " (this minibatch holds 1 example, what its task's records left: "
                           "layers such as BatchNorm need more than one in training; a "
                           "--minibatch_size that leaves no task a single record avoids it)"));
    }
    return called.status();
  }
  torch::Tensor outputs = *std::move(called);
  if (!outputs.defined()) {
    return absl::InvalidArgumentError(
        StrCat(EntryLocation(EntryKind::kModel), ": forward returned an undefined tensor"));
  }
  return outputs;
}

StatusOr<torch::Tensor> ZooProgram::Loss(const torch::Tensor& labels,
                                         const torch::Tensor& predictions) const {
  EDL_ASSIGN_OR_RETURN(torch::Tensor loss, Call(EntryKind::kLoss, "", [&] {
                         if (trial_ != nullptr) return trial_->loss(labels, predictions);
                         return loss_takes_output_first_
                                    ? loss_->loss(predictions, labels, params_)
                                    : loss_->loss(labels, predictions, params_);
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
  if (trial_ != nullptr) return *trial_->optimizer;  // validated by Resolve
  EDL_ASSIGN_OR_RETURN(OptimizerSpec spec, Call(EntryKind::kOptimizer, "",
                                                [&] { return optimizer_->optimizer(params_); }));
  EDL_RETURN_IF_ERROR(Annotate(ValidateOptimizer(spec), EntryKind::kOptimizer));
  return spec;
}

StatusOr<std::optional<LearningRateSchedule>> ZooProgram::LearningRateScheduleOf() const {
  if (trial_ != nullptr) return trial_->callbacks.learning_rate_schedule;  // validated
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
  MetricMap specs;
  if (trial_ != nullptr) {
    specs = trial_->metrics;
  } else if (eval_metrics_fn_ == nullptr) {
    return metrics;
  } else {
    EDL_ASSIGN_OR_RETURN(specs, Call(EntryKind::kEvalMetricsFn, "",
                                     [&] { return eval_metrics_fn_->eval_metrics_fn(params_); }));
  }
  for (const auto& [name, spec] : specs) {
    const std::string action = StrCat("making metric '", name, "'");
    const MetricSpec& made = spec;  // a structured binding cannot be captured in C++17
    EDL_ASSIGN_OR_RETURN(std::unique_ptr<Metric> metric,
                         Call(EntryKind::kEvalMetricsFn, action, [&] { return made.Make(); }));
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
  for (auto& [name, entry] : metrics) {
    const std::string action = StrCat("metric '", name, "'");
    Metric* metric = entry.get();  // a structured binding cannot be captured in C++17
    EDL_RETURN_IF_ERROR(Call(EntryKind::kEvalMetricsFn, action, [&] {
                          metric->Update(labels, predictions);
                          return true;
                        }).status());
  }
  return Status();
}

const ZooEntry* ZooProgram::Entry(EntryKind kind) const {
  if (trial_ != nullptr) return model_;  // the trial stands for every entry
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
    case EntryKind::kInputFn:
      return dataset_fn_;
    case EntryKind::kColumns:
      return feature_columns_;
    case EntryKind::kLearningRateSchedule:
      return learning_rate_schedule_;
    case EntryKind::kTrial:
      return nullptr;
  }
  return nullptr;
}

std::string ZooProgram::EntryLocation(EntryKind kind) const {
  const ZooEntry* e = Entry(kind);
  if (e == nullptr) return StrCat("(no ", EntryKindName(kind), ")");
  return Who(e, trial_ != nullptr ? TrialPart(kind) : "");
}

Status ZooProgram::Annotate(const Status& status, EntryKind kind) const {
  return elasticdl::Annotate(status, EntryLocation(kind));
}

}  // namespace elasticdl
