#include "python/python_zoo.h"

#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "common/strings.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/metrics.h"
#include "python/interpreter.h"
#include "python/py_ref.h"
#include "python/python_dataset.h"
#include "python/python_error.h"
#include "python/python_model.h"
#include "python/python_optimizer.h"
#include "zoo/zoo_code_error.h"
#include "zoo/zoo_sources.h"

namespace elasticdl::python {
namespace {

namespace py = pybind11;
namespace fs = std::filesystem;

// f() with the GIL; a Python exception becomes a ZooCodeError.
template <typename F>
auto WithPython(F&& f) -> decltype(f()) {
  py::gil_scoped_acquire gil;
  try {
    return f();
  } catch (const py::error_already_set& e) {
    throw ZooError(e);
  }
}

[[noreturn]] void ThrowStatus(const Status& status) {
  throw ZooCodeError(std::string(status.message()));
}

py::dict Kwargs(const Params& params) {
  py::dict kwargs;
  for (const auto& [key, value] : params.values()) {
    kwargs[py::str(key)] = std::visit([](const auto& v) { return py::cast(v); }, value);
  }
  return kwargs;
}

ZooEntry Of(EntryKind kind) {
  ZooEntry e;
  e.kind = kind;
  return e;
}

ZooEntry ModelEntry(PyRef factory, std::string name) {
  ZooEntry e = Of(EntryKind::kModel);
  e.model = [factory, name](const Params& params) -> std::shared_ptr<Model> {
    return WithPython([&] {
      py::object module = Runtime().attr("make_model")(factory.get(), Kwargs(params), name);
      return std::shared_ptr<Model>(PythonModel::Wrap(module));
    });
  };
  return e;
}

ZooEntry DatasetEntry(PyRef fn, const char* stage) {
  ZooEntry e = Of(EntryKind::kDatasetFn);
  e.dataset_fn = [fn, stage](Dataset<Record> records, Mode mode, const Params&) {
    py::gil_scoped_acquire gil;
    return PythonExamples(stage, fn, std::move(records), mode);
  };
  return e;
}

ZooEntry LossEntry(PyRef fn) {
  ZooEntry e = Of(EntryKind::kLoss);
  e.loss = [fn](const torch::Tensor& labels, const torch::Tensor& predictions, const Params&) {
    return WithPython([&] {
      return Runtime().attr("loss")(fn.get(), labels, predictions).cast<torch::Tensor>();
    });
  };
  return e;
}

ZooEntry OptimizerEntry(PyRef fn) {
  ZooEntry e = Of(EntryKind::kOptimizer);
  e.optimizer = [fn](const Params&) {
    return WithPython([&] {
      auto [name, args] =
          Runtime().attr("describe_optimizer")(fn.get()()).cast<std::pair<std::string, py::dict>>();
      StatusOr<OptimizerSpec> spec = OptimizerOf(name, args);
      if (!spec.ok()) ThrowStatus(spec.status());
      return *spec;
    });
  };
  return e;
}

ZooEntry EvalMetricsEntry(PyRef fn) {
  ZooEntry e = Of(EntryKind::kEvalMetricsFn);
  e.eval_metrics_fn = [fn](const Params&) {
    return WithPython([&] {
      MetricMap metrics;
      // (name, kind, num_thresholds, metric) of each.
      for (py::handle item : Runtime().attr("metrics_of")(fn.get()())) {
        auto t = item.cast<py::tuple>();
        const std::string name = t[0].cast<std::string>();
        const std::string kind = t[1].cast<std::string>();
        if (kind == "mean") {
          PyRef metric(py::reinterpret_borrow<py::object>(t[3]));
          metrics.emplace(name,
                          [metric](const torch::Tensor& labels, const torch::Tensor& predictions) {
                            return WithPython([&] {
                              return Runtime()
                                  .attr("metric_values")(metric.get(), labels, predictions)
                                  .cast<torch::Tensor>();
                            });
                          });
        } else if (kind == "auc") {
          const int thresholds = t[2].cast<int>();
          metrics.emplace(name, [thresholds] { return AUC(thresholds); });
        } else if (kind == "accuracy") {
          metrics.emplace(name, &Accuracy);
        } else if (kind == "mse") {
          metrics.emplace(name, &MeanSquaredError);
        } else {
          metrics.emplace(name, &MeanAbsoluteError);
        }
      }
      return metrics;
    });
  };
  return e;
}

ZooEntry ScheduleEntry(PyRef fn) {
  ZooEntry e = Of(EntryKind::kLearningRateSchedule);
  e.learning_rate_schedule = [fn](const Params&) {
    // Its text, or the torch.optim.lr_scheduler scheduler a factory or a
    // function of the optimizer builds, written as that text.
    const std::string text =
        WithPython([&] { return Runtime().attr("schedule_text")(fn.get()()).cast<std::string>(); });
    StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Parse(text);
    if (!schedule.ok()) ThrowStatus(Annotate(schedule.status(), StrCat("'", text, "'")));
    return *schedule;
  };
  return e;
}

// Seed 003: a model class's static methods that stand for entries.
std::vector<ZooEntry> ClassDefaults(const py::object& cls, const std::string& module,
                                    const std::string& name) {
  std::vector<ZooEntry> defaults;
  auto add = [&](const char* method, ZooEntry (*make)(PyRef)) {
    if (!py::hasattr(cls, method)) return;
    ZooEntry d = make(PyRef(cls.attr(method)));
    d.module = module;
    d.name = StrCat(name, ".", method);
    defaults.push_back(std::move(d));
  };
  add("default_loss", &LossEntry);
  add("default_optimizer", &OptimizerEntry);
  add("default_input", [](PyRef fn) { return DatasetEntry(std::move(fn), "input_pipeline"); });
  add("default_eval_metrics", &EvalMetricsEntry);
  return defaults;
}

// The entry of `kind` that `value` (the module's `name`) makes; a value that
// cannot be one is INVALID_ARGUMENT naming the file.
StatusOr<ZooEntry> MakeEntry(const py::object& value, EntryKind kind, const std::string& module,
                             const std::string& name, const std::string& file) {
  py::module_ inspect = py::module_::import("inspect");
  const bool is_class = inspect.attr("isclass")(value).cast<bool>();
  const bool callable = PyCallable_Check(value.ptr()) != 0;
  const std::string described = Runtime().attr("describe_value")(value).cast<std::string>();
  ZooEntry entry;
  if (kind == EntryKind::kModel) {
    py::object nn_module = py::module_::import("torch").attr("nn").attr("Module");
    const bool model_class = is_class && PyObject_IsSubclass(value.ptr(), nn_module.ptr()) == 1;
    if (py::isinstance(value, nn_module)) {
      return absl::InvalidArgumentError(
          StrCat(file, ": '", name, "' is ", described,
                 ": name a torch.nn.Module class or a function that builds one (every worker "
                 "builds its own, seeded by --seed)"));
    }
    if (!model_class && (is_class || !callable)) {
      return absl::InvalidArgumentError(StrCat(file, ": '", name, "' is ", described,
                                               ", not a torch.nn.Module subclass nor a function "
                                               "that returns a torch.nn.Module"));
    }
    entry = ModelEntry(PyRef(value), name);
    if (model_class) entry.class_defaults = ClassDefaults(value, module, name);
  } else {
    if (is_class || !callable) {
      return absl::InvalidArgumentError(StrCat(file, ": '", name, "' is ", described,
                                               ", not a function (", EntryKindName(kind), ")"));
    }
    switch (kind) {
      case EntryKind::kDatasetFn:
        entry = DatasetEntry(PyRef(value), "pipeline");
        break;
      case EntryKind::kLoss:
        entry = LossEntry(PyRef(value));
        break;
      case EntryKind::kOptimizer:
        entry = OptimizerEntry(PyRef(value));
        break;
      case EntryKind::kEvalMetricsFn:
        entry = EvalMetricsEntry(PyRef(value));
        break;
      case EntryKind::kLearningRateSchedule:
        entry = ScheduleEntry(PyRef(value));
        break;
      default:
        return absl::InvalidArgumentError(
            StrCat(file, ": '", name, "': a Python file cannot be ", EntryKindName(kind),
                   " entry (seed 002's input_fn and columns, and seed 004's trials, are C++)"));
    }
  }
  entry.module = module;
  entry.name = name;
  return entry;
}

}  // namespace

class PythonZoo final : public ZooModules {
 public:
  static StatusOr<std::unique_ptr<PythonZoo>> Open(const std::string& root);

  std::string FileOf(const std::string& module) const override;
  std::vector<std::string> Files() const override;
  StatusOr<const ZooEntry*> Find(const std::string& module, const std::string& name,
                                 std::initializer_list<EntryKind> kinds) const override;
  std::string Where(const std::vector<uint64_t>& threads,
                    std::chrono::milliseconds patience) const override;

 private:
  PythonZoo(std::string root, std::map<std::string, std::string> files)
      : root_(std::move(root)), files_(std::move(files)) {}

  // The imported module (or why it cannot be imported). mu_ and the GIL held.
  StatusOr<PyRef> Import(const std::string& module) const;

  std::string root_;
  std::map<std::string, std::string> files_;  // module -> relative file
  mutable std::mutex mu_;                     // guards the maps below
  mutable std::map<std::string, StatusOr<PyRef>> modules_;
  mutable std::map<std::tuple<std::string, std::string, EntryKind>, std::unique_ptr<ZooEntry>>
      entries_;
};

StatusOr<std::unique_ptr<PythonZoo>> PythonZoo::Open(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::InvalidArgumentError(
        StrCat("the model zoo's Python files: ", root, " is not a directory"));
  }
  std::map<std::string, std::string> files;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".py") continue;
    const std::string relative = fs::relative(it->path(), root).string();
    files.emplace(SourceModule(relative), relative);
  }
  if (ec) return absl::DataLossError(StrCat("cannot list ", root, ": ", ec.message()));
  return std::unique_ptr<PythonZoo>(
      new PythonZoo(fs::absolute(root).lexically_normal().string(), std::move(files)));
}

std::string PythonZoo::FileOf(const std::string& module) const {
  auto it = files_.find(module);
  return it == files_.end() ? "" : it->second;
}

std::vector<std::string> PythonZoo::Files() const {
  std::vector<std::string> files;
  for (const auto& [module, file] : files_) files.push_back(file);
  std::sort(files.begin(), files.end());
  return files;
}

std::string PythonZoo::Where(const std::vector<uint64_t>& threads,
                             std::chrono::milliseconds patience) const {
  // The modules' code runs only in an interpreter a lookup started.
  if (threads.empty() || !Py_IsInitialized()) return "";
  // A thread stuck in C code may hold the interpreter's lock for good: the
  // stacks are read on a thread of their own, left waiting after `patience`.
  auto answer = std::make_shared<std::promise<std::string>>();
  std::future<std::string> where = answer->get_future();
  std::thread([answer, threads] {
    std::string text;
    {
      py::gil_scoped_acquire gil;
      try {
        text = Runtime().attr("where")(threads).cast<std::string>();
      } catch (const py::error_already_set& e) {
        text = StrCat("(the stacks cannot be read: ", DescribeError(e), ")");
      } catch (const std::exception& e) {
        text = StrCat("(the stacks cannot be read: ", e.what(), ")");
      }
    }
    answer->set_value(std::move(text));
  }).detach();
  if (where.wait_for(patience) != std::future_status::ready) return "";
  return where.get();
}

StatusOr<PyRef> PythonZoo::Import(const std::string& module) const {
  auto it = modules_.find(module);
  if (it != modules_.end()) return it->second;
  StatusOr<PyRef> imported = absl::UnknownError("");
  try {
    imported = PyRef(Runtime().attr("import_module")(root_, module));
  } catch (const py::error_already_set& e) {
    imported = absl::InvalidArgumentError(
        StrCat(FileOf(module), " cannot be imported: ", DescribeError(e)));
  }
  modules_.emplace(module, imported);
  return imported;
}

StatusOr<const ZooEntry*> PythonZoo::Find(const std::string& module, const std::string& name,
                                          std::initializer_list<EntryKind> kinds) const {
  const std::string file = FileOf(module);
  if (file.empty()) {
    return absl::NotFoundError(
        StrCat("model zoo has no file ", ModuleFile(module), " or ", module, ".py"));
  }
  const bool model = std::find(kinds.begin(), kinds.end(), EntryKind::kModel) != kinds.end();
  const EntryKind kind = model ? EntryKind::kModel : *kinds.begin();
  EDL_RETURN_IF_ERROR(StartPython());
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_tuple(module, name, kind);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second.get();

  py::gil_scoped_acquire gil;
  EDL_ASSIGN_OR_RETURN(PyRef imported, Import(module));
  try {
    const py::object& m = imported.get();
    if (!py::hasattr(m, name.c_str())) {
      auto names = Runtime().attr("public_names")(m).cast<std::vector<std::string>>();
      return absl::NotFoundError(
          fmt::format("{} has no entry '{}'; entries: {}", file, name,
                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    EDL_ASSIGN_OR_RETURN(ZooEntry entry, MakeEntry(m.attr(name.c_str()), kind, module, name, file));
    auto& slot = entries_[key];
    slot = std::make_unique<ZooEntry>(std::move(entry));
    return slot.get();
  } catch (const py::error_already_set& e) {
    return absl::InvalidArgumentError(StrCat(file, ": ", name, ": ", DescribeError(e)));
  }
}

StatusOr<std::unique_ptr<ZooModules>> OpenPythonModules(const std::string& root) {
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<PythonZoo> zoo, PythonZoo::Open(root));
  return std::unique_ptr<ZooModules>(std::move(zoo));
}

StatusOr<std::shared_ptr<ZooLibrary>> OpenZoo(const std::string& library_path,
                                              const std::string& python_dir,
                                              std::vector<std::string> left_out) {
  std::unique_ptr<ZooModules> modules;
  if (!python_dir.empty()) {
    EDL_ASSIGN_OR_RETURN(modules, OpenPythonModules(python_dir));
  }
  return ZooLibrary::Load(library_path, std::move(modules), std::move(left_out));
}

}  // namespace elasticdl::python
