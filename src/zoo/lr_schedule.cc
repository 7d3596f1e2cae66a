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
#include "absl/strings/strip.h"
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

// What is wrong with phase `number` (2 for the first after the first) starting
// at `at` when the phase before it started at `after` (0 for the first);
// empty if nothing.
std::string PhaseOrderFault(size_t number, int64_t at, int64_t after) {
  if (at > after) return "";
  return StrCat("phase ", number, " (at=", at, "): ",
                number == 2 ? std::string("must start at version 1 or later")
                            : StrCat("must start after phase ", number - 1, " (at=", after, ")"));
}

// "3000:8000", the text form of milestones.
std::string MilestonesText(const std::vector<int64_t>& milestones) {
  return fmt::format("{}", fmt::join(milestones, ":"));
}

}  // namespace

std::string LearningRateSchedule::OwnFault() const {
  if (warmup_ < 0) return StrCat("warmup=", warmup_, " must be >= 0");
  auto period = [&](const char* name) -> std::string {
    return every_ < 1 ? StrCat(name, "=", every_, " must be >= 1") : "";
  };
  auto in = [](const char* name, double v, bool valid, const char* range) -> std::string {
    if (std::isinf(v)) return StrCat(name, "=", Number(v), " is not finite");
    return valid && std::isfinite(v) ? "" : StrCat(name, "=", Number(v), " must be ", range);
  };
  switch (decay_) {
    case Decay::kConstant:
      return "";
    case Decay::kStep:
    case Decay::kExponential: {
      const bool step = decay_ == Decay::kStep;
      if (std::string f = period(step ? "step" : "exponential"); !f.empty()) return f;
      return in(step ? "gamma" : "rate", factor_, factor_ > 0 && factor_ <= 1, "in (0, 1]");
    }
    case Decay::kMultiStep: {
      if (milestones_.empty()) return "milestones must name at least one version";
      const std::string text = StrCat("milestones=", MilestonesText(milestones_));
      for (size_t i = 0; i < milestones_.size(); ++i) {
        if (milestones_[i] < 0) {
          return StrCat(text, ": ", milestones_[i], " is below 0 (versions count from 0)");
        }
        if (i > 0 && milestones_[i] < milestones_[i - 1]) {
          return StrCat(text, ": ", milestones_[i], " comes after ", milestones_[i - 1],
                        " (expected ascending order)");
        }
      }
      return in("gamma", factor_, factor_ > 0 && factor_ <= 1, "in (0, 1]");
    }
    case Decay::kCosine:
      if (std::string f = period("cosine"); !f.empty()) return f;
      return in("min_lr", min_lr_, min_lr_ >= 0, ">= 0");
    case Decay::kLinear:
      if (std::string f = period("linear"); !f.empty()) return f;
      if (std::string f = in("start_factor", factor_, factor_ > 0 && factor_ <= 1, "in (0, 1]");
          !f.empty()) {
        return f;
      }
      return in("end_factor", end_factor_, end_factor_ >= 0 && end_factor_ <= 1, "in [0, 1]");
    case Decay::kPolynomial:
      if (std::string f = period("polynomial"); !f.empty()) return f;
      return in("power", factor_, factor_ > 0, "above 0");
  }
  return "unknown decay";
}

Status LearningRateSchedule::Validate() const {
  if (std::string fault = OwnFault(); !fault.empty()) return Bad(fault);
  int64_t after = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    const std::string phase = StrCat("phase ", i + 2, " (at=", p.at, ")");
    if (std::string fault = PhaseOrderFault(i + 2, p.at, after); !fault.empty()) return Bad(fault);
    after = p.at;
    if (!p.schedule.phases_.empty()) return Bad(StrCat(phase, ": has phases of its own"));
    if (std::string fault = p.schedule.OwnFault(); !fault.empty()) {
      return Bad(StrCat(phase, ": ", fault));
    }
  }
  return absl::OkStatus();
}

Status LearningRateSchedule::ValidateFor(double base_lr) const {
  EDL_RETURN_IF_ERROR(Validate());
  auto check = [&](const LearningRateSchedule& s, const std::string& where) {
    if (s.decay_ == Decay::kCosine && s.min_lr_ > base_lr) {
      return Bad(StrCat(where, "min_lr=", Number(s.min_lr_), " exceeds the optimizer's lr ",
                        Number(base_lr)));
    }
    return absl::OkStatus();
  };
  EDL_RETURN_IF_ERROR(check(*this, ""));
  for (size_t i = 0; i < phases_.size(); ++i) {
    EDL_RETURN_IF_ERROR(
        check(phases_[i].schedule, StrCat("phase ", i + 2, " (at=", phases_[i].at, "): ")));
  }
  return absl::OkStatus();
}

LearningRateSchedule LearningRateSchedule::Then(int64_t at,
                                                const LearningRateSchedule& next) const {
  LearningRateSchedule s = *this;
  s.phases_.erase(std::remove_if(s.phases_.begin(), s.phases_.end(),
                                 [&](const Phase& p) { return p.at >= at; }),
                  s.phases_.end());
  LearningRateSchedule first = next;
  first.phases_.clear();
  s.phases_.push_back(Phase{at, std::move(first)});
  for (const Phase& p : next.phases_) {
    // Beyond the versions (through the C++ API alone): held at the end.
    int64_t from = 0;
    if (__builtin_add_overflow(at, p.at, &from)) {
      from = at > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
    }
    s.phases_.push_back(Phase{from, p.schedule});
  }
  return s;
}

bool LearningRateSchedule::operator==(const LearningRateSchedule& o) const {
  return decay_ == o.decay_ && warmup_ == o.warmup_ && every_ == o.every_ && factor_ == o.factor_ &&
         staircase_ == o.staircase_ && min_lr_ == o.min_lr_ && periodic_ == o.periodic_ &&
         milestones_ == o.milestones_ && end_factor_ == o.end_factor_ && phases_ == o.phases_;
}

double LearningRateSchedule::LearningRate(double base_lr, int64_t version) const {
  if (version < 0) version = 0;
  // The last phase begun by `version`, if any.
  const auto after = std::upper_bound(phases_.begin(), phases_.end(), version,
                                      [](int64_t v, const Phase& p) { return v < p.at; });
  if (after != phases_.begin()) {
    const Phase& p = *std::prev(after);
    return p.schedule.OwnRate(base_lr, version - p.at);
  }
  return OwnRate(base_lr, version);
}

double LearningRateSchedule::OwnRate(double base_lr, int64_t version) const {
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
    case Decay::kLinear:  // in PyTorch's order of operations
      return base_lr *
             (factor_ + (end_factor_ - factor_) * static_cast<double>(std::min(v, every_)) /
                            static_cast<double>(every_));
    case Decay::kPolynomial:
      return base_lr *
             std::pow(1.0 - static_cast<double>(std::min(v, every_)) / static_cast<double>(every_),
                      factor_);
  }
  return base_lr;
}

std::string LearningRateSchedule::Describe() const {
  std::string out = DescribeOwn();
  for (const Phase& p : phases_) {
    const std::string own = p.schedule.DescribeOwn();
    absl::StrAppend(&out, ";at=", p.at, own == "constant" ? "" : StrCat(",", own));
  }
  return out;
}

std::string LearningRateSchedule::DescribeOwn() const {
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
    case Decay::kLinear:
      parts.push_back(StrCat("linear=", every_, ",start_factor=", Number(factor_)));
      if (end_factor_ != 1) parts.push_back(StrCat("end_factor=", Number(end_factor_)));
      break;
    case Decay::kPolynomial:
      parts.push_back(StrCat("polynomial=", every_));
      if (factor_ != 1) parts.push_back(StrCat("power=", Number(factor_)));
      break;
  }
  if (parts.empty()) return "constant";
  return fmt::format("{}", fmt::join(parts, ","));
}

StatusOr<LearningRateSchedule> LearningRateSchedule::Parse(std::string_view text) {
  std::vector<absl::string_view> pieces =
      absl::StrSplit(absl::string_view(text.data(), text.size()), ';');
  LearningRateSchedule s;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string_view phase = Trim(std::string_view(pieces[i].data(), pieces[i].size()));
    if (phase.empty()) {
      if (pieces.size() == 1) {
        return Bad("the text is empty (expected e.g. 'warmup=100,cosine=2000' or 'constant')");
      }
      return Bad(StrCat("phase ", i + 1, " of '", text, "' is empty"));
    }
    if (i == 0) {
      EDL_ASSIGN_OR_RETURN(s, ParseOwn(phase, nullptr));
      continue;
    }
    std::optional<int64_t> at;
    StatusOr<LearningRateSchedule> next = ParseOwn(phase, &at);
    if (next.ok() && !at) next = Bad("needs at=VERSION, the version it starts from");
    if (!next.ok()) {
      return Bad(StrCat("phase ", i + 1, " ('", phase, "'): ",
                        absl::StripPrefix(next.status().message(), "learning-rate schedule: ")));
    }
    const int64_t after = s.phases_.empty() ? 0 : s.phases_.back().at;
    if (std::string fault = PhaseOrderFault(i + 1, *at, after); !fault.empty()) return Bad(fault);
    s = s.Then(*at, *next);
  }
  EDL_RETURN_IF_ERROR(s.Validate());
  return s;
}

StatusOr<LearningRateSchedule> LearningRateSchedule::ParseOwn(std::string_view text,
                                                              std::optional<int64_t>* at) {
  LearningRateSchedule s;
  if (at == nullptr && text == "constant") return s;
  std::map<std::string, std::string, std::less<>> values;
  bool constant = false;  // a later phase's "at=N,constant"
  for (absl::string_view piece : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    std::string_view part = Trim(std::string_view(piece.data(), piece.size()));
    if (part.empty()) return Bad(StrCat("empty part in '", text, "'"));
    if (part == "constant" && at != nullptr && !constant) {
      constant = true;
      continue;
    }
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) return Bad(StrCat("'", part, "': expected key=value"));
    std::string key(Trim(part.substr(0, eq)));
    std::string value(Trim(part.substr(eq + 1)));
    if (!values.emplace(key, value).second) return Bad(StrCat("'", key, "' given twice"));
  }
  if (auto it = values.find("at"); it != values.end()) {
    if (at == nullptr) {
      return Bad(StrCat("'at=", it->second,
                        "' starts a later phase: put it after a ';' (e.g. "
                        "'linear=5,start_factor=0.1;at=5,cosine=95')"));
    }
    EDL_ASSIGN_OR_RETURN(*at, ParseInt("at", it->second));
    values.erase(it);
  }
  if (constant && !values.empty()) {
    return Bad(
        StrCat("'constant' takes no other keys than at= ('", values.begin()->first, "' given)"));
  }
  // The decay is named by its key; each decay takes its own options.
  static const std::map<std::string, std::vector<std::string>, std::less<>> kDecays = {
      {"step", {"gamma"}},
      {"milestones", {"gamma"}},
      {"exponential", {"rate", "staircase"}},
      {"cosine", {"min_lr", "periodic"}},
      {"linear", {"start_factor", "end_factor"}},
      {"polynomial", {"power"}}};
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
                        "staircase, cosine, min_lr, periodic, linear, start_factor, end_factor, "
                        "polynomial, power, at)"));
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
  } else if (decay == "linear") {
    s.decay_ = Decay::kLinear;
    EDL_ASSIGN_OR_RETURN(s.every_, ParseInt("linear", *get("linear")));
    if (get("start_factor") == nullptr) return Bad("'linear' needs 'start_factor'");
    EDL_ASSIGN_OR_RETURN(s.factor_, ParseDouble("start_factor", *get("start_factor")));
    if (get("end_factor") != nullptr) {
      EDL_ASSIGN_OR_RETURN(s.end_factor_, ParseDouble("end_factor", *get("end_factor")));
    }
  } else if (decay == "polynomial") {
    s.decay_ = Decay::kPolynomial;
    EDL_ASSIGN_OR_RETURN(s.every_, ParseInt("polynomial", *get("polynomial")));
    if (get("power") != nullptr) {
      EDL_ASSIGN_OR_RETURN(s.factor_, ParseDouble("power", *get("power")));
    }
  }
  if (std::string fault = s.OwnFault(); !fault.empty()) return Bad(fault);
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
    case LearningRateSchedule::Decay::kLinear:
      c.mutable_linear()->set_total(s.every());
      c.mutable_linear()->set_start_factor(s.factor());
      c.mutable_linear()->set_end_factor(s.end_factor());
      break;
    case LearningRateSchedule::Decay::kPolynomial:
      c.mutable_polynomial()->set_total(s.every());
      c.mutable_polynomial()->set_power(s.factor());
      break;
  }
  for (const LearningRateSchedule::Phase& p : s.phases()) {
    proto::LearningRatePhase* phase = c.add_phases();
    phase->set_at(p.at);
    *phase->mutable_schedule() = LrScheduleToProto(p.schedule);
  }
  return c;
}

namespace {

// One phase's settings, not validated.
LearningRateSchedule OwnFromProto(const proto::LearningRateScheduleConfig& c) {
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
    case proto::LearningRateScheduleConfig::kLinear:
      s = LearningRateSchedule::Linear(c.linear().total(), c.linear().start_factor(),
                                       c.linear().end_factor());
      break;
    case proto::LearningRateScheduleConfig::kPolynomial:
      s = LearningRateSchedule::Polynomial(c.polynomial().total(), c.polynomial().power());
      break;
    case proto::LearningRateScheduleConfig::DECAY_NOT_SET:
      break;
  }
  return s.WithWarmup(c.warmup());
}

}  // namespace

StatusOr<LearningRateSchedule> LrScheduleFromProto(const proto::LearningRateScheduleConfig& c) {
  LearningRateSchedule s = OwnFromProto(c);
  for (const proto::LearningRatePhase& p : c.phases()) {
    if (p.schedule().phases_size() != 0) {
      return Bad(
          StrCat("phase ", s.phases().size() + 2, " (at=", p.at(), "): has phases of its own"));
    }
    const LearningRateSchedule next = OwnFromProto(p.schedule());
    const int64_t after = s.phases().empty() ? 0 : s.phases().back().at;
    if (std::string fault = PhaseOrderFault(s.phases().size() + 2, p.at(), after); !fault.empty()) {
      return Bad(fault);
    }
    s = s.Then(p.at(), next);
  }
  EDL_RETURN_IF_ERROR(s.Validate());
  return s;
}

}  // namespace elasticdl
