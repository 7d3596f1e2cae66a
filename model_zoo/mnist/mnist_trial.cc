// Fashion-MNIST as a trial (seed 004's TFKerasTrial): build_model compiles a
// model from the hyperparameters, make_data_loaders returns the training and
// the validation loaders, callbacks the optional learning-rate decay.
//
// Its hyperparameters (--params) are learning_rate, conv1_channels,
// conv2_channels, dropout and optimizer ('adam' or 'sgd'), and the optional
// lr_decay (the learning rate is multiplied by it every 100 model versions):
//
//   --model_def=mnist.mnist_trial.MnistTrial
//   --params="learning_rate=0.001,conv1_channels=16,conv2_channels=32,dropout=0.25,optimizer='adam'"
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

class MnistNet : public Model {
 public:
  MnistNet(int64_t conv1_channels, int64_t conv2_channels, double dropout)
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, conv1_channels, 3)))),
        conv2_(register_module("conv2",
                               nn::Conv2d(nn::Conv2dOptions(conv1_channels, conv2_channels, 3)))),
        dropout_(register_module("dropout", nn::Dropout(dropout))),
        dense_(register_module("dense", nn::Linear(conv2_channels * 12 * 12, 10))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    auto x = inputs.at("image").reshape({-1, 1, 28, 28});
    x = torch::relu(conv1_(x));
    x = torch::relu(conv2_(x));
    x = torch::max_pool2d(x, 2);
    if (training) x = dropout_(x);
    return dense_(x.flatten(1));
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Dropout dropout_;
  nn::Linear dense_;
};

// The sequence: one record of `elasticdl data mnist` (image float [28, 28]
// 0-255, label int64 [1]) in, one example out; no label when predicting.
StatusOr<Example> parse_record(const Record& record, Mode mode) {
  FeatureSpecMap spec = {{"image", FixedLenFeature({28, 28}, torch::kFloat32)}};
  if (mode != Mode::PREDICTION) spec["label"] = FixedLenFeature({1}, torch::kInt64);
  EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, spec));
  Example example({{"image", (r["image"] / 255.0 - kMean) / kStd}});
  if (mode != Mode::PREDICTION) example.labels = r["label"];
  return example;
}

torch::Tensor cross_entropy(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return nn::functional::cross_entropy(predictions, labels.flatten());
}

// The categorical hyperparameter `optimizer`.
OptimizerSpec make_optimizer(const std::string& name, double learning_rate) {
  if (name == "adam") return torch::optim::AdamOptions(learning_rate);
  if (name == "sgd") return torch::optim::SGDOptions(learning_rate).momentum(0.9);
  throw std::invalid_argument("hyperparameter optimizer='" + name + "': expected 'adam' or 'sgd'");
}

class MnistTrial : public Trial {
 public:
  CompiledModel build_model(const Hparams& hparams) override {
    auto model = std::make_shared<MnistNet>(hparams.get<int>("conv1_channels"),
                                            hparams.get<int>("conv2_channels"),
                                            hparams.get<double>("dropout"));
    return Compile(model)
        .optimizer(make_optimizer(hparams.get<std::string>("optimizer"),
                                  hparams.get<double>("learning_rate")))
        .loss(cross_entropy)
        .metrics({{"accuracy", Accuracy}});
  }

  DataLoaders make_data_loaders(const Hparams& /*hparams*/) override {
    return {DataAdapter(parse_record)
                .workers(2)
                .use_multiprocessing(false)
                .max_queue_size(10)
                .shuffle(1024),
            DataAdapter(parse_record).workers(0)};
  }

  std::vector<Callback> callbacks(const Hparams& hparams) override {
    const double lr_decay = hparams.get<double>("lr_decay", 1.0);
    if (lr_decay == 1.0) return {};
    return {LearningRateScheduler(LearningRateSchedule::Exponential(100, lr_decay))};
  }
};
ELASTICDL_REGISTER_TRIAL(MnistTrial);

}  // namespace
