#include "python/python_model.h"

#include <torch/csrc/utils/pybind.h>

#include <map>
#include <optional>
#include <string>

#include "elasticdl/zoo/embedding.h"
#include "python/interpreter.h"
#include "python/python_error.h"
#include "zoo/mirrored_module.h"

namespace elasticdl::python {

namespace py = pybind11;

std::shared_ptr<PythonModel> PythonModel::Wrap(const py::object& module) {
  std::shared_ptr<PythonModel> model(new PythonModel(PyRef(module)));
  // elasticdl._runtime.mirror: (name, class, params, buffers, running stats,
  // embedding table) per submodule, parents first.
  std::map<std::string, torch::nn::Module*> by_name{{"", model.get()}};
  for (py::handle item : Runtime().attr("mirror")(module)) {
    auto entry = item.cast<py::tuple>();
    const std::string qualified = entry[0].cast<std::string>();
    torch::nn::Module* mirror = model.get();
    if (!qualified.empty()) {
      const size_t dot = qualified.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : qualified.substr(0, dot);
      const std::string local = dot == std::string::npos ? qualified : qualified.substr(dot + 1);
      torch::nn::Module* owner = by_name.at(parent);
      if (!entry[5].is_none()) {
        auto table = entry[5].cast<std::shared_ptr<EmbeddingImpl>>();
        owner->register_module(local, table);
        mirror = table.get();
      } else {
        auto child = std::make_shared<MirroredModule>(entry[1].cast<std::string>());
        if (!entry[4].is_none()) {
          py::object momentum = entry[4].cast<py::tuple>()[0];
          child->running_stats = MirroredModule::RunningStats{
              momentum.is_none() ? std::nullopt : std::optional<double>(momentum.cast<double>())};
        }
        owner->register_module(local, child);
        mirror = child.get();
      }
      by_name[qualified] = mirror;
    }
    for (py::handle p : entry[2]) {
      auto pair = p.cast<py::tuple>();
      torch::Tensor tensor = pair[1].cast<torch::Tensor>();
      mirror->register_parameter(pair[0].cast<std::string>(), tensor, tensor.requires_grad());
    }
    for (py::handle b : entry[3]) {
      auto pair = b.cast<py::tuple>();
      mirror->register_buffer(pair[0].cast<std::string>(), pair[1].cast<torch::Tensor>());
    }
  }
  return model;
}

torch::Tensor PythonModel::forward(const FeatureMap& inputs, bool /*training*/) {
  py::gil_scoped_acquire gil;
  try {
    py::dict features;
    for (const auto& [name, tensor] : inputs) features[py::str(name)] = tensor;
    return Runtime().attr("forward")(module_.get(), features).cast<torch::Tensor>();
  } catch (const py::error_already_set& e) {
    throw ZooError(e);
  }
}

void PythonModel::train(bool on) {
  {
    py::gil_scoped_acquire gil;
    try {
      module_.get().attr("train")(on);
    } catch (const py::error_already_set& e) {
      throw ZooError(e);
    }
  }
  torch::nn::Module::train(on);
}

}  // namespace elasticdl::python
