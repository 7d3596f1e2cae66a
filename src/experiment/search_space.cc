#include "experiment/search_space.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <set>

#include "common/strings.h"

namespace elasticdl::experiment {
namespace {

// One 64-bit mix of SplitMix64: decorrelates (seed, trial) pairs.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || (std::isalpha(static_cast<unsigned char>(s[0])) == 0 && s[0] != '_')) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// `count` evenly spaced points of [lo, hi]; one point: the middle.
std::vector<double> Linspace(double lo, double hi, int64_t count) {
  if (count == 1) return {(lo + hi) / 2};
  std::vector<double> points;
  points.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    points.push_back(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(count - 1));
  }
  return points;
}

Status Invalid(const Hyperparameter& h, const std::string& why) {
  return absl::InvalidArgumentError(StrCat("hyperparameters.", h.name, ": ", why));
}

Status Check(const Hyperparameter& h) {
  if (!IsIdentifier(h.name)) {
    return absl::InvalidArgumentError(StrCat(
        "hyperparameters: '", h.name, "' is not a name a trial can read (letters, digits, _)"));
  }
  switch (h.type) {
    case HparamType::kConst:
      return absl::OkStatus();
    case HparamType::kInt:
    case HparamType::kDouble:
    case HparamType::kLog:
      if (!std::isfinite(h.minval) || !std::isfinite(h.maxval)) {
        return Invalid(h, "minval and maxval must be finite numbers");
      }
      if (h.minval > h.maxval) {
        return Invalid(h, StrCat("empty range: minval ", h.minval, " > maxval ", h.maxval));
      }
      if (h.type == HparamType::kInt &&
          (h.minval != std::floor(h.minval) || h.maxval != std::floor(h.maxval))) {
        return Invalid(h, "an int range needs integer minval and maxval");
      }
      if (h.type == HparamType::kLog && !(h.base > 0 && h.base != 1)) {
        return Invalid(h, StrCat("base ", h.base, ": a log range needs a base > 0 other than 1"));
      }
      if (h.count < 0) return Invalid(h, StrCat("count ", h.count, " must be at least 1"));
      return absl::OkStatus();
    case HparamType::kCategorical:
      if (h.vals.empty()) return Invalid(h, "empty range: categorical vals has no values");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

const char* HparamTypeName(HparamType type) {
  switch (type) {
    case HparamType::kConst:
      return "const";
    case HparamType::kInt:
      return "int";
    case HparamType::kDouble:
      return "double";
    case HparamType::kLog:
      return "log";
    case HparamType::kCategorical:
      return "categorical";
  }
  return "?";
}

StatusOr<SearchSpace> SearchSpace::Create(std::vector<Hyperparameter> hparams) {
  std::set<std::string> seen;
  for (const Hyperparameter& h : hparams) {
    EDL_RETURN_IF_ERROR(Check(h));
    if (!seen.insert(h.name).second) {
      return absl::InvalidArgumentError(StrCat("hyperparameters: '", h.name, "' appears twice"));
    }
  }
  return SearchSpace(std::move(hparams));
}

bool SearchSpace::contains(const std::string& name) const {
  return std::any_of(hparams_.begin(), hparams_.end(),
                     [&](const Hyperparameter& h) { return h.name == name; });
}

std::vector<std::string> SearchSpace::names() const {
  std::vector<std::string> names;
  names.reserve(hparams_.size());
  for (const Hyperparameter& h : hparams_) names.push_back(h.name);
  return names;
}

Params SearchSpace::Sample(uint64_t seed, int64_t trial) const {
  std::mt19937_64 rng(Mix(Mix(seed) ^ static_cast<uint64_t>(trial)));
  Params params;
  for (const Hyperparameter& h : hparams_) {
    switch (h.type) {
      case HparamType::kConst:
        params.set(h.name, h.value);
        break;
      case HparamType::kInt: {
        std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(h.minval),
                                                 static_cast<int64_t>(h.maxval));
        params.set(h.name, d(rng));
        break;
      }
      case HparamType::kDouble: {
        std::uniform_real_distribution<double> d(h.minval, h.maxval);
        params.set(h.name, h.minval == h.maxval ? h.minval : d(rng));
        break;
      }
      case HparamType::kLog: {
        std::uniform_real_distribution<double> d(h.minval, h.maxval);
        params.set(h.name, std::pow(h.base, h.minval == h.maxval ? h.minval : d(rng)));
        break;
      }
      case HparamType::kCategorical: {
        std::uniform_int_distribution<size_t> d(0, h.vals.size() - 1);
        params.set(h.name, h.vals[d(rng)]);
        break;
      }
    }
  }
  return params;
}

StatusOr<std::vector<Params>> SearchSpace::Grid() const {
  std::vector<std::vector<Params::Value>> axes;
  for (const Hyperparameter& h : hparams_) {
    std::vector<Params::Value> axis;
    const bool range =
        h.type == HparamType::kInt || h.type == HparamType::kDouble || h.type == HparamType::kLog;
    if (range && h.count == 0) {
      return Invalid(h, StrCat("a grid search needs `count` (how many points of the ",
                               HparamTypeName(h.type), " range to try)"));
    }
    switch (h.type) {
      case HparamType::kConst:
        axis.push_back(h.value);
        break;
      case HparamType::kInt: {
        std::set<int64_t> points;  // rounded; fewer when the range is short
        for (double p : Linspace(h.minval, h.maxval, h.count)) {
          points.insert(static_cast<int64_t>(std::llround(p)));
        }
        for (int64_t p : points) axis.emplace_back(p);
        break;
      }
      case HparamType::kDouble:
        for (double p : Linspace(h.minval, h.maxval, h.count)) axis.emplace_back(p);
        break;
      case HparamType::kLog:
        for (double p : Linspace(h.minval, h.maxval, h.count))
          axis.emplace_back(std::pow(h.base, p));
        break;
      case HparamType::kCategorical:
        axis = h.vals;
        break;
    }
    axes.push_back(std::move(axis));
  }
  std::vector<Params> grid(1);
  for (size_t i = 0; i < axes.size(); ++i) {
    std::vector<Params> next;
    for (const Params& partial : grid) {
      for (const Params::Value& v : axes[i]) {
        Params p = partial;
        p.set(hparams_[i].name, v);
        next.push_back(std::move(p));
      }
    }
    grid = std::move(next);
  }
  return grid;
}

std::string DescribeValue(const Params::Value& value) {
  Params p;
  p.set("v", value);
  return p.ToString().substr(2);
}

}  // namespace elasticdl::experiment
