// Python exceptions as ElasticDL reports them: 'Type: message' on the first
// line, then the traceback, with the zoo's files named relative to the zoo
// ("mnist/mnist_functional_api.py", line 12) and the runtime's glue left out.
#ifndef ELASTICDL_PYTHON_PYTHON_ERROR_H_
#define ELASTICDL_PYTHON_PYTHON_ERROR_H_

#include <torch/csrc/utils/pybind.h>  // pybind11 with LibTorch's tensor casters

#include <string>

#include "zoo/zoo_code_error.h"

namespace elasticdl::python {

// The report of `error`. Needs the GIL.
std::string DescribeError(const pybind11::error_already_set& error);

// ZooCodeError carrying DescribeError(error): what an entry throws, so that
// ZooProgram reports the traceback whole. Needs the GIL.
ZooCodeError ZooError(const pybind11::error_already_set& error);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PYTHON_ERROR_H_
