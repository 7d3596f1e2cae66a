#include "python/torchscript.h"

#include <torch/csrc/utils/pybind.h>

#include "common/strings.h"
#include "python/interpreter.h"
#include "python/python_error.h"
#include "python/python_model.h"

namespace elasticdl::python {

namespace py = pybind11;

StatusOr<TorchScriptSaved> SaveTorchScript(Model& model, const FeatureMap* example,
                                           const std::string& path) {
  auto* python_model = dynamic_cast<PythonModel*>(&model);
  if (python_model == nullptr) {
    return absl::InvalidArgumentError("TorchScript is written for models of Python files");
  }
  model.train(false);
  py::gil_scoped_acquire gil;
  try {
    py::object argument = py::none();
    if (example != nullptr) {
      py::dict features;
      for (const auto& [name, tensor] : *example) features[py::str(name)] = tensor;
      argument = Runtime().attr("forward_argument")(features);
    }
    auto saved = Runtime()
                     .attr("to_torchscript")(python_model->module().get(), argument, path)
                     .cast<std::pair<std::string, std::string>>();
    return TorchScriptSaved{saved.first, saved.second};
  } catch (const py::error_already_set& e) {
    return absl::InvalidArgumentError(DescribeError(e));
  }
}

}  // namespace elasticdl::python
