#include "experiment/experiment_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <variant>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/job_settings.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::experiment {
namespace {

namespace fs = std::filesystem;

// Reads one file's nodes, with errors that name the file, the line and the key.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  Status Error(const YAML::Node& node, const std::string& key, const std::string& why) const {
    std::string where = file_;
    if (node.IsDefined() && node.Mark().line >= 0) where = StrCat(file_, ":", node.Mark().line + 1);
    return absl::InvalidArgumentError(StrCat(where, ": ", key, ": ", why));
  }

  // The keys of map `node` must be among `known`.
  Status Keys(const YAML::Node& node, const std::string& key,
              const std::vector<std::string>& known) const {
    if (!node.IsMap()) return Error(node, key, "expected a mapping of keys to values");
    for (const auto& kv : node) {
      const std::string k = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        return Error(
            kv.first, key.empty() ? k : StrCat(key, ".", k),
            StrCat("unknown key; expected one of ", fmt::format("{}", fmt::join(known, ", "))));
      }
    }
    return absl::OkStatus();
  }

  StatusOr<std::string> String(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) return Error(node, key, "expected a string");
    return node.Scalar();
  }

  template <typename T>
  StatusOr<T> Number(const YAML::Node& node, const std::string& key, const char* what) const {
    T value{};
    if (!node.IsScalar() || !YAML::convert<T>::decode(node, value)) {
      return Error(node, key, StrCat("expected ", what, ", got '", Text(node), "'"));
    }
    return value;
  }

  StatusOr<bool> Bool(const YAML::Node& node, const std::string& key) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return Error(node, key, StrCat("expected true or false, got '", Text(node), "'"));
    }
    return value;
  }

  // A scalar as a Params value: a quoted one is a string; a plain one an
  // integer, a number, true/false or else a string.
  StatusOr<Params::Value> Scalar(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) return Error(node, key, "expected a single value");
    const std::string& s = node.Scalar();
    if (node.Tag() != "!") {
      int64_t i = 0;
      double d = 0;
      bool b = false;
      if (YAML::convert<int64_t>::decode(node, i)) return Params::Value(i);
      if (YAML::convert<double>::decode(node, d)) return Params::Value(d);
      if (YAML::convert<bool>::decode(node, b)) return Params::Value(b);
    }
    return Params::Value(s);
  }

  std::string Text(const YAML::Node& node) const {
    if (node.IsScalar()) return node.Scalar();
    YAML::Emitter out;
    out << YAML::Flow << node;
    return out.c_str();
  }

  const std::string& file() const { return file_; }

 private:
  const std::string file_;
};

// A path relative to the configuration file's directory.
std::string Resolve(const std::string& base, const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find("://") != std::string::npos) return path;
  return (fs::path(base) / path).lexically_normal().string();
}

// Several comma-separated paths, each resolved.
std::string ResolveList(const std::string& base, const std::string& paths) {
  std::vector<std::string> resolved;
  for (absl::string_view p : absl::StrSplit(paths, ',', absl::SkipEmpty())) {
    resolved.push_back(Resolve(base, std::string(p)));
  }
  return absl::StrJoin(resolved, ",");
}

StatusOr<Hyperparameter> ReadHyperparameter(const Reader& r, const std::string& name,
                                            const YAML::Node& node) {
  const std::string key = StrCat("hyperparameters.", name);
  Hyperparameter h;
  h.name = name;
  if (node.IsScalar()) {  // `dropout: 0.25`: a constant
    EDL_ASSIGN_OR_RETURN(h.value, r.Scalar(node, key));
    return h;
  }
  if (!node.IsMap() || !node["type"]) {
    return r.Error(node, key, "expected a value, or {type: const|int|double|log|categorical, ...}");
  }
  EDL_ASSIGN_OR_RETURN(std::string type, r.String(node["type"], key + ".type"));
  if (type == "const" || type == "constant") {
    EDL_RETURN_IF_ERROR(r.Keys(node, key, {"type", "val"}));
    if (!node["val"]) return r.Error(node, key, "a const hyperparameter needs `val`");
    h.type = HparamType::kConst;
    EDL_ASSIGN_OR_RETURN(h.value, r.Scalar(node["val"], key + ".val"));
    return h;
  }
  if (type == "categorical") {
    EDL_RETURN_IF_ERROR(r.Keys(node, key, {"type", "vals"}));
    const YAML::Node vals = node["vals"];
    if (!vals || !vals.IsSequence()) {
      return r.Error(node, key, "a categorical hyperparameter needs `vals: [a, b, ...]`");
    }
    h.type = HparamType::kCategorical;
    for (size_t i = 0; i < vals.size(); ++i) {
      EDL_ASSIGN_OR_RETURN(Params::Value v, r.Scalar(vals[i], StrCat(key, ".vals[", i, "]")));
      h.vals.push_back(std::move(v));
    }
    if (h.vals.empty())
      return r.Error(vals, key + ".vals", "empty range: no values to choose from");
    return h;
  }
  if (type == "int" || type == "double" || type == "log") {
    std::vector<std::string> known = {"type", "minval", "maxval", "count"};
    if (type == "log") known.emplace_back("base");
    EDL_RETURN_IF_ERROR(r.Keys(node, key, known));
    if (!node["minval"] || !node["maxval"]) {
      return r.Error(node, key, StrCat("an ", type, " hyperparameter needs minval and maxval"));
    }
    h.type = type == "int"      ? HparamType::kInt
             : type == "double" ? HparamType::kDouble
                                : HparamType::kLog;
    EDL_ASSIGN_OR_RETURN(h.minval, r.Number<double>(node["minval"], key + ".minval", "a number"));
    EDL_ASSIGN_OR_RETURN(h.maxval, r.Number<double>(node["maxval"], key + ".maxval", "a number"));
    if (node["base"]) {
      EDL_ASSIGN_OR_RETURN(h.base, r.Number<double>(node["base"], key + ".base", "a number"));
    }
    if (node["count"]) {
      EDL_ASSIGN_OR_RETURN(h.count, r.Number<int64_t>(node["count"], key + ".count", "an integer"));
      if (h.count < 1) return r.Error(node["count"], key + ".count", "must be at least 1");
    }
    if (h.minval > h.maxval) {
      return r.Error(node, key, StrCat("empty range: minval ", h.minval, " > maxval ", h.maxval));
    }
    return h;
  }
  return r.Error(node["type"], key + ".type",
                 StrCat("'", type, "' is not one of const, int, double, log, categorical"));
}

Status ReadSearcher(const Reader& r, const YAML::Node& node, SearcherConfig* s) {
  EDL_RETURN_IF_ERROR(r.Keys(node, "searcher",
                             {"name", "metric", "smaller_is_better", "max_trials", "max_length",
                              "num_rungs", "divisor", "max_concurrent_trials"}));
  if (!node["name"]) return r.Error(node, "searcher", "needs `name: grid | random | asha`");
  EDL_ASSIGN_OR_RETURN(std::string name, r.String(node["name"], "searcher.name"));
  if (name == "grid") {
    s->kind = SearcherKind::kGrid;
  } else if (name == "random") {
    s->kind = SearcherKind::kRandom;
  } else if (name == "asha") {
    s->kind = SearcherKind::kAsha;
  } else {
    return r.Error(node["name"], "searcher.name",
                   StrCat("'", name, "' is not one of grid, random, asha"));
  }
  if (!node["metric"]) return r.Error(node, "searcher", "needs `metric` (the one to optimize)");
  EDL_ASSIGN_OR_RETURN(s->metric, r.String(node["metric"], "searcher.metric"));
  if (node["smaller_is_better"]) {
    EDL_ASSIGN_OR_RETURN(s->smaller_is_better,
                         r.Bool(node["smaller_is_better"], "searcher.smaller_is_better"));
  }
  if (s->kind == SearcherKind::kGrid) {
    if (node["max_trials"]) {
      return r.Error(node["max_trials"], "searcher.max_trials",
                     "a grid search runs every point of the grid; set `count` on the ranges");
    }
  } else {
    if (!node["max_trials"]) return r.Error(node, "searcher", StrCat(name, " needs max_trials"));
    EDL_ASSIGN_OR_RETURN(
        s->max_trials, r.Number<int64_t>(node["max_trials"], "searcher.max_trials", "an integer"));
    if (s->max_trials < 1) {
      return r.Error(node["max_trials"], "searcher.max_trials", "must be at least 1");
    }
  }
  const YAML::Node length = node["max_length"];
  if (!length) {
    return r.Error(node, "searcher", "needs max_length: {epochs: N} or {records: N}");
  }
  EDL_RETURN_IF_ERROR(r.Keys(length, "searcher.max_length", {"epochs", "records"}));
  if (length.size() != 1) {
    return r.Error(length, "searcher.max_length", "give one of epochs and records");
  }
  if (length["epochs"]) {
    EDL_ASSIGN_OR_RETURN(
        s->max_length.epochs,
        r.Number<int64_t>(length["epochs"], "searcher.max_length.epochs", "an integer"));
    if (s->max_length.epochs < 1) {
      return r.Error(length, "searcher.max_length.epochs", "must be at least 1");
    }
  } else {
    EDL_ASSIGN_OR_RETURN(
        s->max_length.records,
        r.Number<int64_t>(length["records"], "searcher.max_length.records", "an integer"));
    if (s->max_length.records < 1) {
      return r.Error(length, "searcher.max_length.records", "must be at least 1");
    }
  }
  for (const char* asha_only : {"num_rungs", "divisor"}) {
    if (node[asha_only] && s->kind != SearcherKind::kAsha) {
      return r.Error(node[asha_only], StrCat("searcher.", asha_only),
                     StrCat("only the asha searcher takes it, not ", name));
    }
  }
  if (node["num_rungs"]) {
    EDL_ASSIGN_OR_RETURN(s->num_rungs,
                         r.Number<int64_t>(node["num_rungs"], "searcher.num_rungs", "an integer"));
    if (s->num_rungs < 1 || s->num_rungs > 10) {
      return r.Error(node["num_rungs"], "searcher.num_rungs", "must be from 1 to 10");
    }
  }
  if (node["divisor"]) {
    EDL_ASSIGN_OR_RETURN(s->divisor,
                         r.Number<double>(node["divisor"], "searcher.divisor", "a number"));
    if (!(s->divisor >= 2) || s->divisor != std::floor(s->divisor)) {
      return r.Error(node["divisor"], "searcher.divisor", "must be an integer of at least 2");
    }
  }
  if (node["max_concurrent_trials"]) {
    EDL_ASSIGN_OR_RETURN(s->max_concurrent_trials,
                         r.Number<int64_t>(node["max_concurrent_trials"],
                                           "searcher.max_concurrent_trials", "an integer"));
    if (s->max_concurrent_trials < 1) {
      return r.Error(node["max_concurrent_trials"], "searcher.max_concurrent_trials",
                     "must be at least 1");
    }
  }
  return absl::OkStatus();
}

StatusOr<ExperimentConfig> Load(const Reader& r, const YAML::Node& root, ExperimentConfig config) {
  EDL_RETURN_IF_ERROR(
      r.Keys(root, "",
             {"name", "description", "model_zoo", "trial", "data", "hyperparameters", "searcher",
              "resources", "job", "seed", "experiment_dir", "output"}));
  const std::string base = fs::path(config.path).parent_path().string();
  for (const char* required : {"model_zoo", "trial", "data", "hyperparameters", "searcher"}) {
    if (!root[required]) return r.Error(root, required, "missing (required)");
  }
  config.name = fs::path(config.path).stem().string();
  if (root["name"]) {
    EDL_ASSIGN_OR_RETURN(config.name, r.String(root["name"], "name"));
  }
  if (root["description"]) {
    EDL_ASSIGN_OR_RETURN(config.description, r.String(root["description"], "description"));
  }
  EDL_ASSIGN_OR_RETURN(std::string zoo, r.String(root["model_zoo"], "model_zoo"));
  config.model_zoo = Resolve(base, zoo);
  EDL_ASSIGN_OR_RETURN(config.trial, r.String(root["trial"], "trial"));

  const YAML::Node data = root["data"];
  EDL_RETURN_IF_ERROR(r.Keys(data, "data", {"training_data", "validation_data"}));
  if (!data["training_data"] || !data["validation_data"]) {
    return r.Error(data, "data",
                   "needs training_data and validation_data (trials are compared on the "
                   "validation data)");
  }
  EDL_ASSIGN_OR_RETURN(std::string training, r.String(data["training_data"], "data.training_data"));
  EDL_ASSIGN_OR_RETURN(std::string validation,
                       r.String(data["validation_data"], "data.validation_data"));
  config.training_data = ResolveList(base, training);
  config.validation_data = ResolveList(base, validation);

  const YAML::Node hp = root["hyperparameters"];
  if (!hp.IsMap() || hp.size() == 0) {
    return r.Error(hp, "hyperparameters", "expected a mapping of names to ranges");
  }
  std::vector<Hyperparameter> hparams;
  for (const auto& kv : hp) {
    EDL_ASSIGN_OR_RETURN(Hyperparameter h, ReadHyperparameter(r, kv.first.Scalar(), kv.second));
    hparams.push_back(std::move(h));
  }
  StatusOr<SearchSpace> space = SearchSpace::Create(std::move(hparams));
  if (!space.ok()) return Annotate(space.status(), r.file());
  config.hyperparameters = std::move(*space);

  EDL_RETURN_IF_ERROR(ReadSearcher(r, root["searcher"], &config.searcher));
  if (config.searcher.kind == SearcherKind::kGrid) {
    StatusOr<std::vector<Params>> grid = config.hyperparameters.Grid();
    if (!grid.ok()) return Annotate(grid.status(), r.file());
    config.searcher.max_trials = static_cast<int64_t>(grid->size());
  }

  config.max_workers = config.searcher.max_concurrent_trials;
  if (const YAML::Node res = root["resources"]; res) {
    EDL_RETURN_IF_ERROR(r.Keys(res, "resources", {"max_workers"}));
    if (res["max_workers"]) {
      EDL_ASSIGN_OR_RETURN(
          config.max_workers,
          r.Number<int64_t>(res["max_workers"], "resources.max_workers", "an integer"));
    }
  }
  if (config.max_workers < config.searcher.max_concurrent_trials) {
    return r.Error(
        root["resources"], "resources.max_workers",
        StrCat(config.max_workers, " workers cannot run ", config.searcher.max_concurrent_trials,
               " concurrent trials (searcher.max_concurrent_trials): each needs one"));
  }
  if (const YAML::Node job = root["job"]; job) {
    if (!job.IsMap()) return r.Error(job, "job", "expected a mapping of train flags to values");
    for (const auto& kv : job) {
      EDL_ASSIGN_OR_RETURN(std::string value,
                           r.String(kv.second, StrCat("job.", kv.first.Scalar())));
      config.job.emplace_back(kv.first.Scalar(), value);
    }
  }
  if (root["seed"]) {
    EDL_ASSIGN_OR_RETURN(config.seed, r.Number<uint64_t>(root["seed"], "seed", "an integer"));
  }
  if (root["experiment_dir"]) {
    EDL_ASSIGN_OR_RETURN(std::string dir, r.String(root["experiment_dir"], "experiment_dir"));
    config.experiment_dir = Resolve(base, dir);
  } else {
    config.experiment_dir =
        StrCat(ReadEnvironment().temp_dir, "/elasticdl-experiments/", config.name);
  }
  if (root["output"]) {
    EDL_ASSIGN_OR_RETURN(std::string out, r.String(root["output"], "output"));
    config.output = Resolve(base, out);
  } else {
    config.output = config.experiment_dir + "/best_model";
  }
  // The job settings are checked here too, before anything runs.
  EDL_RETURN_IF_ERROR(BaseJobArgs(config).status());
  return config;
}

// The settings an experiment decides for each trial's job.
const std::set<std::string>& ExperimentOwned() {
  static const auto* owned = new std::set<std::string>{"model_zoo",
                                                       "model_def",
                                                       "params",
                                                       "training_data",
                                                       "validation_data",
                                                       "num_epochs",
                                                       "num_workers",
                                                       "job_dir",
                                                       "job_name",
                                                       "output",
                                                       "checkpoint_dir",
                                                       "checkpoint_dir_for_init",
                                                       "trained_model",
                                                       "prediction_data",
                                                       "detach",
                                                       "no_progress",
                                                       "seed",
                                                       "dataset_fn",
                                                       "loss",
                                                       "optimizer",
                                                       "eval_metrics_fn"};
  return *owned;
}

// `text` into the JobArgs field of `setting`.
Status SetField(const client::JobSetting& setting, const std::string& text, JobArgs* args) {
  return std::visit(
      [&](auto member) -> Status {
        auto& field = args->*member;
        using T = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<T, std::string>) {
          field = text;
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text == "true" || text == "True" || text == "yes") {
            field = true;
          } else if (text == "false" || text == "False" || text == "no") {
            field = false;
          } else {
            return absl::InvalidArgumentError(StrCat("expected true or false, got '", text, "'"));
          }
          return absl::OkStatus();
        } else {
          char* end = nullptr;
          errno = 0;
          const long long v = std::strtoll(text.c_str(), &end, 10);
          if (text.empty() || *end != '\0' || errno != 0) {
            return absl::InvalidArgumentError(StrCat("expected an integer, got '", text, "'"));
          }
          if constexpr (std::is_same_v<T, std::optional<int64_t>> ||
                        std::is_same_v<T, std::optional<uint64_t>>) {
            field = static_cast<typename T::value_type>(v);
          } else {
            field = static_cast<T>(v);
          }
          return absl::OkStatus();
        }
      },
      setting.field);
}

}  // namespace

const char* SearcherKindName(SearcherKind kind) {
  switch (kind) {
    case SearcherKind::kGrid:
      return "grid";
    case SearcherKind::kRandom:
      return "random";
    case SearcherKind::kAsha:
      return "asha";
  }
  return "?";
}

StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path) {
  ExperimentConfig config;
  config.path = AbsolutePath(path);
  StatusOr<std::string> text = ReadFileToString(config.path);
  if (!text.ok()) return Annotate(text.status(), StrCat("--config=", path));
  config.text = *text;
  Reader reader(path);
  YAML::Node root;
  try {
    root = YAML::Load(config.text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return reader.Error(root, "", "expected a mapping at the top level");
  try {
    return Load(reader, root, std::move(config));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

StatusOr<JobArgs> BaseJobArgs(const ExperimentConfig& config) {
  JobArgs args;
  for (const auto& [key, value] : config.job) {
    const std::string where = StrCat(config.path, ": job.", key);
    if (ExperimentOwned().count(key) != 0) {
      return absl::InvalidArgumentError(
          StrCat(where, ": set by the experiment for each trial; it cannot be given here"));
    }
    const client::JobSetting* found = nullptr;
    for (const client::JobSetting& s : client::JobSettings()) {
      if ((s.commands & client::kTrainCmd) != 0 && client::FlagName(s) == "--" + key) found = &s;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          StrCat(where, ": not a setting of `elasticdl train` (see elasticdl train --help)"));
    }
    Status s = SetField(*found, value, &args);
    if (!s.ok()) return Annotate(s, where);
  }
  return args;
}

}  // namespace elasticdl::experiment
