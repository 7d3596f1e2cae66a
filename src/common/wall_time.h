// The wall clock as the job's records stamp it: seconds since the Unix epoch.
#ifndef ELASTICDL_COMMON_WALL_TIME_H_
#define ELASTICDL_COMMON_WALL_TIME_H_

#include <chrono>

namespace elasticdl {

inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_WALL_TIME_H_
