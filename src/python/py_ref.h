// A reference to a Python object that C++ code on any thread may hold, copy
// and drop without the GIL: copies share one Python reference, and the last
// copy to go takes the GIL to release it. Zoo entries, models and datasets
// keep their Python callables and objects this way.
#ifndef ELASTICDL_PYTHON_PY_REF_H_
#define ELASTICDL_PYTHON_PY_REF_H_

// pybind11 with LibTorch's casters (torch.Tensor <-> at::Tensor): every unit
// that casts tensors must see them, or it instantiates pybind11's generic
// caster for at::Tensor under the same name.
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <utility>

namespace elasticdl::python {

class PyRef {
 public:
  PyRef() = default;
  // Takes a reference to `object`; needs the GIL.
  explicit PyRef(pybind11::object object)
      : object_(new pybind11::object(std::move(object)), [](pybind11::object* o) {
          pybind11::gil_scoped_acquire gil;
          delete o;
        }) {}

  // The object; use it with the GIL held.
  const pybind11::object& get() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  std::shared_ptr<pybind11::object> object_;
};

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PY_REF_H_
