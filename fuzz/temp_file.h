// A file of the fuzzer process's own under $TMPDIR, for targets whose parser
// reads a path: each input is written there first.
#ifndef ELASTICDL_FUZZ_TEMP_FILE_H_
#define ELASTICDL_FUZZ_TEMP_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"

namespace elasticdl::fuzz {

// Writes `data` to $TMPDIR/<name>.<pid><suffix> (the same path every call)
// and returns the path.
inline std::string WriteTempFile(const char* name, const char* suffix, const uint8_t* data,
                                 size_t size) {
  static const std::string path = [&] {
    const char* base = std::getenv("TMPDIR");
    return std::string(base ? base : "/tmp") + "/" + name + "." + std::to_string(::getpid()) +
           suffix;
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  EDL_FUZZ_CHECK(f != nullptr, "cannot write {}", path);
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace elasticdl::fuzz

#endif  // ELASTICDL_FUZZ_TEMP_FILE_H_
