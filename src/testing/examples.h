// Building serialized tf.train.Example records in tests.
#ifndef ELASTICDL_TESTING_EXAMPLES_H_
#define ELASTICDL_TESTING_EXAMPLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/proto/example.pb.h"

namespace elasticdl::testing {

inline void AddFloats(proto::Example* e, const std::string& key, const std::vector<float>& v) {
  auto* list = (*e->mutable_features()->mutable_feature())[key].mutable_float_list();
  for (float x : v) list->add_value(x);
}
inline void AddInt64s(proto::Example* e, const std::string& key, const std::vector<int64_t>& v) {
  auto* list = (*e->mutable_features()->mutable_feature())[key].mutable_int64_list();
  for (int64_t x : v) list->add_value(x);
}
inline void AddBytes(proto::Example* e, const std::string& key, const std::vector<std::string>& v) {
  auto* list = (*e->mutable_features()->mutable_feature())[key].mutable_bytes_list();
  for (const auto& x : v) list->add_value(x);
}

// An Example with a 28x28 float `image` (values 0..255) and an int64 `label`.
inline std::string MnistExample(int64_t label, float fill = 1.0f) {
  proto::Example e;
  AddFloats(&e, "image", std::vector<float>(784, fill));
  AddInt64s(&e, "label", {label});
  return e.SerializeAsString();
}

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_EXAMPLES_H_
