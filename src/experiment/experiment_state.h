// What an experiment's journal says: the searcher rebuilt from it, and a
// row per trial (hyperparameters, state, rung, metric, records trained).
// The runner journals each event and then applies it here, so its state is
// always what a resumed experiment would rebuild; `experiment status`
// applies the journal alone. Not thread-safe.
#ifndef ELASTICDL_EXPERIMENT_EXPERIMENT_STATE_H_
#define ELASTICDL_EXPERIMENT_EXPERIMENT_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "elasticdl/status.h"
#include "experiment/experiment_config.h"
#include "experiment/searcher.h"

namespace elasticdl::experiment {

enum class TrialState {
  kRunning,    // a rung is being trained (or was, when the client died)
  kPaused,     // between rungs, waiting to be promoted (asha)
  kCompleted,  // trained its whole budget
  kStopped,    // asha did not promote it, and the experiment has ended
  kFailed,     // a rung's job failed; the message says why
};
const char* TrialStateName(TrialState state);

struct TrialRow {
  int64_t id = 0;
  Params hparams;
  TrialState state = TrialState::kRunning;
  // The last rung started, and the metric at the end of the last one
  // completed (nullopt before).
  int rung = 0;
  std::optional<double> metric;
  // Records trained by completed rungs, and the seconds they took.
  int64_t records = 0;
  double seconds = 0;
  std::string message;
  // The job directory of each rung started.
  std::map<int, std::string> job_dirs;
};

// What the pool of workers did: worker-seconds with a trial's workers
// alive, over pool-seconds (max_workers times the time trials ran).
struct PoolUsage {
  double busy_worker_seconds = 0;
  double pool_seconds = 0;
  double fraction() const { return pool_seconds > 0 ? busy_worker_seconds / pool_seconds : 0; }
};

class ExperimentState {
 public:
  static StatusOr<ExperimentState> Create(const ExperimentConfig& config);

  // Applies one journal event. Replayed (`live` false), a rung_started
  // event also asks the searcher for its next rung, which must be the one
  // journaled (FAILED_PRECONDITION otherwise: the searcher or the
  // configuration changed).
  Status Apply(const nlohmann::json& event, bool live);

  // The searcher's next rung (live runs), or nullopt.
  std::optional<RungRun> Next() { return searcher_->Next(); }
  const Searcher& searcher() const { return *searcher_; }

  const std::map<int64_t, TrialRow>& trials() const { return trials_; }
  // Rungs journaled as started but not ended: interrupted when the client
  // died or the experiment was stopped; resume runs them on.
  std::vector<RungRun> Unfinished() const;
  const PoolUsage& usage() const { return usage_; }
  // "running", "stopped", "finished", or "new" before any event.
  const std::string& status() const { return status_; }
  // The best trial (at the highest rung reached) and its rung.
  std::optional<RungRun> Best() const { return searcher_->Best(); }

 private:
  explicit ExperimentState(std::unique_ptr<Searcher> searcher) : searcher_(std::move(searcher)) {}

  std::unique_ptr<Searcher> searcher_;
  int num_rungs_ = 1;
  std::map<int64_t, TrialRow> trials_;
  PoolUsage usage_;
  std::string status_ = "new";
};

// Per-trial table: trial, state, rung, the hyperparameters' columns,
// records, seconds and the metric (its column named metric_<name> when a
// hyperparameter has its name); the CSV adds each trial's last message.
std::string TrialsTable(const ExperimentState& state, const std::string& metric);
std::string TrialsCsv(const ExperimentState& state, const std::string& metric);

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_EXPERIMENT_STATE_H_
