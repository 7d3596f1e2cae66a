#include "common/finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace elasticdl {
namespace {

template <typename T>
std::vector<T> Values(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i % 7 == 0 ? -1.0 : 1.0) * i * 1e-3);
  if (n > 0) v[0] = std::numeric_limits<T>::max();
  if (n > 1) v[1] = std::numeric_limits<T>::denorm_min();
  if (n > 2) v[2] = -0.0;
  return v;
}

template <typename T>
bool Finite(const std::vector<T>& v) {
  if constexpr (sizeof(T) == 4) return AllFiniteFloat32(v.data(), v.size());
  return AllFiniteFloat64(v.data(), v.size());
}

template <typename T>
void ChecksEveryPosition() {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{1023}, size_t{1024}, size_t{5000}}) {
    std::vector<T> v = Values<T>(n);
    EXPECT_TRUE(Finite(v)) << n;
    for (T bad : {std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                  std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::signaling_NaN()}) {
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        if (at >= n) continue;
        std::vector<T> w = v;
        w[at] = bad;
        EXPECT_FALSE(Finite(w)) << "n=" << n << " at=" << at << " value=" << bad;
      }
    }
  }
}

TEST(FiniteTest, Float32) { ChecksEveryPosition<float>(); }
TEST(FiniteTest, Float64) { ChecksEveryPosition<double>(); }

TEST(FiniteTest, AnyAlignment) {
  std::vector<float> v = Values<float>(100);
  std::vector<unsigned char> bytes(v.size() * sizeof(float) + 1);
  std::memcpy(bytes.data() + 1, v.data(), v.size() * sizeof(float));
  EXPECT_TRUE(AllFiniteFloat32(bytes.data() + 1, v.size()));
  v[57] = std::nanf("");
  std::memcpy(bytes.data() + 1, v.data(), v.size() * sizeof(float));
  EXPECT_FALSE(AllFiniteFloat32(bytes.data() + 1, v.size()));
}

}  // namespace
}  // namespace elasticdl
