// Typed ids for expectations: WorkerIds({0, 1}).
#ifndef ELASTICDL_TESTING_IDS_H_
#define ELASTICDL_TESTING_IDS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "common/ids.h"

namespace elasticdl::testing {

inline std::vector<WorkerId> WorkerIds(std::initializer_list<int32_t> ids) {
  std::vector<WorkerId> out;
  for (int32_t id : ids) out.emplace_back(id);
  return out;
}

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_IDS_H_
