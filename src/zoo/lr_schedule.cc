#include "elasticdl/zoo/lr_schedule.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "zoo/lr_schedule_config.h"

namespace elasticdl {
namespace {

constexpr double kPi = 3.14159265358979323846;

Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(StrCat("learning-rate schedule: ", what));
}

// "1e-4" and "0.0001" alike; the shortest text that reads back exactly.
std::string Number(double v) { return fmt::format("{}", v); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// `text` as an int64 into *out; else why not: "not an integer" or "above the
// largest version, ...".
std::optional<std::string> ReadInt(std::string_view text, int64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (ec == std::errc::result_out_of_range) {
    return StrCat("above the largest version, ", std::numeric_limits<int64_t>::max());
  }
  if (ec != std::errc() || end != text.data() + text.size()) return "not an integer";
  return std::nullopt;
}

StatusOr<int64_t> ParseInt(std::string_view key, std::string_view value) {
  int64_t v = 0;
  if (std::optional<std::string> why = ReadInt(value, &v)) {
    return Bad(StrCat("'", key, "=", value, "': ", *why));
  }
  return v;
}

// "30:80" (spaces around an item allowed).
StatusOr<std::vector<int64_t>> ParseMilestones(std::string_view list) {
  std::vector<int64_t> out;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(list.data(), list.size()), ':')) {
    const std::string_view item = Trim(std::string_view(piece.data(), piece.size()));
    int64_t m = 0;
    if (std::optional<std::string> why = ReadInt(item, &m)) {
      return Bad(
          StrCat("'milestones=", list, "': item ", out.size() + 1, " ('", item, "') is ", *why));
    }
    out.push_back(m);
  }
  return out;
}

StatusOr<double> ParseDouble(std::string_view key, std::string_view value) {
  // std::from_chars for double is missing from GCC 12's libstdc++ in some
  // configurations; strtod on a copy is portable.
  const std::string copy(value);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size()) {
    return Bad(StrCat("'", key, "=", value, "': not a number"));
  }
  return v;
}

StatusOr<bool> ParseBool(std::string_view key, std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return Bad(StrCat("'", key, "=", value, "': expected true or false"));
}

// "3000:8000", the text form of milestones.
std::string MilestonesText(const std::vector<int64_t>& milestones) {
  return fmt::format("{}", fmt::join(milestones, ":"));
}

}  // namespace

Status LearningRateSchedule::Validate() const {
  if (warmup_ < 0) return Bad(StrCat("warmup=", warmup_, " must be >= 0"));
  switch (decay_) {
    case Decay::kConstant:
      return absl::OkStatus();
    case Decay::kStep:
    case Decay::kExponential: {
      const char* name = decay_ == Decay::kStep ? "step" : "exponential";
      const char* factor = decay_ == Decay::kStep ? "gamma" : "rate";
      if (every_ < 1) return Bad(StrCat(name, "=", every_, " must be >= 1"));
      if (!(factor_ > 0 && factor_ <= 1)) {
        return Bad(StrCat(factor, "=", Number(factor_), " must be in (0, 1]"));
      }
      return absl::OkStatus();
    }
    case Decay::kMultiStep: {
      if (milestones_.empty()) return Bad("milestones must name at least one version");
      const std::string text = StrCat("milestones=", MilestonesText(milestones_));
      for (size_t i = 0; i < milestones_.size(); ++i) {
        if (milestones_[i] < 0) {
          return Bad(StrCat(text, ": ", milestones_[i], " is below 0 (versions count from 0)"));
        }
        if (i > 0 && milestones_[i] < milestones_[i - 1]) {
          return Bad(StrCat(text, ": ", milestones_[i], " comes after ", milestones_[i - 1],
                            " (expected ascending order)"));
        }
      }
      if (!(factor_ > 0 && factor_ <= 1)) {
        return Bad(StrCat("gamma=", Number(factor_), " must be in (0, 1]"));
      }
      return absl::OkStatus();
    }
    case Decay::kCosine:
      if (every_ < 1) return Bad(StrCat("cosine=", every_, " must be >= 1"));
      if (!(min_lr_ >= 0) || !std::isfinite(min_lr_)) {
        return Bad(StrCat("min_lr=", Number(min_lr_), " must be >= 0"));
      }
      return absl::OkStatus();
  }
  return Bad("unknown decay");
}

Status LearningRateSchedule::ValidateFor(double base_lr) const {
  EDL_RETURN_IF_ERROR(Validate());
  if (decay_ == Decay::kCosine && min_lr_ > base_lr) {
    return Bad(StrCat("min_lr=", Number(min_lr_), " exceeds the optimizer's lr ", Number(base_lr)));
  }
  return absl::OkStatus();
}

double LearningRateSchedule::LearningRate(double base_lr, int64_t version) const {
  if (version < 0) version = 0;
  if (version < warmup_) {
    return base_lr * static_cast<double>(version + 1) / static_cast<double>(warmup_);
  }
  const int64_t v = version - warmup_;
  switch (decay_) {
    case Decay::kConstant:
      return base_lr;
    case Decay::kStep:
      return base_lr * std::pow(factor_, static_cast<double>(v / every_));
    case Decay::kMultiStep: {
      const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), v);
      return base_lr * std::pow(factor_, static_cast<double>(passed - milestones_.begin()));
    }
    case Decay::kExponential: {
      const double periods = staircase_ ? static_cast<double>(v / every_)
                                        : static_cast<double>(v) / static_cast<double>(every_);
      return base_lr * std::pow(factor_, periods);
    }
    case Decay::kCosine: {
      const double done =
          static_cast<double>(periodic_ ? v : std::min(v, every_)) / static_cast<double>(every_);
      return min_lr_ + (base_lr - min_lr_) * (1 + std::cos(kPi * done)) / 2;
    }
  }
  return base_lr;
}

std::string LearningRateSchedule::Describe() const {
  std::vector<std::string> parts;
  if (warmup_ != 0) parts.push_back(StrCat("warmup=", warmup_));
  switch (decay_) {
    case Decay::kConstant:
      break;
    case Decay::kStep:
      parts.push_back(StrCat("step=", every_, ",gamma=", Number(factor_)));
      break;
    case Decay::kMultiStep:
      parts.push_back(
          StrCat("milestones=", MilestonesText(milestones_), ",gamma=", Number(factor_)));
      break;
    case Decay::kExponential:
      parts.push_back(StrCat("exponential=", every_, ",rate=", Number(factor_)));
      if (staircase_) parts.push_back("staircase=true");
      break;
    case Decay::kCosine:
      parts.push_back(StrCat("cosine=", every_));
      if (min_lr_ != 0) parts.push_back(StrCat("min_lr=", Number(min_lr_)));
      if (periodic_) parts.push_back("periodic=true");
      break;
  }
  if (parts.empty()) return "constant";
  return fmt::format("{}", fmt::join(parts, ","));
}

StatusOr<LearningRateSchedule> LearningRateSchedule::Parse(std::string_view text) {
  LearningRateSchedule s;
  if (Trim(text) == "constant") return s;
  std::map<std::string, std::string, std::less<>> values;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    std::string_view part = Trim(std::string_view(piece.data(), piece.size()));
    if (part.empty()) return Bad(StrCat("empty part in '", text, "'"));
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) return Bad(StrCat("'", part, "': expected key=value"));
    std::string key(Trim(part.substr(0, eq)));
    std::string value(Trim(part.substr(eq + 1)));
    if (!values.emplace(key, value).second) return Bad(StrCat("'", key, "' given twice"));
  }
  // The decay is named by its key; each decay takes its own options.
  static const std::map<std::string, std::vector<std::string>, std::less<>> kDecays = {
      {"step", {"gamma"}},
      {"milestones", {"gamma"}},
      {"exponential", {"rate", "staircase"}},
      {"cosine", {"min_lr", "periodic"}}};
  std::optional<std::string> decay;
  for (const auto& [key, value] : values) {
    if (key == "warmup") continue;
    if (kDecays.count(key) != 0) {
      if (decay) return Bad(StrCat("two decays, '", *decay, "' and '", key, "'"));
      decay = key;
      continue;
    }
    bool option = false;
    for (const auto& [name, options] : kDecays) {
      for (const std::string& o : options) option = option || o == key;
    }
    if (!option) {
      return Bad(StrCat("unknown key '", key,
                        "' (expected warmup, step, milestones, gamma, exponential, rate, "
                        "staircase, cosine, min_lr, periodic)"));
    }
  }
  for (const auto& [key, value] : values) {
    if (key == "warmup" || kDecays.count(key) != 0) continue;
    const auto& allowed = kDecays.find(decay.value_or(""));
    bool fits =
        allowed != kDecays.end() &&
        std::find(allowed->second.begin(), allowed->second.end(), key) != allowed->second.end();
    if (!fits) {
      return Bad(
          StrCat("'", key, "' does not apply to ",
                 decay ? StrCat("'", *decay, "'") : std::string("a schedule without decay")));
    }
  }
  if (auto it = values.find("warmup"); it != values.end()) {
    EDL_ASSIGN_OR_RETURN(s.warmup_, ParseInt("warmup", it->second));
  }
  auto get = [&](const char* key) -> const std::string* {
    auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  };
  if (decay == "step") {
    s.decay_ = Decay::kStep;
    EDL_ASSIGN_OR_RETURN(s.every_, ParseInt("step", *get("step")));
    if (get("gamma") == nullptr) return Bad("'step' needs 'gamma'");
    EDL_ASSIGN_OR_RETURN(s.factor_, ParseDouble("gamma", *get("gamma")));
  } else if (decay == "milestones") {
    s.decay_ = Decay::kMultiStep;
    EDL_ASSIGN_OR_RETURN(s.milestones_, ParseMilestones(*get("milestones")));
    if (get("gamma") == nullptr) return Bad("'milestones' needs 'gamma'");
    EDL_ASSIGN_OR_RETURN(s.factor_, ParseDouble("gamma", *get("gamma")));
  } else if (decay == "exponential") {
    s.decay_ = Decay::kExponential;
    EDL_ASSIGN_OR_RETURN(s.every_, ParseInt("exponential", *get("exponential")));
    if (get("rate") == nullptr) return Bad("'exponential' needs 'rate'");
    EDL_ASSIGN_OR_RETURN(s.factor_, ParseDouble("rate", *get("rate")));
    if (get("staircase") != nullptr) {
      EDL_ASSIGN_OR_RETURN(s.staircase_, ParseBool("staircase", *get("staircase")));
    }
  } else if (decay == "cosine") {
    s.decay_ = Decay::kCosine;
    EDL_ASSIGN_OR_RETURN(s.every_, ParseInt("cosine", *get("cosine")));
    if (get("min_lr") != nullptr) {
      EDL_ASSIGN_OR_RETURN(s.min_lr_, ParseDouble("min_lr", *get("min_lr")));
    }
    if (get("periodic") != nullptr) {
      EDL_ASSIGN_OR_RETURN(s.periodic_, ParseBool("periodic", *get("periodic")));
    }
  }
  EDL_RETURN_IF_ERROR(s.Validate());
  return s;
}

proto::LearningRateScheduleConfig LrScheduleToProto(const LearningRateSchedule& s) {
  proto::LearningRateScheduleConfig c;
  c.set_warmup(s.warmup());
  switch (s.decay()) {
    case LearningRateSchedule::Decay::kConstant:
      break;
    case LearningRateSchedule::Decay::kStep:
      c.mutable_step()->set_every(s.every());
      c.mutable_step()->set_gamma(s.factor());
      break;
    case LearningRateSchedule::Decay::kMultiStep:
      c.mutable_multi_step()->mutable_milestones()->Add(s.milestones().begin(),
                                                        s.milestones().end());
      c.mutable_multi_step()->set_gamma(s.factor());
      break;
    case LearningRateSchedule::Decay::kExponential:
      c.mutable_exponential()->set_every(s.every());
      c.mutable_exponential()->set_rate(s.factor());
      c.mutable_exponential()->set_staircase(s.staircase());
      break;
    case LearningRateSchedule::Decay::kCosine:
      c.mutable_cosine()->set_total(s.every());
      c.mutable_cosine()->set_min_lr(s.min_lr());
      c.mutable_cosine()->set_periodic(s.periodic());
      break;
  }
  return c;
}

StatusOr<LearningRateSchedule> LrScheduleFromProto(const proto::LearningRateScheduleConfig& c) {
  LearningRateSchedule s;
  switch (c.decay_case()) {
    case proto::LearningRateScheduleConfig::kStep:
      s = LearningRateSchedule::Step(c.step().every(), c.step().gamma());
      break;
    case proto::LearningRateScheduleConfig::kMultiStep:
      s = LearningRateSchedule::MultiStep(
          {c.multi_step().milestones().begin(), c.multi_step().milestones().end()},
          c.multi_step().gamma());
      break;
    case proto::LearningRateScheduleConfig::kExponential:
      s = LearningRateSchedule::Exponential(c.exponential().every(), c.exponential().rate(),
                                            c.exponential().staircase());
      break;
    case proto::LearningRateScheduleConfig::kCosine:
      s = LearningRateSchedule::Cosine(c.cosine().total(), c.cosine().min_lr(),
                                       c.cosine().periodic());
      break;
    case proto::LearningRateScheduleConfig::DECAY_NOT_SET:
      break;
  }
  s = s.WithWarmup(c.warmup());
  EDL_RETURN_IF_ERROR(s.Validate());
  return s;
}

}  // namespace elasticdl
