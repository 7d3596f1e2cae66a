// A model that diverges: its loss grows so fast under SGD(lr=1) that a few
// steps overflow it to infinity. Jobs of it must fail, saying so, instead
// of ending "successfully" with a model of NaNs.
//
// Records: tf.train.Examples with an int64 feature "id" (those of
// tests/zoo/exactness). The model has one parameter, `w` [1] = 1; its output
// for a record is w * (id + 1) and its loss 1e6 * the mean squared output, so
// each step multiplies w by about -1e6 * E[(id + 1)^2].
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python

namespace {

class Diverging : public Model {
 public:
  Diverging() : w_(register_parameter("w", torch::ones({1}))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    return w_ * (inputs.at("id").to(torch::kFloat32) + 1);
  }

 private:
  torch::Tensor w_;
};
ELASTICDL_REGISTER_MODEL(Diverging);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode /*mode*/) {
  return dataset.map([](const Record& record) -> StatusOr<Example> {
    EDL_ASSIGN_OR_RETURN(Features r,
                         ParseExample(record.data, {{"id", FixedLenFeature({1}, torch::kInt64)}}));
    return Example{{{"id", r["id"]}}, r["id"]};
  });
}
ELASTICDL_REGISTER(dataset_fn);

torch::Tensor loss(const torch::Tensor& /*labels*/, const torch::Tensor& predictions) {
  return 1e6 * predictions.pow(2).mean();
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::SGDOptions(1.0); }
ELASTICDL_REGISTER(optimizer);

}  // namespace
