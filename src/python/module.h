// The C++ half of the elasticdl Python package, the built-in module
// `_elasticdl` (share/python/elasticdl wraps it):
//
//   FeatureSpec(shape, dtype, fixed, default)  FixedLenFeature / VarLenFeature
//   parse_example(record, {name: FeatureSpec})  one tf.train.Example -> dict
//   hash_bucket(value, num_buckets, salt)       elasticdl::HashBucket
//   seed_mix(seed, value)                       elasticdl::SeedMix
//   EmbeddingTable(...)                         an elasticdl::EmbeddingImpl
//   DataError                                   a record file that cannot be read
#ifndef ELASTICDL_PYTHON_MODULE_H_
#define ELASTICDL_PYTHON_MODULE_H_

#include <torch/csrc/utils/pybind.h>  // pybind11 with LibTorch's tensor casters

#include <stdexcept>

namespace elasticdl::python {

// Thrown (as _elasticdl.DataError) by the records a dataset_fn iterates when
// the record file cannot be read; the pipeline reports the reader's status.
class RecordsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void DefineModule(pybind11::module_& m);

}  // namespace elasticdl::python

#endif  // ELASTICDL_PYTHON_MODULE_H_
