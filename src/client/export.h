// `elasticdl export`: a trained model as PyTorch users load it.
//
//   elasticdl export --trained_model=DIR --output=model.pt [--data=FILE]
//
// A model of a Python zoo file becomes TorchScript (torch.jit.script, or
// torch.jit.trace on the first records of --data where scripting fails)
// that plain python3 loads with torch.jit.load, with the trained parameters
// and buffers, in eval mode. A model of a C++ file becomes its state_dict
// ({name: tensor}, the names of the model's parameters and buffers), which
// torch.load reads. Models with embedding tables on parameter servers are
// refused: TorchScript holds dense models.
#ifndef ELASTICDL_CLIENT_EXPORT_H_
#define ELASTICDL_CLIENT_EXPORT_H_

#include <string>

#include "elasticdl/status.h"

namespace elasticdl::client {

struct ExportOptions {
  // A trained-model directory (train --output). Required.
  std::string trained_model;
  // The file to write (written whole, then renamed into place). Required.
  std::string output;
  // A record file (RecordIO or TFRecord) of the model's input: its first
  // minibatch, through the model's dataset_fn in PREDICTION mode, is what
  // torch.jit.trace runs when torch.jit.script cannot compile the model.
  // Optional.
  std::string data;
};

struct ExportResult {
  // What was written: "TorchScript (torch.jit.script)",
  // "TorchScript (torch.jit.trace)" or "state_dict".
  std::string format;
  // Why scripting failed, when the model was traced.
  std::string script_error;
  // Tensors written.
  int tensors = 0;
};

// Errors: a directory that is not a trained model (NOT_FOUND, DATA_LOSS);
// a Python model whose zoo cannot be imported or built, or that scripting
// and tracing both fail on (INVALID_ARGUMENT with the traceback); a model
// with embedding tables (FAILED_PRECONDITION).
StatusOr<ExportResult> ExportModel(const ExportOptions& options);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_EXPORT_H_
