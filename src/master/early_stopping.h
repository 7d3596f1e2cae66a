// Early stopping: watches one metric over the evaluations that run during
// training and says when it has not improved for `patience` evaluations in
// a row. Its state goes into the task ledger, so a restarted master carries
// on counting. Not thread-safe (the TaskManager owns it).
#ifndef ELASTICDL_MASTER_EARLY_STOPPING_H_
#define ELASTICDL_MASTER_EARLY_STOPPING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::master {

class EarlyStopping {
 public:
  // `spec` with patience 0 watches nothing.
  explicit EarlyStopping(proto::EarlyStopping spec) : spec_(std::move(spec)) {}

  bool enabled() const { return spec_.patience() > 0; }

  // One finished evaluation of model `version`. Returns why training should
  // stop — "early stopping: accuracy has not improved by more than 0.001
  // for 3 evaluations; best 0.91 at model version 40" — once patience runs
  // out (and on every later call), or a message naming the metric when the
  // evaluation lacks it. nullopt: go on.
  std::optional<std::string> Observe(int64_t version, const std::map<std::string, double>& metrics);

  // The state, into and out of the task ledger's fields.
  void Save(proto::TaskLedger* ledger) const;
  void Load(const proto::TaskLedger& ledger);

  bool has_best() const { return has_best_; }
  double best() const { return best_; }
  int64_t best_version() const { return best_version_; }
  int evaluations_without_improvement() const { return without_; }

 private:
  std::string Reason() const;

  const proto::EarlyStopping spec_;
  bool has_best_ = false;
  double best_ = 0;
  int64_t best_version_ = 0;
  int without_ = 0;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_EARLY_STOPPING_H_
