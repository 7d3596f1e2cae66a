// Fashion-MNIST as a trial (seed 004): a class whose methods build a job's
// whole program from its hyperparameters, so that an experiment can train it
// many times with different ones (../experiment.yaml). On the records
// `elasticdl data mnist` writes (image: float [28, 28] holding 0-255; label:
// int64 [1], the class 0-9).
//
//   build_model(hparams)        the model, its optimizer, loss and metrics
//   make_data_loaders(hparams)  how records become examples, for training and
//                               for evaluation and prediction
//   callbacks(hparams)          optional: learning-rate schedules, early
//                               stopping, a step limit
//
// Its hyperparameters: learning_rate, hidden_units, dropout, optimizer
// ('adam' or 'sgd'), and the optional lr_decay. One trial:
//
//   --model_def=trial.model.MnistTrial
//   --params="learning_rate=0.003, hidden_units=128, dropout=0.2, optimizer='adam'"
//
// A hyperparameter the trial reads but --params (or the experiment file)
// does not give fails before the job starts, naming it.
#include <stdexcept>
#include <string>
#include <vector>

#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

// Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

// A multilayer perceptron: 784 pixels, a hidden layer, 10 logits.
class MnistMlp : public Model {
 public:
  MnistMlp(int64_t hidden_units, double dropout)
      : hidden_(register_module("hidden", nn::Linear(28 * 28, hidden_units))),
        dropout_(register_module("dropout", nn::Dropout(dropout))),
        output_(register_module("output", nn::Linear(hidden_units, 10))) {}

  // Dropout follows `training`: the framework calls train(training) first.
  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    auto x = torch::relu(hidden_(inputs.at("image").flatten(1)));
    return output_(dropout_(x));
  }

 private:
  nn::Linear hidden_;
  nn::Dropout dropout_;
  nn::Linear output_;
};

// One record in, one example out; no label when predicting.
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
    auto model = std::make_shared<MnistMlp>(hparams.get<int>("hidden_units"),
                                            hparams.get<double>("dropout"));
    return Compile(model)
        .optimizer(make_optimizer(hparams.get<std::string>("optimizer"),
                                  hparams.get<double>("learning_rate")))
        .loss(cross_entropy)
        .metrics({{"accuracy", Accuracy}});
  }

  // The training loader parses on a thread of its own, a few examples
  // ahead, from shuffled records; the validation loader on the worker's.
  DataLoaders make_data_loaders(const Hparams& /*hparams*/) override {
    return {DataAdapter(parse_record).workers(1).max_queue_size(64).shuffle(1024),
            DataAdapter(parse_record).workers(0)};
  }

  // lr_decay (optional): the learning rate is multiplied by it every 100
  // model versions.
  std::vector<Callback> callbacks(const Hparams& hparams) override {
    const double lr_decay = hparams.get<double>("lr_decay", 1.0);
    if (lr_decay == 1.0) return {};
    return {LearningRateScheduler(LearningRateSchedule::Exponential(100, lr_decay))};
  }
};
ELASTICDL_REGISTER_TRIAL(MnistTrial);

}  // namespace
