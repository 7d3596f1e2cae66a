#include "python/interpreter.h"

#include <pybind11/embed.h>

#include "common/file.h"
#include "common/log_label.h"
#include "common/strings.h"
#include "python/module.h"

// The C++ half of the elasticdl package (feature specs, tf.Example parsing,
// embedding tables, seeds), built into this binary.
PYBIND11_EMBEDDED_MODULE(_elasticdl, m) { elasticdl::python::DefineModule(m); }

namespace elasticdl::python {
namespace {

namespace py = pybind11;

// elasticdl._runtime, set once by Start (with the GIL) and never released:
// the interpreter outlives every user.
py::object* runtime_module = nullptr;

Status Start() {
  if (Py_IsInitialized() != 0) {
    return absl::FailedPreconditionError(
        "a Python interpreter that ElasticDL did not start runs in this process");
  }
  py::initialize_interpreter(/*init_signal_handlers=*/false, 0, nullptr,
                             /*add_program_dir_to_path=*/false);
  Status status;
  const std::string package_dir = InstalledShareDir("python");
  try {
    py::module_ sys = py::module_::import("sys");
    sys.attr("dont_write_bytecode") = true;
    sys.attr("path").attr("insert")(0, package_dir);
    py::object out = sys.attr("stdout");
    if (!out.is_none()) out.attr("reconfigure")(py::arg("line_buffering") = true);
    runtime_module = new py::object(py::module_::import("elasticdl._runtime"));
    if (const std::string label = LogLabel(); !label.empty()) {
      runtime_module->attr("label_output")(StrCat("[", label, "] "));
    }
  } catch (const py::error_already_set& e) {
    status = absl::FailedPreconditionError(
        StrCat("cannot start Python for the model zoo's .py files (the elasticdl package in ",
               package_dir, ", and torch from Debian's python3-torch): ", e.what()));
  }
  // From here on every user takes the GIL.
  PyEval_SaveThread();
  return status;
}

}  // namespace

Status StartPython() {
  static const Status status = Start();
  return status;
}

py::module_ Runtime() { return py::reinterpret_borrow<py::module_>(*runtime_module); }

}  // namespace elasticdl::python
