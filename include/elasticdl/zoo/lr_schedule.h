// A learning rate that follows the model version. A zoo declares one with an
// optional entry (or the job with --lr_schedule, which wins):
//
//   LearningRateSchedule learning_rate_schedule() {
//     return LearningRateSchedule::Cosine(/*total=*/2000, /*min_lr=*/1e-4).WithWarmup(100);
//   }
//   ELASTICDL_REGISTER(learning_rate_schedule);
//
// The parameter servers apply it: the step that takes the model from version
// v to v + 1 uses LearningRate(lr0, v), lr0 being the optimizer's lr. The
// version is checkpointed with the model, so the schedule carries on through
// restarts of the master and of the parameter servers.
//
// With a warm-up of W versions the rate climbs linearly, lr0 * (v + 1) / W,
// for v < W; the decay then runs on v - W:
//   Step(every, gamma)                 lr0 * gamma^floor(v / every)
//   MultiStep({m1, m2, ...}, gamma)    lr0 * gamma^(how many milestones are <= v),
//                                      as PyTorch's MultiStepLR
//   Exponential(every, rate)           lr0 * rate^(v / every)
//   Exponential(every, rate, true)     lr0 * rate^floor(v / every)   (staircase)
//   Cosine(total, min_lr)              min_lr + (lr0 - min_lr) * (1 + cos(pi * t)) / 2,
//                                      t = min(v, total) / total
//   Cosine(total, min_lr, true)        the same with t = v / total: periodic, as
//                                      PyTorch's CosineAnnealingLR
//   Linear(total, start, end)          lr0 * (start + (end - start) * min(v, total) / total),
//                                      as PyTorch's LinearLR
//   Polynomial(total, power)           lr0 * (1 - min(v, total) / total)^power,
//                                      as PyTorch's PolynomialLR
//   Constant()                         lr0
//
// A schedule may give way to others at later versions, as PyTorch's
// SequentialLR: Linear(5, 0.01).Then(5, Cosine(95)) climbs for five versions,
// then runs the cosine on v - 5.
//
// The text form (--lr_schedule, Describe, Parse) is comma-separated
// key=value: "warmup=100,cosine=2000,min_lr=0.0001", "cosine=500,periodic=true",
// "step=1000,gamma=0.5", "milestones=3000:8000,gamma=0.1",
// "exponential=1000,rate=0.96,staircase=true", "warmup=50" (warm-up alone),
// "linear=5,start_factor=0.25[,end_factor=1]", "polynomial=100,power=2";
// the phases that follow are ';'-separated, each from its version `at` and
// with the same keys (a warm-up of its own included):
// "linear=5,start_factor=0.01;at=5,cosine=95", "at=M" (or "at=M,constant")
// being lr0.
// A plain value type; no LibTorch.
#ifndef ELASTICDL_ZOO_LR_SCHEDULE_H_
#define ELASTICDL_ZOO_LR_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

class LearningRateSchedule {
 public:
  enum class Decay { kConstant, kStep, kMultiStep, kExponential, kCosine, kLinear, kPolynomial };
  struct Phase;

  // The builders do not check their arguments; Validate() does (the client
  // calls it before the job starts). Defined below, where Phase is complete.
  static LearningRateSchedule Constant();
  static LearningRateSchedule Step(int64_t every, double gamma);
  // `milestones` in ascending order; one given twice decays twice there.
  static LearningRateSchedule MultiStep(std::vector<int64_t> milestones, double gamma);
  static LearningRateSchedule Exponential(int64_t every, double rate, bool staircase = false);
  static LearningRateSchedule Cosine(int64_t total, double min_lr = 0, bool periodic = false);
  // start_factor in (0, 1], end_factor in [0, 1].
  static LearningRateSchedule Linear(int64_t total, double start_factor, double end_factor = 1);
  static LearningRateSchedule Polynomial(int64_t total, double power = 1);
  // The same decay after a linear warm-up over `versions` versions (0: none).
  // The first phase's: a later phase that starts before it ends ends it.
  LearningRateSchedule WithWarmup(int64_t versions) const;
  // This schedule until version `at`, `next` from there on, applied to
  // version - at (PyTorch's SequentialLR with milestone `at`). `next`'s own
  // phases follow it, shifted by `at`; this schedule's phases from `at` on
  // are dropped.
  LearningRateSchedule Then(int64_t at, const LearningRateSchedule& next) const;

  Decay decay() const { return decay_; }
  int64_t warmup() const { return warmup_; }
  // Step and Exponential: versions per decay; Cosine, Linear and Polynomial:
  // their total versions.
  int64_t every() const { return every_; }
  // Step and MultiStep: gamma; Exponential: the rate; Linear: the start
  // factor; Polynomial: the power.
  double factor() const { return factor_; }
  // Linear: the factor it ends at.
  double end_factor() const { return end_factor_; }
  // MultiStep: the versions (after the warm-up) at which it decays.
  const std::vector<int64_t>& milestones() const { return milestones_; }
  bool staircase() const { return staircase_; }
  double min_lr() const { return min_lr_; }
  bool periodic() const { return periodic_; }
  // The phases after the first (none but with Then()), ascending by `at`;
  // none has phases of its own.
  const std::vector<Phase>& phases() const { return phases_; }
  bool is_constant() const;

  // INVALID_ARGUMENT naming the bad part: a negative warm-up, a period
  // (every, total) below 1, no milestones, a negative one or one below the
  // one before, gamma or rate outside (0, 1], a negative min_lr, a start
  // factor outside (0, 1] or an end factor outside [0, 1], a power not above
  // 0, anything not finite, or a phase from a version below 1 or not after
  // the phase before (the phase named).
  Status Validate() const;
  // INVALID_ARGUMENT when a min_lr exceeds the optimizer's `base_lr`.
  Status ValidateFor(double base_lr) const;

  // The learning rate of the step from model version `version` (>= 0) for the
  // optimizer's `base_lr`.
  double LearningRate(double base_lr, int64_t version) const;

  // The text form, e.g. "warmup=100,cosine=2000,min_lr=0.0001"; "constant"
  // for Constant(). Parse(Describe()) gives the schedule back.
  std::string Describe() const;
  // The text form back; INVALID_ARGUMENT naming the bad part ("unknown key
  // 'cosin'", "'step=x': not an integer", two decays, a key that belongs to
  // another decay), validated.
  static StatusOr<LearningRateSchedule> Parse(std::string_view text);

  bool operator==(const LearningRateSchedule& o) const;

 private:
  // The first phase's rate, at `version` counted from its start.
  double OwnRate(double base_lr, int64_t version) const;
  // What is wrong with the first phase's settings; empty if nothing.
  std::string OwnFault() const;
  std::string DescribeOwn() const;
  // One phase's text; `at` (a later phase's) receives its at=, which the
  // first phase (at == nullptr) may not have.
  static StatusOr<LearningRateSchedule> ParseOwn(std::string_view text, std::optional<int64_t>* at);

  Decay decay_ = Decay::kConstant;
  int64_t warmup_ = 0;
  int64_t every_ = 0;
  double factor_ = 1;
  bool staircase_ = false;
  double min_lr_ = 0;
  bool periodic_ = false;
  std::vector<int64_t> milestones_;
  double end_factor_ = 1;
  std::vector<Phase> phases_;
};

// From version `at` on, `schedule` applied to version - at.
struct LearningRateSchedule::Phase {
  int64_t at = 0;
  LearningRateSchedule schedule;

  bool operator==(const Phase& o) const { return at == o.at && schedule == o.schedule; }
};

inline LearningRateSchedule LearningRateSchedule::Constant() { return LearningRateSchedule(); }

inline LearningRateSchedule LearningRateSchedule::Step(int64_t every, double gamma) {
  LearningRateSchedule s;
  s.decay_ = Decay::kStep;
  s.every_ = every;
  s.factor_ = gamma;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::MultiStep(std::vector<int64_t> milestones,
                                                            double gamma) {
  LearningRateSchedule s;
  s.decay_ = Decay::kMultiStep;
  s.milestones_ = std::move(milestones);
  s.factor_ = gamma;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::Exponential(int64_t every, double rate,
                                                              bool staircase) {
  LearningRateSchedule s;
  s.decay_ = Decay::kExponential;
  s.every_ = every;
  s.factor_ = rate;
  s.staircase_ = staircase;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::Cosine(int64_t total, double min_lr,
                                                         bool periodic) {
  LearningRateSchedule s;
  s.decay_ = Decay::kCosine;
  s.every_ = total;
  s.min_lr_ = min_lr;
  s.periodic_ = periodic;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::Linear(int64_t total, double start_factor,
                                                         double end_factor) {
  LearningRateSchedule s;
  s.decay_ = Decay::kLinear;
  s.every_ = total;
  s.factor_ = start_factor;
  s.end_factor_ = end_factor;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::Polynomial(int64_t total, double power) {
  LearningRateSchedule s;
  s.decay_ = Decay::kPolynomial;
  s.every_ = total;
  s.factor_ = power;
  return s;
}

inline LearningRateSchedule LearningRateSchedule::WithWarmup(int64_t versions) const {
  LearningRateSchedule s = *this;
  s.warmup_ = versions;
  return s;
}

inline bool LearningRateSchedule::is_constant() const {
  return decay_ == Decay::kConstant && warmup_ == 0 && phases_.empty();
}

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_LR_SCHEDULE_H_
