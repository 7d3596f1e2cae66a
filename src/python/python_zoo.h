// A model zoo's Python files: their entries, found by name (ZooModules).
//
// A module is imported when one of its entries is first looked up, with the
// zoo's root first on sys.path (so that zoo modules import each other as
// packages), in the process's interpreter, which starts then. An entry takes
// the kind its lookup asks for; what the Python object returns is checked
// when it is called:
//
//   model            a torch.nn.Module subclass, constructed with --params as
//                    keyword arguments, or a function called with them that
//                    returns one; a class's default_loss, default_optimizer,
//                    default_input(record, mode) and default_eval_metrics
//                    static methods are its defaults (seed 003)
//   dataset_fn       dataset_fn(dataset, mode) over an elasticdl.Dataset
//   loss             loss(labels, predictions) -> a tensor of one value
//   optimizer        optimizer() -> functools.partial(torch.optim.X, ...)
//   eval_metrics_fn  eval_metrics_fn() -> {name: fn(labels, predictions) |
//                    elasticdl.metrics.X}
//   learning_rate_schedule  () -> a schedule in --lr_schedule's text form,
//                    functools.partial(torch.optim.lr_scheduler.StepLR |
//                    MultiStepLR | ExponentialLR | CosineAnnealingLR | LinearLR |
//                    ConstantLR | PolynomialLR, ...), or a function of an
//                    optimizer building one of them or a SequentialLR of them
//                    (called on optimizers of its own, and the scheduler read)
//
// Every Python exception becomes a ZooCodeError whose message is the
// exception and its traceback; ZooProgram puts the file and entry in front.
#ifndef ELASTICDL_PYTHON_PYTHON_ZOO_H_
#define ELASTICDL_PYTHON_PYTHON_ZOO_H_

#include <memory>
#include <string>
#include <vector>

#include "elasticdl/status.h"
#include "zoo/zoo_library.h"

namespace elasticdl::python {

// The .py files under `root` (as BuildZoo's python_dir holds them) as a
// zoo's modules. INVALID_ARGUMENT if it is not a directory. Starts no
// interpreter: the first lookup does.
StatusOr<std::unique_ptr<ZooModules>> OpenPythonModules(const std::string& root);

// The zoo BuildZoo made: its compiled library (`library_path`, empty for
// none), its Python files (`python_dir`, empty for none) and the compiled
// files the library left out (ZooLibrary::Load).
StatusOr<std::shared_ptr<ZooLibrary>> OpenZoo(const std::string& library_path,
                                              const std::string& python_dir,
                                              std::vector<std::string> left_out = {});

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PYTHON_ZOO_H_
