// An experiment's journal: <experiment_dir>/journal.jsonl, one JSON object
// per line, appended and synced before the experiment acts on it. It holds
// the configuration the experiment started with, every rung started (trial,
// rung, hyperparameters, job directory) and ended (metric, records, state),
// stops and resumes, so that `elasticdl experiment resume` rebuilds the
// searcher and carries on from where the client died.
#ifndef ELASTICDL_EXPERIMENT_EXPERIMENT_JOURNAL_H_
#define ELASTICDL_EXPERIMENT_EXPERIMENT_JOURNAL_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::experiment {

// <dir>/journal.jsonl.
std::string ExperimentJournalPath(const std::string& dir);

// The events of the journal in `dir`, in order; empty when there is none.
// A last line cut short by a crash is left out (and cut off the file);
// any other line that does not parse is DATA_LOSS naming file and line.
StatusOr<std::vector<nlohmann::json>> ReadExperimentJournal(const std::string& dir);

// Appends to the journal of one experiment. Not thread-safe.
class ExperimentJournal {
 public:
  static StatusOr<ExperimentJournal> Open(const std::string& dir);
  ExperimentJournal(ExperimentJournal&& other) noexcept;
  ExperimentJournal& operator=(ExperimentJournal&&) = delete;
  ExperimentJournal(const ExperimentJournal&) = delete;
  ~ExperimentJournal();

  // Appends {"t": now, "event": event, ...fields} and syncs it to disk.
  Status Append(const std::string& event, const nlohmann::json& fields = nlohmann::json::object());

 private:
  ExperimentJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_EXPERIMENT_JOURNAL_H_
