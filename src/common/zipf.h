// Random draws that need no more state than a word: SplitMix64 as a
// generator, and Zipf-distributed ranks over any number of values. Used to
// generate data whose every line is a function of (seed, line), and ids
// shaped like real categorical features.
#ifndef ELASTICDL_COMMON_ZIPF_H_
#define ELASTICDL_COMMON_ZIPF_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "elasticdl/seed.h"

namespace elasticdl {

// SplitMix64 as a generator: one word of state, so every line of a file can
// have its own.
class SplitMix64Rng {
 public:
  explicit SplitMix64Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // In [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Zipf over 1..n by rejection-inversion (Hoermann and Derflinger 1996, as in
// Apache Commons RNG): O(1) time and memory whatever n.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double exponent) : n_(n), exponent_(exponent) {
    h_integral_x1_ = HIntegral(1.5) - 1;
    h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
    s_ = 2 - HIntegralInverse(HIntegral(2.5) - H(2));
  }
  // A rank in [0, n): 0 the most frequent.
  uint64_t operator()(SplitMix64Rng& rng) const {
    if (n_ == 1) return 0;
    for (;;) {
      double u = h_integral_n_ + rng.Uniform() * (h_integral_x1_ - h_integral_n_);
      double x = HIntegralInverse(u);
      auto k = static_cast<uint64_t>(std::clamp(x + 0.5, 1.0, static_cast<double>(n_)));
      if (static_cast<double>(k) - x <= s_ ||
          u >= HIntegral(static_cast<double>(k) + 0.5) - H(static_cast<double>(k))) {
        return k - 1;
      }
    }
  }

 private:
  static double Helper1(double x) {
    return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
  }
  static double Helper2(double x) {
    return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
  }
  double H(double x) const { return std::exp(-exponent_ * std::log(x)); }
  double HIntegral(double x) const {
    double log_x = std::log(x);
    return Helper2((1 - exponent_) * log_x) * log_x;
  }
  double HIntegralInverse(double x) const {
    double t = std::max(x * (1 - exponent_), -1.0);
    return std::exp(Helper1(t) * x);
  }

  uint64_t n_;
  double exponent_;
  double h_integral_x1_, h_integral_n_, s_;
};

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_ZIPF_H_
