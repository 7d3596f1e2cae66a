// What the process's Python interpreter begins each line of its output with
// (print(), warnings, tracebacks): the process's log label, "[worker-1] ",
// so that a model file's lines read as the process's own. Apart from
// interpreter.h so that the command that sets it needs no LibTorch headers.
#ifndef ELASTICDL_PYTHON_OUTPUT_LABEL_H_
#define ELASTICDL_PYTHON_OUTPUT_LABEL_H_

#include <string>

namespace elasticdl::python {

// Set before the interpreter starts (StartPython), or applied at once if it
// runs; thread-safe.
void LabelOutput(const std::string& prefix);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_OUTPUT_LABEL_H_
