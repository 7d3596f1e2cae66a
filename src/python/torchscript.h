// A Python model written as TorchScript, for `elasticdl export`.
#ifndef ELASTICDL_PYTHON_TORCHSCRIPT_H_
#define ELASTICDL_PYTHON_TORCHSCRIPT_H_

#include <string>

#include "elasticdl/data/example.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/model.h"

namespace elasticdl::python {

struct TorchScriptSaved {
  std::string method;        // "torch.jit.script" or "torch.jit.trace"
  std::string script_error;  // why scripting failed, when traced
};

// Writes `model`, a model of a Python zoo file, in eval mode to `path` as
// TorchScript: torch.jit.script, else torch.jit.trace on `example` (a
// batch's features; null: scripting must do). INVALID_ARGUMENT for a model
// of a C++ file, or with the traceback when both fail.
StatusOr<TorchScriptSaved> SaveTorchScript(Model& model, const FeatureMap* example,
                                           const std::string& path);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_TORCHSCRIPT_H_
