// The typed parameter map of `--params "hidden_units=[10, 100, 20, 5],
// learning_rate=0.01"` (seed 003), handed to a model factory.
//
// Syntax: comma-separated `key=value` pairs. A value is an integer, a float,
// true/false, a string ('quoted', "quoted" or a bare word), or a list of one of
// those in brackets. Keys are identifiers and appear once. A list of integers
// and floats is a float list; an empty list is an empty integer list, which
// get<> reads as any list type.
#ifndef ELASTICDL_ZOO_PARAMS_H_
#define ELASTICDL_ZOO_PARAMS_H_

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl {

namespace internal {
template <typename T>
struct ParamsAccess;
}  // namespace internal

class Params {
 public:
  using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                             std::vector<double>, std::vector<std::string>>;

  Params() = default;

  // Parses the --params text. Errors name the offending key and position.
  static StatusOr<Params> Parse(std::string_view text);

  bool contains(const std::string& key) const { return values_.count(key) > 0; }
  const std::map<std::string, Value>& values() const { return values_; }
  void set(const std::string& key, Value value) { values_[key] = std::move(value); }

  // The value of `key` as T, or `default_value` when absent. An integer reads
  // as a double and an integer list as a double list; any other mismatch
  // throws std::invalid_argument naming the key, the expected and the actual
  // type (the zoo loader turns it into a status naming the entry).
  template <typename T>
  T get(const std::string& key, T default_value) const;
  // Like get, but the key must be present.
  template <typename T>
  T get(const std::string& key) const;

  // Canonical text that Parse reads back to an equal map (keys sorted).
  std::string ToString() const;

  friend bool operator==(const Params& a, const Params& b) { return a.values_ == b.values_; }

 private:
  template <typename T>
  friend struct internal::ParamsAccess;

  const Value* Find(const std::string& key) const;
  [[noreturn]] void TypeError(const std::string& key, const char* expected) const;

  std::map<std::string, Value> values_;
};

template <typename T>
T Params::get(const std::string& key, T default_value) const {
  const Value* v = Find(key);
  if (v == nullptr) return default_value;
  return internal::ParamsAccess<T>::Get(*this, key, *v);
}

template <typename T>
T Params::get(const std::string& key) const {
  const Value* v = Find(key);
  if (v == nullptr) throw std::invalid_argument("--params: missing required key '" + key + "'");
  return internal::ParamsAccess<T>::Get(*this, key, *v);
}

namespace internal {

template <typename T>
struct ParamsAccess {
  static_assert(!std::is_same_v<T, T>,
                "Params::get supports bool, int64_t, int, double, float, std::string and "
                "vectors of int64_t, int, double, float and std::string");
};

// Implemented in params.cc for the supported types.
#define ELASTICDL_PARAMS_ACCESS_(T)                                                     \
  template <>                                                                           \
  struct ParamsAccess<T> {                                                              \
    static T Get(const Params& params, const std::string& key, const Params::Value& v); \
  }
ELASTICDL_PARAMS_ACCESS_(bool);
ELASTICDL_PARAMS_ACCESS_(int64_t);
ELASTICDL_PARAMS_ACCESS_(int);
ELASTICDL_PARAMS_ACCESS_(double);
ELASTICDL_PARAMS_ACCESS_(float);
ELASTICDL_PARAMS_ACCESS_(std::string);
ELASTICDL_PARAMS_ACCESS_(std::vector<int64_t>);
ELASTICDL_PARAMS_ACCESS_(std::vector<int>);
ELASTICDL_PARAMS_ACCESS_(std::vector<double>);
ELASTICDL_PARAMS_ACCESS_(std::vector<float>);
ELASTICDL_PARAMS_ACCESS_(std::vector<std::string>);
#undef ELASTICDL_PARAMS_ACCESS_

}  // namespace internal
}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_PARAMS_H_
