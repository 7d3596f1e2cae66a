#include "experiment/searcher.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"

namespace elasticdl::experiment {

StatusOr<std::vector<int64_t>> RungEpochs(const SearcherConfig& searcher,
                                          int64_t records_per_epoch) {
  if (records_per_epoch <= 0) {
    return absl::InvalidArgumentError("the training data holds no records");
  }
  const int rungs = searcher.kind == SearcherKind::kAsha ? static_cast<int>(searcher.num_rungs) : 1;
  const bool in_records = searcher.max_length.records > 0;
  const int64_t total = in_records ? searcher.max_length.records : searcher.max_length.epochs;
  const std::string unit = in_records ? "records" : "epochs";
  std::vector<int64_t> epochs;
  double factor = 1;
  for (int k = 1; k < rungs; ++k) factor *= searcher.divisor;
  for (int k = 0; k < rungs; ++k) {
    const double budget = static_cast<double>(total) / factor;
    const double in_epochs = in_records ? budget / static_cast<double>(records_per_epoch) : budget;
    if (in_epochs < 1 || in_epochs != std::floor(in_epochs)) {
      std::string why = StrCat("rung ", k, "'s budget is ", budget, " ", unit);
      if (rungs > 1) {
        why += StrCat(" (max_length ", total, " / divisor ", searcher.divisor, "^", rungs - 1 - k,
                      ")");
      }
      return absl::InvalidArgumentError(StrCat(
          "searcher.max_length: ", why, ", not a whole number of epochs of the training data (",
          records_per_epoch, " records): trials train whole epochs; make max_length a multiple of ",
          static_cast<int64_t>(factor) * (in_records ? records_per_epoch : 1), " ", unit,
          rungs > 1 ? " or use fewer rungs" : ""));
    }
    epochs.push_back(static_cast<int64_t>(in_epochs));
    factor /= searcher.divisor;
  }
  return epochs;
}

StatusOr<std::unique_ptr<Searcher>> Searcher::Create(const SearcherConfig& config,
                                                     const SearchSpace& space, uint64_t seed) {
  std::unique_ptr<Searcher> s(new Searcher(config, space, seed));
  if (config.kind == SearcherKind::kGrid) {
    EDL_ASSIGN_OR_RETURN(s->grid_, space.Grid());
  }
  if (config.kind == SearcherKind::kAsha) s->num_rungs_ = static_cast<int>(config.num_rungs);
  return s;
}

bool Searcher::Better(double a, double b) const {
  return config_.smaller_is_better ? a < b : a > b;
}

std::optional<RungRun> Searcher::Promotion() {
  for (int k = num_rungs_ - 2; k >= 0; --k) {
    const auto results = rung_results_.find(k);
    if (results == rung_results_.end()) continue;
    std::vector<std::pair<double, int64_t>> ranked;
    for (const auto& [trial, metric] : results->second) ranked.emplace_back(metric, trial);
    // Best first; ties to the older trial, so the order is deterministic.
    std::sort(ranked.begin(), ranked.end(), [this](const auto& a, const auto& b) {
      if (a.first != b.first) return Better(a.first, b.first);
      return a.second < b.second;
    });
    const size_t top = static_cast<size_t>(static_cast<double>(ranked.size()) / config_.divisor);
    std::set<int64_t>& promoted = promoted_[k];
    for (size_t i = 0; i < top; ++i) {
      if (promoted.count(ranked[i].second) == 0) {
        promoted.insert(ranked[i].second);
        return RungRun{ranked[i].second, k + 1};
      }
    }
  }
  return std::nullopt;
}

std::optional<RungRun> Searcher::Next() {
  if (config_.kind == SearcherKind::kAsha) {
    if (std::optional<RungRun> run = Promotion()) return run;
  }
  if (num_trials() >= config_.max_trials) return std::nullopt;
  const int64_t id = num_trials();
  trials_.push_back(config_.kind == SearcherKind::kGrid ? grid_.at(id) : space_.Sample(seed_, id));
  return RungRun{id, 0};
}

void Searcher::Completed(const RungRun& run, std::optional<double> metric) {
  if (!metric.has_value()) return;
  rung_results_[run.rung][run.trial] = *metric;
  trial_results_[run.trial][run.rung] = *metric;
}

const std::map<int, double>& Searcher::results(int64_t trial) const {
  static const auto* none = new std::map<int, double>;
  auto it = trial_results_.find(trial);
  return it == trial_results_.end() ? *none : it->second;
}

std::optional<RungRun> Searcher::Best() const {
  if (rung_results_.empty()) return std::nullopt;
  const auto& [rung, results] = *rung_results_.rbegin();
  std::optional<RungRun> best;
  double best_metric = 0;
  for (const auto& [trial, metric] : results) {
    if (!best || Better(metric, best_metric)) {
      best = RungRun{trial, rung};
      best_metric = metric;
    }
  }
  return best;
}

}  // namespace elasticdl::experiment
