// An exception from a zoo's code that carries its whole report: a Python
// exception with its traceback. ZooProgram reports its message whole, where
// it keeps only the first lines of other exceptions (c10's backtraces).
#ifndef ELASTICDL_ZOO_ZOO_CODE_ERROR_H_
#define ELASTICDL_ZOO_ZOO_CODE_ERROR_H_

#include <stdexcept>

namespace elasticdl {

class ZooCodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_ZOO_CODE_ERROR_H_
