#include "python/module.h"

#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/strings.h"
#include "elasticdl/data/example.h"
#include "elasticdl/seed.h"
#include "elasticdl/zoo/embedding.h"
#include "elasticdl/zoo/preprocessing.h"
#include "python/python_optimizer.h"

namespace elasticdl::python {
namespace {

namespace py = pybind11;

[[noreturn]] void ThrowValueError(const Status& status) {
  throw py::value_error(std::string(status.message()));
}

std::optional<torch::Dtype> NumericDtype(const std::string& dtype) {
  if (dtype == "float32") return torch::kFloat32;
  if (dtype == "int64") return torch::kInt64;
  return std::nullopt;
}

FeatureSpec MakeFeatureSpec(std::vector<int64_t> shape, const std::string& dtype, bool fixed,
                            const py::object& default_value) {
  const std::optional<torch::Dtype> numeric = NumericDtype(dtype);
  if (!numeric && dtype != "bytes") {
    throw py::value_error(
        StrCat("a feature's dtype is torch.float32, torch.int64 or bytes (what "
               "a tf.train.Example's float_list, int64_list and bytes_list "
               "hold), not ",
               dtype));
  }
  FeatureSpec spec;
  if (!fixed) {
    if (!default_value.is_none()) throw py::value_error("a VarLenFeature takes no default_value");
    spec = numeric ? VarLenFeature(*numeric) : VarLenBytesFeature();
  } else if (numeric) {
    std::optional<torch::Tensor> fallback;
    if (!default_value.is_none()) {
      py::module_ torch_module = py::module_::import("torch");
      fallback =
          torch_module
              .attr("as_tensor")(default_value, py::arg("dtype") = torch_module.attr(dtype.c_str()))
              .cast<torch::Tensor>();
    }
    spec = FixedLenFeature(std::move(shape), *numeric, fallback);
  } else {
    std::optional<std::vector<std::string>> fallback;
    if (py::isinstance<py::bytes>(default_value) || py::isinstance<py::str>(default_value)) {
      fallback = std::vector<std::string>{default_value.cast<std::string>()};
    } else if (!default_value.is_none()) {
      fallback = default_value.cast<std::vector<std::string>>();
    }
    spec = FixedLenBytesFeature(std::move(shape), fallback);
  }
  Status valid = ValidateFeatureSpec({{"feature", spec}});
  if (!valid.ok()) ThrowValueError(valid);
  return spec;
}

std::string DescribeSpec(const FeatureSpec& spec) {
  const char* dtype = spec.type == FeatureSpec::Type::kFloat32 ? "torch.float32"
                      : spec.type == FeatureSpec::Type::kInt64 ? "torch.int64"
                                                               : "bytes";
  if (!spec.fixed_length) return StrCat("VarLenFeature(", dtype, ")");
  return StrCat("FixedLenFeature([", fmt::format("{}", fmt::join(spec.shape, ", ")), "], ", dtype,
                ")");
}

py::dict ParseExampleToDict(const py::bytes& record, const py::dict& features) {
  FeatureSpecMap spec;
  for (const auto& [name, value] : features) {
    if (!py::isinstance<FeatureSpec>(value)) {
      throw py::type_error(StrCat("parse_example: feature '", py::str(name).cast<std::string>(),
                                  "' is described by ", py::repr(value).cast<std::string>(),
                                  ", not elasticdl.FixedLenFeature or VarLenFeature"));
    }
    spec[py::str(name).cast<std::string>()] = value.cast<const FeatureSpec&>();
  }
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(record.ptr(), &data, &size) != 0) throw py::error_already_set();
  StatusOr<Features> parsed = ParseExample(std::string_view(data, size), spec);
  if (!parsed.ok()) ThrowValueError(parsed.status());
  py::dict out;
  for (auto& [name, tensor] : parsed->tensors) out[py::str(name)] = tensor;
  for (auto& [name, values] : parsed->bytes) {
    py::list list;
    for (const std::string& v : values) list.append(py::bytes(v));
    out[py::str(name)] = list;
  }
  return out;
}

// Dataset::shuffle's random choices: mt19937_64 seeded with the stage's
// seed, an index uniform in [0, n) per element taken from the buffer.
class ShuffleDraws {
 public:
  explicit ShuffleDraws(uint64_t seed) : rng_(seed) {}
  size_t Pick(size_t n) {
    if (n == 0) throw py::value_error("ShuffleDraws.pick: n must be at least 1");
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

 private:
  std::mt19937_64 rng_;
};

EmbeddingOptions MakeEmbeddingOptions(const std::string& name, int64_t dim,
                                      const py::tuple& initializer, const py::object& optimizer,
                                      const std::string& combiner, int64_t num_rows,
                                      int32_t admit_after, double unadmitted_value,
                                      int64_t evict_after_versions, int64_t max_rows_per_server,
                                      const std::string& dtype) {
  const std::string table = StrCat("Embedding '", name, "'");
  EmbeddingOptions options(name, dim);
  const std::string kind = initializer.empty() ? "" : py::str(initializer[0]).cast<std::string>();
  auto number = [&](size_t i) { return initializer[i].cast<double>(); };
  if (kind == "uniform" && initializer.size() == 3) {
    options.uniform(number(1), number(2));
  } else if (kind == "normal" && initializer.size() == 3) {
    options.normal(number(1), number(2));
  } else if (kind == "zeros" && initializer.size() == 1) {
    options.zeros();
  } else if (kind == "constant" && initializer.size() == 2) {
    options.constant(number(1));
  } else {
    throw py::value_error(StrCat(table, ": initializer ", py::repr(initializer).cast<std::string>(),
                                 ", expected (\"uniform\", low, high), (\"normal\", mean, "
                                 "stddev), \"zeros\" or (\"constant\", value)"));
  }
  if (!optimizer.is_none()) {
    auto described = optimizer.cast<std::pair<std::string, py::dict>>();
    StatusOr<TableOptimizerSpec> spec = TableOptimizerOf(described.first, described.second);
    if (!spec.ok()) throw py::value_error(StrCat(table, ": ", spec.status().message()));
    options.optimizer(*spec);
  }
  if (combiner == "sum") {
    options.combiner(Combiner::kSum);
  } else if (combiner == "mean") {
    options.combiner(Combiner::kMean);
  } else if (combiner == "sqrtn") {
    options.combiner(Combiner::kSqrtN);
  } else if (!combiner.empty()) {
    throw py::value_error(StrCat(table, ": combiner '", combiner,
                                 "', expected None, \"sum\", \"mean\" or \"sqrtn\""));
  }
  if (num_rows < 0 || admit_after < 0 || evict_after_versions < 0 || max_rows_per_server < 0) {
    throw py::value_error(StrCat(table,
                                 ": num_rows, admit_after, evict_after_versions and "
                                 "max_rows_per_server cannot be negative"));
  }
  options.num_rows(num_rows)
      .admit_after(admit_after, unadmitted_value)
      .evict_after_versions(evict_after_versions)
      .max_rows_per_server(max_rows_per_server)
      .dtype(dtype == "float64" ? torch::kFloat64 : torch::kFloat32);
  return options;
}

}  // namespace

void DefineModule(py::module_& m) {
  m.doc() = "The C++ half of ElasticDL's elasticdl package.";
  py::register_exception<RecordsError>(m, "DataError", PyExc_IOError);

  py::class_<FeatureSpec>(m, "FeatureSpec")
      .def(py::init(&MakeFeatureSpec), py::arg("shape"), py::arg("dtype"), py::arg("fixed"),
           py::arg("default_value"))
      .def("__repr__", &DescribeSpec);
  m.def("parse_example", &ParseExampleToDict, py::arg("record"), py::arg("features"));
  m.def(
      "hash_bucket",
      [](const py::object& value, int64_t num_buckets, uint64_t salt) {
        if (py::isinstance<py::bytes>(value)) {
          return HashBucket(std::string_view(value.cast<std::string>()), num_buckets, salt);
        }
        if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
          return HashBucket(value.cast<int64_t>(), num_buckets, salt);
        }
        throw py::type_error(
            StrCat("hash_bucket takes bytes, str or int, not ",
                   py::str(value.get_type().attr("__name__")).cast<std::string>()));
      },
      py::arg("value"), py::arg("num_buckets") = 0, py::arg("salt") = 0);
  m.def("seed_mix", [](uint64_t seed, uint64_t value) { return SeedMix(seed, value); });
  // The draws of Dataset::shuffle (elasticdl/data/dataset.h), so that a Python
  // pipeline shuffles as the C++ one does from the same seed.
  py::class_<ShuffleDraws>(m, "ShuffleDraws")
      .def(py::init<uint64_t>(), py::arg("seed"))
      .def("pick", &ShuffleDraws::Pick, py::arg("n"));

  py::class_<EmbeddingImpl, std::shared_ptr<EmbeddingImpl>>(m, "EmbeddingTable")
      .def(py::init([](const std::string& name, int64_t dim, const py::tuple& initializer,
                       const py::object& optimizer, const std::string& combiner, int64_t num_rows,
                       int32_t admit_after, double unadmitted_value, int64_t evict_after_versions,
                       int64_t max_rows_per_server, const std::string& dtype) {
        EmbeddingOptions options = MakeEmbeddingOptions(
            name, dim, initializer, optimizer, combiner, num_rows, admit_after, unadmitted_value,
            evict_after_versions, max_rows_per_server, dtype);
        try {
          return std::make_shared<EmbeddingImpl>(std::move(options));
        } catch (const c10::Error& e) {
          throw py::value_error(e.what_without_backtrace());
        }
      }))
      .def(
          "forward",
          [](EmbeddingImpl& table, const torch::Tensor& ids, std::optional<torch::Tensor> mask) {
            py::gil_scoped_release no_gil;  // the lookup waits for the parameter servers
            try {
              return table.forward(ids, mask.value_or(torch::Tensor()));
            } catch (const c10::Error& e) {
              throw std::runtime_error(e.what_without_backtrace());
            }
          },
          py::arg("ids"), py::arg("mask") = py::none())
      .def_property_readonly("name", [](const EmbeddingImpl& t) { return t.options().name(); })
      .def_property_readonly("dim", [](const EmbeddingImpl& t) { return t.options().dim(); });
}

}  // namespace elasticdl::python
