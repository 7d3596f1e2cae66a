// The seed-writing mode every fuzzer here has: run a fuzzer binary with
//
//   recordio_fuzzer --write_seeds=fuzz/corpus/recordio
//
// and, instead of fuzzing, it writes a few small valid inputs into that folder
// and exits. libFuzzer ignores flags that start with "--", so the flag cannot
// clash with its own. The seeds are committed under fuzz/corpus/<target>/.
#ifndef ELASTICDL_FUZZ_SEED_MODE_H_
#define ELASTICDL_FUZZ_SEED_MODE_H_

#include <functional>
#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl::fuzz {

// Writes seeds into an existing folder.
using SeedWriter = std::function<Status(const std::string& dir)>;

// Call from LLVMFuzzerInitialize. If argv holds --write_seeds=DIR, creates DIR,
// runs `write` on it and exits the process (status 0 on success, 1 with the
// error on stderr otherwise); else returns and fuzzing goes on.
void HandleSeedFlag(int argc, char** argv, const SeedWriter& write);

// Defines the fuzzer's LLVMFuzzerInitialize, handling --write_seeds with
// `writer` (a SeedWriter).
#define EDL_FUZZ_SEED_WRITER(writer)                             \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) { \
    ::elasticdl::fuzz::HandleSeedFlag(*argc, *argv, (writer));   \
    return 0;                                                    \
  }

// Writes `contents` to dir/name.
Status WriteSeed(const std::string& dir, std::string_view name, std::string_view contents);

}  // namespace elasticdl::fuzz

#endif  // ELASTICDL_FUZZ_SEED_MODE_H_
