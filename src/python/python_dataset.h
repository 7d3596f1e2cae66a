// A task's records through a Python dataset_fn: the records cross to Python
// one by one as bytes (elasticdl._runtime.Records), dataset_fn's
// elasticdl.Dataset maps, filters and shuffles them there, and its elements
// come back as Examples, batched by the C++ pipeline like a C++ file's.
//
// Each element remembers its record: an exception in a map or filter
// function is reported as "FILE: record N: Type: message" with the traceback,
// and a record file that cannot be read as the reader's own status
// (DATA_LOSS), not as the model file's fault.
#ifndef ELASTICDL_PYTHON_PYTHON_DATASET_H_
#define ELASTICDL_PYTHON_PYTHON_DATASET_H_

#include <torch/csrc/utils/pybind.h>  // pybind11 with LibTorch's tensor casters

#include "elasticdl/data/dataset.h"
#include "elasticdl/zoo/model.h"
#include "python/py_ref.h"

namespace elasticdl::python {

// The examples of elasticdl._runtime.`stage`(fn, records, mode, seed):
// "pipeline" for a dataset_fn(dataset, mode), "input_pipeline" for a model
// class's default_input(record, mode). The pipeline's seed is records'
// (Dataset::with_seed). Needs the GIL; throws ZooCodeError when the
// function itself fails (not one of its elements).
Dataset<Example> PythonExamples(const char* stage, const PyRef& fn, Dataset<Record> records,
                                Mode mode);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_PYTHON_DATASET_H_
