#include "experiment/trial_check.h"

#include <fmt/format.h>

#include "absl/strings/str_split.h"
#include "client/zoo_source.h"
#include "common/environment.h"
#include "common/strings.h"
#include "master/data_source.h"
#include "python/python_zoo.h"
#include "zoo/zoo_builder.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"

namespace elasticdl::experiment {

StatusOr<int64_t> CountRecords(const std::string& data, const std::string& key) {
  int64_t records = 0;
  for (absl::string_view path : absl::StrSplit(data, ',', absl::SkipEmpty())) {
    StatusOr<std::vector<std::string>> files = master::ExpandDataPath(std::string(path));
    if (!files.ok()) return Annotate(files.status(), key);
    EDL_ASSIGN_OR_RETURN(std::vector<master::Shard> shards, master::OpenShards(*files, key));
    for (const master::Shard& s : shards) records += s.num_records;
  }
  return records;
}

StatusOr<std::vector<Params>> PlannedTrials(const ExperimentConfig& config) {
  if (config.searcher.kind == SearcherKind::kGrid) return config.hyperparameters.Grid();
  std::vector<Params> trials;
  for (int64_t i = 0; i < config.searcher.max_trials; ++i) {
    trials.push_back(config.hyperparameters.Sample(config.seed, i));
  }
  return trials;
}

Status CheckTrials(const ExperimentConfig& config, const std::vector<Params>& trials) {
  const std::string& file = config.path;
  StatusOr<client::ZooSource> source = client::ResolveZooSource(config.model_zoo);
  if (!source.ok()) return Annotate(source.status(), StrCat(file, ": model_zoo"));
  ZooBuildOptions build;
  build.zoo_dir = source->dir;
  build.cache_dir = ReadEnvironment().cache_dir;
  StatusOr<BuiltZoo> built = BuildZoo(build);
  if (!built.ok()) return Annotate(built.status(), StrCat(file, ": model_zoo"));
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library,
                       python::OpenZoo(built->library_path, built->python_dir));
  ZooProgramNames names;
  names.model_def = config.trial;
  const std::string defined = fmt::format("{}", fmt::join(config.hyperparameters.names(), ", "));
  for (size_t i = 0; i < trials.size(); ++i) {
    const std::string params = trials[i].ToString();
    StatusOr<ZooProgram> program = ZooProgram::Resolve(library, names, params);
    Status s = program.status();
    if (s.ok()) s = program->MakeModel().status();
    if (s.ok()) {
      StatusOr<std::map<std::string, std::unique_ptr<Metric>>> metrics = program->MakeMetrics();
      s = metrics.status();
      if (s.ok() && metrics->count(config.searcher.metric) == 0) {
        std::vector<std::string> have;
        for (const auto& [name, m] : *metrics) have.push_back(name);
        return absl::InvalidArgumentError(StrCat(
            file, ": searcher.metric: '", config.searcher.metric, "' is not a metric of ",
            config.trial, " (it reports: ",
            have.empty() ? std::string("none") : fmt::format("{}", fmt::join(have, ", ")), ")"));
      }
    }
    if (s.ok()) continue;
    const std::string message(s.message());
    constexpr std::string_view kMissing = "missing required key '";
    if (size_t at = message.find(kMissing); at != std::string::npos) {
      const size_t from = at + kMissing.size();
      const std::string key = message.substr(from, message.find('\'', from) - from);
      return absl::InvalidArgumentError(
          StrCat(file, ": the trial ", config.trial, " reads hyperparameter '", key,
                 "', which hyperparameters: does not define (it defines: ", defined, ")"));
    }
    if (s.code() == absl::StatusCode::kNotFound) {
      return Annotate(s, StrCat(file, ": trial"));
    }
    return Annotate(s, StrCat(file, ": trial ", i, " (", params, ")"));
  }
  return absl::OkStatus();
}

}  // namespace elasticdl::experiment
