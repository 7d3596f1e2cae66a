#include "master/early_stopping.h"

#include "common/strings.h"

namespace elasticdl::master {

std::optional<std::string> EarlyStopping::Observe(int64_t version,
                                                  const std::map<std::string, double>& metrics) {
  if (!enabled()) return std::nullopt;
  auto it = metrics.find(spec_.metric());
  if (it == metrics.end()) {
    return StrCat("early stopping watches metric '", spec_.metric(),
                  "', which the evaluation of model version ", version, " lacks");
  }
  const double v = it->second;
  const bool improved = !has_best_ || (spec_.maximize() ? v > best_ + spec_.min_delta()
                                                        : v < best_ - spec_.min_delta());
  if (improved) {
    has_best_ = true;
    best_ = v;
    best_version_ = version;
    without_ = 0;
    return std::nullopt;
  }
  ++without_;
  if (without_ >= spec_.patience()) return Reason();
  return std::nullopt;
}

std::string EarlyStopping::Reason() const {
  return StrCat("early stopping: ", spec_.metric(), " has not ",
                spec_.maximize() ? "risen" : "fallen", " by more than ", spec_.min_delta(), " for ",
                without_, " evaluation", without_ == 1 ? "" : "s", "; best ", best_,
                " at model version ", best_version_);
}

void EarlyStopping::Save(proto::TaskLedger* ledger) const {
  ledger->set_has_best_metric(has_best_);
  ledger->set_best_metric(best_);
  ledger->set_best_metric_version(best_version_);
  ledger->set_evaluations_without_improvement(without_);
}

void EarlyStopping::Load(const proto::TaskLedger& ledger) {
  has_best_ = ledger.has_best_metric();
  best_ = ledger.best_metric();
  best_version_ = ledger.best_metric_version();
  without_ = ledger.evaluations_without_improvement();
}

}  // namespace elasticdl::master
