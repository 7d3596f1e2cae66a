// A Python torch.nn.Module as the worker's Model.
//
// The module's parameters and buffers are the same tensors in C++ (Python's
// and LibTorch's tensors share their implementation), registered under the
// names of its state_dict in a tree of MirroredModules that follows its
// submodules, so that the worker pulls values into them, pushes their
// gradients and writes them to checkpoints and trained models as it does a
// LibTorch model's. An elasticdl.nn.Embedding is mirrored by its own
// EmbeddingImpl, which the worker gives its rows. forward and train call the
// Python module (taking the GIL); backward needs no Python.
#ifndef ELASTICDL_PYTHON_PYTHON_MODEL_H_
#define ELASTICDL_PYTHON_PYTHON_MODEL_H_

#include <torch/csrc/utils/pybind.h>  // pybind11 with LibTorch's tensor casters

#include <memory>

#include "elasticdl/zoo/model.h"
#include "python/py_ref.h"

namespace elasticdl::python {

class PythonModel final : public Model {
 public:
  // Mirrors `module`, a torch.nn.Module. Needs the GIL; throws
  // pybind11::error_already_set.
  static std::shared_ptr<PythonModel> Wrap(const pybind11::object& module);

  // module(features): the tensor alone when there is one feature, else a
  // dict. Throws ZooCodeError with the traceback.
  torch::Tensor forward(const FeatureMap& inputs, bool training) override;
  // module.train(on), and the mirror's flags (an EmbeddingImpl's).
  void train(bool on = true) override;

  const PyRef& module() const { return module_; }

 private:
  explicit PythonModel(PyRef module) : Model("PythonModel"), module_(std::move(module)) {}

  PyRef module_;
};

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PYTHON_MODEL_H_
