#include "python/python_optimizer.h"

#include <set>
#include <utility>

#include "common/strings.h"

namespace elasticdl::python {
namespace {

namespace py = pybind11;

// Reads an optimizer's arguments by name, remembering which were read.
class Arguments {
 public:
  Arguments(const std::string& name, const py::dict& args)
      : optimizer_(name == "Ftrl" ? "elasticdl.optim.Ftrl" : "torch.optim." + name), args_(args) {}

  StatusOr<double> Number(const char* key) {
    EDL_ASSIGN_OR_RETURN(py::handle v, Get(key));
    if (py::isinstance<py::bool_>(v) ||
        !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v))) {
      return Wrong(key, v, "a number");
    }
    return v.cast<double>();
  }
  StatusOr<bool> Flag(const char* key) {
    EDL_ASSIGN_OR_RETURN(py::handle v, Get(key));
    if (!py::isinstance<py::bool_>(v)) return Wrong(key, v, "True or False");
    return v.cast<bool>();
  }
  StatusOr<std::pair<double, double>> Pair(const char* key) {
    EDL_ASSIGN_OR_RETURN(py::handle v, Get(key));
    if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v) || py::len(v) != 2) {
      return Wrong(key, v, "a pair of numbers");
    }
    py::sequence s = py::reinterpret_borrow<py::sequence>(v);
    for (py::handle item : s) {
      if (!py::isinstance<py::float_>(item) && !py::isinstance<py::int_>(item)) {
        return Wrong(key, v, "a pair of numbers");
      }
    }
    return std::make_pair(s[0].cast<double>(), s[1].cast<double>());
  }

  // Every argument read, or one that changes nothing the servers do.
  Status Finish() const {
    for (const auto& [k, v] : args_) {
      const std::string key = k.cast<std::string>();
      if (read_.count(key) != 0) continue;
      if (key == "foreach" || key == "fused" || key == "capturable" || key == "differentiable") {
        continue;  // how PyTorch computes a step, not what it computes
      }
      if (key == "maximize" && py::isinstance<py::bool_>(v) && !v.cast<bool>()) continue;
      return absl::InvalidArgumentError(
          StrCat(optimizer_, "(", key, "=", py::repr(v).cast<std::string>(),
                 "): the parameter servers cannot apply '", key, "'"));
    }
    return Status();
  }

 private:
  StatusOr<py::handle> Get(const char* key) {
    read_.insert(key);
    if (!args_.contains(key)) {
      return absl::InvalidArgumentError(StrCat(optimizer_, ": no value for '", key, "'"));
    }
    return py::handle(args_[key]);
  }
  Status Wrong(const char* key, py::handle v, const char* expected) const {
    return absl::InvalidArgumentError(StrCat(
        optimizer_, "(", key, "=", py::repr(v).cast<std::string>(), "): expected ", expected));
  }

  std::string optimizer_;
  py::dict args_;
  std::set<std::string> read_;
};

// torch.optim.Adam and AdamW take the same arguments.
template <typename AdamLike>
StatusOr<OptimizerSpec> Adam(Arguments& a) {
  EDL_ASSIGN_OR_RETURN(double lr, a.Number("lr"));
  EDL_ASSIGN_OR_RETURN(auto betas, a.Pair("betas"));
  EDL_ASSIGN_OR_RETURN(double eps, a.Number("eps"));
  EDL_ASSIGN_OR_RETURN(double weight_decay, a.Number("weight_decay"));
  EDL_ASSIGN_OR_RETURN(bool amsgrad, a.Flag("amsgrad"));
  return OptimizerSpec(AdamLike(lr)
                           .betas({betas.first, betas.second})
                           .eps(eps)
                           .weight_decay(weight_decay)
                           .amsgrad(amsgrad));
}

StatusOr<OptimizerSpec> Dense(const std::string& name, Arguments& a) {
  if (name == "SGD") {
    EDL_ASSIGN_OR_RETURN(double lr, a.Number("lr"));
    EDL_ASSIGN_OR_RETURN(double momentum, a.Number("momentum"));
    EDL_ASSIGN_OR_RETURN(double dampening, a.Number("dampening"));
    EDL_ASSIGN_OR_RETURN(double weight_decay, a.Number("weight_decay"));
    EDL_ASSIGN_OR_RETURN(bool nesterov, a.Flag("nesterov"));
    return OptimizerSpec(torch::optim::SGDOptions(lr)
                             .momentum(momentum)
                             .dampening(dampening)
                             .weight_decay(weight_decay)
                             .nesterov(nesterov));
  }
  if (name == "Adam") return Adam<torch::optim::AdamOptions>(a);
  if (name == "AdamW") return Adam<torch::optim::AdamWOptions>(a);
  if (name == "Adagrad") {
    EDL_ASSIGN_OR_RETURN(double lr, a.Number("lr"));
    EDL_ASSIGN_OR_RETURN(double lr_decay, a.Number("lr_decay"));
    EDL_ASSIGN_OR_RETURN(double weight_decay, a.Number("weight_decay"));
    EDL_ASSIGN_OR_RETURN(double initial, a.Number("initial_accumulator_value"));
    EDL_ASSIGN_OR_RETURN(double eps, a.Number("eps"));
    return OptimizerSpec(torch::optim::AdagradOptions(lr)
                             .lr_decay(lr_decay)
                             .weight_decay(weight_decay)
                             .initial_accumulator_value(initial)
                             .eps(eps));
  }
  if (name == "RMSprop") {
    EDL_ASSIGN_OR_RETURN(double lr, a.Number("lr"));
    EDL_ASSIGN_OR_RETURN(double alpha, a.Number("alpha"));
    EDL_ASSIGN_OR_RETURN(double eps, a.Number("eps"));
    EDL_ASSIGN_OR_RETURN(double weight_decay, a.Number("weight_decay"));
    EDL_ASSIGN_OR_RETURN(double momentum, a.Number("momentum"));
    EDL_ASSIGN_OR_RETURN(bool centered, a.Flag("centered"));
    return OptimizerSpec(torch::optim::RMSpropOptions(lr)
                             .alpha(alpha)
                             .eps(eps)
                             .weight_decay(weight_decay)
                             .momentum(momentum)
                             .centered(centered));
  }
  return absl::InvalidArgumentError(
      StrCat("torch.optim.", name,
             ": the parameter servers apply torch.optim.SGD, Adam, AdamW, Adagrad and RMSprop"));
}

}  // namespace

StatusOr<OptimizerSpec> OptimizerOf(const std::string& name, const py::dict& args) {
  if (name == "Ftrl") {
    return absl::InvalidArgumentError(
        "elasticdl.optim.Ftrl updates embedding tables only: give it to elasticdl.nn.Embedding("
        "optimizer=...), and a torch.optim optimizer to the model");
  }
  Arguments a(name, args);
  EDL_ASSIGN_OR_RETURN(OptimizerSpec spec, Dense(name, a));
  EDL_RETURN_IF_ERROR(a.Finish());
  return spec;
}

StatusOr<TableOptimizerSpec> TableOptimizerOf(const std::string& name, const py::dict& args) {
  if (name != "Ftrl") {
    EDL_ASSIGN_OR_RETURN(OptimizerSpec dense, OptimizerOf(name, args));
    return std::visit([](const auto& o) { return TableOptimizerSpec(o); }, dense);
  }
  Arguments a(name, args);
  EDL_ASSIGN_OR_RETURN(double lr, a.Number("lr"));
  FtrlOptions ftrl(lr);
  EDL_ASSIGN_OR_RETURN(ftrl.lr_power, a.Number("lr_power"));
  EDL_ASSIGN_OR_RETURN(ftrl.l1, a.Number("l1"));
  EDL_ASSIGN_OR_RETURN(ftrl.l2, a.Number("l2"));
  EDL_ASSIGN_OR_RETURN(ftrl.initial_accumulator_value, a.Number("initial_accumulator_value"));
  EDL_RETURN_IF_ERROR(a.Finish());
  return TableOptimizerSpec(ftrl);
}

}  // namespace elasticdl::python
