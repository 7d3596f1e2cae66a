// The searchers of an experiment: which trial trains next, and how far.
//
// A trial trains in rungs: rung k takes it from the end of rung k-1 (its
// checkpoint) to a budget of rung_epochs[k] epochs in all. Grid and random
// search have one rung, the whole max_length. ASHA (asynchronous successive
// halving, Li et al. 2018) has num_rungs with budgets max_length /
// divisor^(num_rungs-1-k): whenever a trial can start, the best trial of
// the highest rung that is in the top 1/divisor of its rung's results and
// not yet promoted goes on to the next rung; else a new trial starts at
// rung 0, until max_trials have started.
//
// A searcher is a deterministic state machine: the same calls in the same
// order give the same answers, so an experiment's journal replays it. Not
// thread-safe.
#ifndef ELASTICDL_EXPERIMENT_SEARCHER_H_
#define ELASTICDL_EXPERIMENT_SEARCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "elasticdl/status.h"
#include "elasticdl/zoo/params.h"
#include "experiment/experiment_config.h"
#include "experiment/search_space.h"

namespace elasticdl::experiment {

// Trial `trial` trains through rung `rung`.
struct RungRun {
  int64_t trial = 0;
  int rung = 0;
  friend bool operator==(const RungRun& a, const RungRun& b) {
    return a.trial == b.trial && a.rung == b.rung;
  }
};

// The total epochs a trial has trained at the end of each rung, from the
// searcher's max_length and the training data's size. INVALID_ARGUMENT when
// a rung's budget is not a whole number of epochs.
StatusOr<std::vector<int64_t>> RungEpochs(const SearcherConfig& searcher,
                                          int64_t records_per_epoch);

class Searcher {
 public:
  // grid: the space's grid (the config's max_trials is its size); random,
  // asha: trial i draws space.Sample(seed, i).
  static StatusOr<std::unique_ptr<Searcher>> Create(const SearcherConfig& config,
                                                    const SearchSpace& space, uint64_t seed);

  // What to run next, or nullopt when nothing can start until a running
  // rung ends (or everything is done). A new trial gets the next id.
  std::optional<RungRun> Next();
  // A rung ended with `metric`, or failed (nullopt: the trial stops there).
  void Completed(const RungRun& run, std::optional<double> metric);

  int num_rungs() const { return num_rungs_; }
  int64_t num_trials() const { return static_cast<int64_t>(trials_.size()); }
  const Params& hparams(int64_t trial) const { return trials_.at(trial); }
  // The metric trial reached at each rung it completed.
  const std::map<int, double>& results(int64_t trial) const;
  // Whether `a` is a better value of the metric than `b`.
  bool Better(double a, double b) const;
  // The best trial at the highest rung any trial completed; nullopt before
  // any rung completed.
  std::optional<RungRun> Best() const;

 private:
  Searcher(const SearcherConfig& config, const SearchSpace& space, uint64_t seed)
      : config_(config), space_(space), seed_(seed) {}

  // ASHA: a trial of rung k (the highest first) that may go on.
  std::optional<RungRun> Promotion();

  const SearcherConfig config_;
  const SearchSpace space_;
  const uint64_t seed_;
  int num_rungs_ = 1;
  std::vector<Params> grid_;
  std::vector<Params> trials_;
  // rung -> (trial -> metric), and the trials promoted out of each rung.
  std::map<int, std::map<int64_t, double>> rung_results_;
  std::map<int, std::set<int64_t>> promoted_;
  std::map<int64_t, std::map<int, double>> trial_results_;
};

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_SEARCHER_H_
