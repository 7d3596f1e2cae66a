#include "python/interpreter.h"

#include <pybind11/embed.h>

#include <mutex>
#include <string>

#include "common/file.h"
#include "common/strings.h"
#include "python/module.h"
#include "python/output_label.h"

// The C++ half of the elasticdl package (feature specs, tf.Example parsing,
// embedding tables, seeds), built into this binary.
PYBIND11_EMBEDDED_MODULE(_elasticdl, m) { elasticdl::python::DefineModule(m); }

namespace elasticdl::python {
namespace {

namespace py = pybind11;

// elasticdl._runtime, set once by Start (with the GIL) and never released:
// the interpreter outlives every user.
py::object* runtime_module = nullptr;

// LabelOutput's prefix, and whether the interpreter runs (then it has it).
std::mutex label_mu;
std::string& OutputPrefix() {
  static std::string prefix;
  return prefix;
}
bool started = false;

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
    std::lock_guard<std::mutex> lock(label_mu);
    if (!OutputPrefix().empty()) runtime_module->attr("label_output")(OutputPrefix());
    started = true;
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

void LabelOutput(const std::string& prefix) {
  bool running = false;
  {
    // Not held with the GIL: Start takes it under the GIL.
    std::lock_guard<std::mutex> lock(label_mu);
    OutputPrefix() = prefix;
    running = started;
  }
  if (running) {
    py::gil_scoped_acquire gil;
    runtime_module->attr("label_output")(prefix);
  }
}

py::module_ Runtime() { return py::reinterpret_borrow<py::module_>(*runtime_module); }

}  // namespace elasticdl::python
