#include "python/python_error.h"

#include "python/interpreter.h"

namespace elasticdl::python {

namespace py = pybind11;

std::string DescribeError(const py::error_already_set& error) {
  try {
    return Runtime().attr("describe_exception")(error.value(), error.trace()).cast<std::string>();
  } catch (const py::error_already_set&) {
    return error.what();  // the report itself failed: pybind11's one line
  }
}

ZooCodeError ZooError(const py::error_already_set& error) {
  return ZooCodeError(DescribeError(error));
}

}  // namespace elasticdl::python
