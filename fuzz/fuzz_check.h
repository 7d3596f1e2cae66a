// Property checks inside fuzz targets. A failed check prints what broke and
// aborts; libFuzzer reports the abort as a crash and saves the input.
#ifndef ELASTICDL_FUZZ_FUZZ_CHECK_H_
#define ELASTICDL_FUZZ_FUZZ_CHECK_H_

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace elasticdl::fuzz {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition,
                                     const std::string& message) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n  %s\n", file, line, condition,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace elasticdl::fuzz

// EDL_FUZZ_CHECK(cond, "format {}", args...): aborts with the formatted message
// unless `cond` holds.
#define EDL_FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      ::elasticdl::fuzz::CheckFailed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
    }                                                                                      \
  } while (false)

#endif  // ELASTICDL_FUZZ_FUZZ_CHECK_H_
