#include "elasticdl/zoo/model.h"

#include <stdexcept>

#include "common/strings.h"

namespace elasticdl {
namespace {

std::string ShapeString(c10::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Input -> Sequential. The layers are registered as "layers", so parameters
// are named "layers.0.weight", "layers.1.bias", ...
class FunctionalModel final : public Model {
 public:
  FunctionalModel(Input input, torch::nn::Sequential layers)
      : input_(std::move(input)), layers_(register_module("layers", std::move(layers))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    auto it = inputs.find(input_.name);
    if (it == inputs.end()) {
      std::vector<std::string> names;
      for (const auto& [name, tensor] : inputs) names.push_back(name);
      throw std::invalid_argument(
          fmt::format("the model's input '{}' is not among the features [{}]", input_.name,
                      fmt::join(names, ", ")));
    }
    const torch::Tensor& x = it->second;
    if (!input_.shape.empty()) CheckShape(x);
    return layers_->forward(x);
  }

  void pretty_print(std::ostream& stream) const override {
    stream << "elasticdl::Functional(input=" << input_.name << ShapeString(input_.shape) << ")";
  }

 private:
  // The batch must be [N, input_.shape...]; -1 in input_.shape matches any size.
  void CheckShape(const torch::Tensor& x) const {
    bool ok = x.dim() == static_cast<int64_t>(input_.shape.size()) + 1;
    for (size_t i = 0; ok && i < input_.shape.size(); ++i) {
      ok = input_.shape[i] < 0 || x.size(static_cast<int64_t>(i) + 1) == input_.shape[i];
    }
    if (!ok) {
      throw std::invalid_argument(
          fmt::format("input '{}' has batch shape {}; the model expects [batch, {}]", input_.name,
                      ShapeString(x.sizes()), fmt::join(input_.shape, ", ")));
    }
  }

  Input input_;
  torch::nn::Sequential layers_;
};

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::TRAINING:
      return "training";
    case Mode::EVALUATION:
      return "evaluation";
    case Mode::PREDICTION:
      return "prediction";
  }
  return "unknown";
}

std::shared_ptr<Model> Functional(Input input, torch::nn::Sequential layers) {
  return std::make_shared<FunctionalModel>(std::move(input), std::move(layers));
}

torch::Tensor ReshapeImpl::forward(const torch::Tensor& x) {
  std::vector<int64_t> shape = {x.size(0)};
  shape.insert(shape.end(), shape_.begin(), shape_.end());
  return x.reshape(shape);
}

void ReshapeImpl::pretty_print(std::ostream& stream) const {
  stream << "elasticdl::Reshape(shape=" << ShapeString(shape_) << ")";
}

}  // namespace elasticdl
