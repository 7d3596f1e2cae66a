#include "experiment/experiment_state.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"

namespace elasticdl::experiment {

const char* TrialStateName(TrialState state) {
  switch (state) {
    case TrialState::kRunning:
      return "running";
    case TrialState::kPaused:
      return "paused";
    case TrialState::kCompleted:
      return "completed";
    case TrialState::kStopped:
      return "stopped";
    case TrialState::kFailed:
      return "failed";
  }
  return "?";
}

StatusOr<ExperimentState> ExperimentState::Create(const ExperimentConfig& config) {
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<Searcher> searcher,
                       Searcher::Create(config.searcher, config.hyperparameters, config.seed));
  ExperimentState state(std::move(searcher));
  state.num_rungs_ = state.searcher_->num_rungs();
  return state;
}

Status ExperimentState::Apply(const nlohmann::json& event, bool live) {
  const std::string kind = event.value("event", "");
  if (event.contains("busy_worker_seconds")) {
    usage_.busy_worker_seconds = event.value("busy_worker_seconds", 0.0);
    usage_.pool_seconds = event.value("pool_seconds", 0.0);
  }
  if (kind == "started" || kind == "resumed") {
    status_ = "running";
    return absl::OkStatus();
  }
  if (kind == "stopped") {
    status_ = "stopped";
    return absl::OkStatus();
  }
  if (kind == "finished") {
    status_ = "finished";
    for (auto& [id, row] : trials_) {
      if (row.state == TrialState::kPaused) row.state = TrialState::kStopped;
    }
    return absl::OkStatus();
  }
  const RungRun run{event.value("trial", int64_t{-1}), event.value("rung", -1)};
  if (kind == "rung_started") {
    if (!live) {
      std::optional<RungRun> next = searcher_->Next();
      if (!next || !(*next == run)) {
        return absl::FailedPreconditionError(StrCat(
            "the journal has trial ", run.trial, " start rung ", run.rung, " where the searcher ",
            next ? StrCat("starts trial ", next->trial, " rung ", next->rung)
                 : std::string("starts nothing"),
            ": the experiment's configuration or ElasticDL's searcher changed since"));
      }
    }
    TrialRow& row = trials_[run.trial];
    row.id = run.trial;
    row.hparams = searcher_->hparams(run.trial);
    row.state = TrialState::kRunning;
    row.rung = run.rung;
    row.job_dirs[run.rung] = event.value("job_dir", "");
    return absl::OkStatus();
  }
  if (kind == "rung_finished") {
    auto it = trials_.find(run.trial);
    if (it == trials_.end()) {
      return absl::DataLossError(
          StrCat("the journal ends rung ", run.rung, " of trial ", run.trial, ", never started"));
    }
    TrialRow& row = it->second;
    const bool ok = event.value("ok", false);
    std::optional<double> metric;
    if (ok && event.contains("metric") && event["metric"].is_number()) {
      metric = event["metric"].get<double>();
    }
    searcher_->Completed(run, metric);
    row.records += event.value("records", int64_t{0});
    row.seconds += event.value("seconds", 0.0);
    row.message = event.value("message", "");
    if (metric.has_value()) {
      row.metric = metric;
      row.state = run.rung == num_rungs_ - 1 ? TrialState::kCompleted : TrialState::kPaused;
    } else {
      row.state = TrialState::kFailed;
    }
    return absl::OkStatus();
  }
  return absl::DataLossError(StrCat("unknown journal event '", kind, "'"));
}

std::vector<RungRun> ExperimentState::Unfinished() const {
  std::vector<RungRun> runs;
  for (const auto& [id, row] : trials_) {
    if (row.state == TrialState::kRunning) runs.push_back({id, row.rung});
  }
  return runs;
}

namespace {

std::vector<std::vector<std::string>> Rows(const ExperimentState& state, const std::string& metric,
                                           bool csv) {
  std::vector<std::string> hparams;
  for (const auto& [id, row] : state.trials()) {
    for (const auto& [name, value] : row.hparams.values()) {
      if (std::find(hparams.begin(), hparams.end(), name) == hparams.end()) {
        hparams.push_back(name);
      }
    }
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"trial", "state", "rung"};
  header.insert(header.end(), hparams.begin(), hparams.end());
  for (const char* h : {"records", "seconds"}) header.emplace_back(h);
  // The metric's column; named apart from a hyperparameter of the same name.
  const bool clash = std::find(hparams.begin(), hparams.end(), metric) != hparams.end();
  header.push_back(clash ? "metric_" + metric : metric);
  if (csv) header.emplace_back("message");
  rows.push_back(header);
  for (const auto& [id, row] : state.trials()) {
    std::vector<std::string> r = {std::to_string(id), TrialStateName(row.state),
                                  std::to_string(row.rung)};
    for (const std::string& name : hparams) {
      auto v = row.hparams.values().find(name);
      std::string text = v == row.hparams.values().end() ? "" : DescribeValue(v->second);
      if (text.size() >= 2 && text.front() == '\'') text = text.substr(1, text.size() - 2);
      r.push_back(text);
    }
    r.push_back(std::to_string(row.records));
    r.push_back(fmt::format("{:.1f}", row.seconds));
    r.push_back(row.metric ? fmt::format("{:.6g}", *row.metric) : "");
    if (csv) r.push_back(row.message);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

std::string TrialsTable(const ExperimentState& state, const std::string& metric) {
  const auto rows = Rows(state, metric, /*csv=*/false);
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += fmt::format("{:<{}}", r[i], width[i]);
      if (i + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string TrialsCsv(const ExperimentState& state, const std::string& metric) {
  std::string out;
  for (const auto& r : Rows(state, metric, /*csv=*/true)) {
    for (size_t i = 0; i < r.size(); ++i) out += (i > 0 ? "," : "") + CsvField(r[i]);
    out += "\n";
  }
  return out;
}

}  // namespace elasticdl::experiment
