// The process's Python interpreter, which runs the Python files of model
// zoos.
//
// CPython has one interpreter per process. StartPython starts it once, with
// ElasticDL's `elasticdl` package importable (share/elasticdl/python beside
// the binary) and imported, which imports torch: the LibTorch this process
// already runs, so tensors cross between C++ and Python as they are. The
// interpreter installs no signal handlers (the process keeps its own),
// writes no bytecode files beside the zoo's, and writes print() a line at a
// time, each begun with the process's label where it has one
// (output_label.h).
// It is never finalized: objects may outlive main().
//
// After the start no thread holds the GIL: code that touches Python objects
// takes it (pybind11::gil_scoped_acquire), from any thread, and holds no
// lock that a Python call could wait for.
#ifndef ELASTICDL_PYTHON_INTERPRETER_H_
#define ELASTICDL_PYTHON_INTERPRETER_H_

// pybind11 with LibTorch's casters (torch.Tensor <-> at::Tensor): every unit
// that casts tensors must see them, or it instantiates pybind11's generic
// caster for at::Tensor under the same name.
#include <torch/csrc/utils/pybind.h>

#include "elasticdl/status.h"

namespace elasticdl::python {

// Starts the interpreter unless it runs; thread-safe. FAILED_PRECONDITION
// when it cannot start or import the elasticdl package (the reason and
// traceback); every later call returns the first call's status.
Status StartPython();

// The module elasticdl._runtime: what C++ calls to run a zoo's entries.
// Needs the GIL and a started interpreter.
pybind11::module_ Runtime();

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_INTERPRETER_H_
