// The hyperparameters of an experiment (seed 004's `hyperparameters:`
// section) and how trials draw from them: each is a constant, an integer or
// double range, a log-scale range (exponents of `base`) or a categorical
// list. A trial's hyperparameters are a Params map, the form a trial's
// build_model and make_data_loaders read (and `--params` writes).
#ifndef ELASTICDL_EXPERIMENT_SEARCH_SPACE_H_
#define ELASTICDL_EXPERIMENT_SEARCH_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/status.h"
#include "elasticdl/zoo/params.h"

namespace elasticdl::experiment {

enum class HparamType { kConst, kInt, kDouble, kLog, kCategorical };
// "const", "int", "double", "log", "categorical": as the config spells it.
const char* HparamTypeName(HparamType type);

struct Hyperparameter {
  std::string name;
  HparamType type = HparamType::kConst;
  // kConst: the value.
  Params::Value value;
  // kInt, kDouble: the range, both ends included. kLog: the exponents of
  // base; values run from base^minval to base^maxval.
  double minval = 0;
  double maxval = 0;
  double base = 10;
  // kCategorical: the choices (scalars).
  std::vector<Params::Value> vals;
  // Grid search: how many points of a range to try, evenly spaced (on the
  // log scale for kLog). 0: not set (a grid over a range needs it).
  int64_t count = 0;
};

// Checked hyperparameters. Copyable, immutable.
class SearchSpace {
 public:
  SearchSpace() = default;
  // Checks each (ranges ordered, categorical lists non-empty, names unique,
  // names usable as --params keys); errors name the hyperparameter.
  static StatusOr<SearchSpace> Create(std::vector<Hyperparameter> hparams);

  const std::vector<Hyperparameter>& hparams() const { return hparams_; }
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

  // Trial `trial`'s random draw: a function of (seed, trial) alone, so a
  // resumed experiment draws the same trials again.
  Params Sample(uint64_t seed, int64_t trial) const;
  // Every combination of the grid points, the first hyperparameter varying
  // slowest. INVALID_ARGUMENT naming a range without `count`.
  StatusOr<std::vector<Params>> Grid() const;

 private:
  explicit SearchSpace(std::vector<Hyperparameter> hparams) : hparams_(std::move(hparams)) {}
  std::vector<Hyperparameter> hparams_;
};

// "learning_rate=0.001, optimizer='adam'": a trial's values for tables and logs.
std::string DescribeValue(const Params::Value& value);

}  // namespace elasticdl::experiment

#endif  // ELASTICDL_EXPERIMENT_SEARCH_SPACE_H_
