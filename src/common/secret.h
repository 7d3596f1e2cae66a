// Secrets: random ones (tokens, login codes, sessions) and comparing them.
#ifndef ELASTICDL_COMMON_SECRET_H_
#define ELASTICDL_COMMON_SECRET_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl {

// `bytes` random bytes from the kernel (getrandom), as lower-case hex.
StatusOr<std::string> RandomHex(size_t bytes);

// Compares without returning early, so the time taken does not tell how
// much of a guess was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_SECRET_H_
