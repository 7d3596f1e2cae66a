#include "python/python_dataset.h"

#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "python/interpreter.h"
#include "python/module.h"
#include "python/python_error.h"

namespace elasticdl::python {
namespace {

namespace py = pybind11;

// The task's records as Python reads them, and where each came from.
struct RecordStream {
  std::shared_ptr<internal::Source<Record>> source;
  std::vector<RecordOrigin> origins;  // by position in the stream
  Status error;                       // the reader's, once it failed

  // (position, bytes), or None at the end. Throws RecordsError when the
  // reader fails.
  py::object Next() {
    StatusOr<std::optional<Record>> next;
    {
      py::gil_scoped_release no_gil;  // reading may wait for the disk
      next = source->Next();
    }
    if (!next.ok()) {
      error = next.status();
      throw RecordsError(std::string(error.message()));
    }
    if (!next->has_value()) return py::none();
    Record& record = **next;
    origins.push_back({record.file, record.index});
    return py::make_tuple(origins.size() - 1, py::bytes(record.data));
  }
};

const char* PythonModeName(Mode mode) {
  switch (mode) {
    case Mode::TRAINING:
      return "TRAINING";
    case Mode::EVALUATION:
      return "EVALUATION";
    case Mode::PREDICTION:
      return "PREDICTION";
  }
  return "TRAINING";
}

class PythonExampleSource final : public internal::Source<Example> {
 public:
  PythonExampleSource(PyRef iterator, std::shared_ptr<RecordStream> records)
      : iterator_(std::move(iterator)), records_(std::move(records)) {}

  StatusOr<std::optional<Example>> Next() override {
    py::gil_scoped_acquire gil;
    try {
      auto item = py::reinterpret_steal<py::object>(PyIter_Next(iterator_.get().ptr()));
      if (!item) {
        if (PyErr_Occurred() != nullptr) throw py::error_already_set();
        return std::optional<Example>();
      }
      auto triple = item.cast<py::tuple>();
      Example example;
      for (const auto& [name, value] : triple[1].cast<py::dict>()) {
        example.features[name.cast<std::string>()] = value.cast<torch::Tensor>();
      }
      if (!triple[2].is_none()) example.labels = triple[2].cast<torch::Tensor>();
      example.origins.push_back(records_->origins.at(triple[0].cast<size_t>()));
      return std::optional<Example>(std::move(example));
    } catch (const py::error_already_set& e) {
      if (e.matches(py::module_::import("_elasticdl").attr("DataError")) && !records_->error.ok()) {
        return records_->error;
      }
      std::string where;
      py::object origin = Runtime().attr("origin_of")(e.value());
      if (py::isinstance<py::int_>(origin)) {
        const size_t position = origin.cast<size_t>();
        if (position < records_->origins.size()) {
          where = StrCat(internal::DescribeOrigin({records_->origins[position]}), ": ");
        }
      }
      return absl::InvalidArgumentError(StrCat(where, DescribeError(e)));
    }
  }

 private:
  PyRef iterator_;
  std::shared_ptr<RecordStream> records_;
};

}  // namespace

Dataset<Example> PythonExamples(const char* stage, const PyRef& fn, Dataset<Record> records,
                                Mode mode) {
  auto stream = std::make_shared<RecordStream>();
  stream->source = records.source();
  py::cpp_function next_record([stream] { return stream->Next(); });
  py::object seed = records.seed().has_value() ? py::object(py::int_(*records.seed())) : py::none();
  try {
    py::object iterator = Runtime().attr(stage)(fn.get(), next_record, PythonModeName(mode), seed);
    return Dataset<Example>(
        std::make_shared<PythonExampleSource>(PyRef(std::move(iterator)), std::move(stream)));
  } catch (const py::error_already_set& e) {
    throw ZooError(e);
  }
}

}  // namespace elasticdl::python
