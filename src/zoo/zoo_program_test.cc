#include "zoo/zoo_program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Record RecordOf(std::string data) {
  Record r;
  r.data = std::move(data);
  return r;
}

struct ThrowingModel : Model {
  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    TORCH_CHECK(false, "boom in forward");
    return torch::Tensor();
  }
};

struct NormModel : Model {
  NormModel() : norm(register_module("norm", torch::nn::BatchNorm1d(2))) {}
  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    return norm(inputs.at("x"));
  }
  torch::nn::BatchNorm1d norm;
};

std::shared_ptr<Model> linear(const Params& params) {
  const int width = params.get<int>("width", 2);
  return Functional(Input("x", {width}), torch::nn::Sequential(torch::nn::Linear(width, 1)));
}

Dataset<Example> dataset_fn(Dataset<Record> records, Mode mode) {
  return records.map([mode](const Record& r) -> StatusOr<Example> {
    if (r.data == "bad") return absl::InvalidArgumentError("unparsable record");
    Example e;
    e.features["x"] = torch::full({2}, std::stod(r.data));
    if (mode != Mode::PREDICTION) e.labels = torch::ones({1});
    return e;
  });
}

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::mse_loss(predictions, labels);
}

torch::Tensor per_example_loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return (predictions - labels).square();
}

OptimizerSpec optimizer() { return torch::optim::SGDOptions(0.1).momentum(0.9); }
OptimizerSpec nesterov_without_momentum() { return torch::optim::SGDOptions(0.1).nesterov(true); }

// Entries that read the job's params.
Dataset<Example> scaled_dataset_fn(Dataset<Record> records, Mode mode, const Params& params) {
  const double scale = params.get<double>("scale", 1.0);
  return dataset_fn(std::move(records), mode).map([scale](Example e) {
    e.features["x"] = e.features["x"] * scale;
    return e;
  });
}
torch::Tensor scaled_loss(const torch::Tensor& labels, const torch::Tensor& predictions,
                          const Params& params) {
  return torch::mse_loss(predictions, labels) * params.get<double>("scale", 1.0);
}
OptimizerSpec tuned_optimizer(const Params& params) {
  return torch::optim::AdamOptions(params.get<double>("learning_rate", 1e-3));
}
MetricMap named_metrics(const Params& params) {
  return {{params.get<std::string>("metric", "mse"), [] { return MeanSquaredError(); }}};
}

MetricMap eval_metrics_fn() {
  return {{"mse", [] { return MeanSquaredError(); }},
          {"mean_prediction",
           [](const torch::Tensor&, const torch::Tensor& predictions) { return predictions; }}};
}

MetricMap throwing_metrics() {
  return {{"broken", [](const torch::Tensor&, const torch::Tensor&) -> torch::Tensor {
             throw std::runtime_error("metric exploded");
           }}};
}

LearningRateSchedule warmup_cosine(const Params& params) {
  return LearningRateSchedule::Cosine(params.get<int64_t>("total", 100), 1e-4).WithWarmup(10);
}
LearningRateSchedule bad_schedule() { return LearningRateSchedule::Step(0, 0.5); }

// A zoo of one file, testzoo/program.cc, with eval_metrics_fn unless told
// otherwise. Each Zoo() call makes a fresh registry.
class ZooProgramTest : public ::testing::Test {
 protected:
  std::shared_ptr<ZooLibrary> Zoo(bool with_metrics = true) {
    registries_.push_back(std::make_unique<ZooRegistry>());
    ZooRegistry& registry = *registries_.back();
    auto add = [&registry](const char* name, ZooEntry e) {
      e.module = "testzoo.program";
      e.name = name;
      registry.Add(std::move(e));
    };
    using zoo_internal::MakeEntry;
    add("linear", MakeEntry(linear));
    add("ThrowingModel", zoo_internal::MakeModelClassEntry<ThrowingModel>());
    add("NormModel", zoo_internal::MakeModelClassEntry<NormModel>());
    add("dataset_fn", MakeEntry(dataset_fn));
    add("loss", MakeEntry(loss));
    add("per_example_loss", MakeEntry(per_example_loss));
    add("optimizer", MakeEntry(optimizer));
    add("nesterov_without_momentum", MakeEntry(nesterov_without_momentum));
    add("throwing_metrics", MakeEntry(throwing_metrics));
    add("scaled_dataset_fn", MakeEntry(scaled_dataset_fn));
    add("scaled_loss", MakeEntry(scaled_loss));
    add("tuned_optimizer", MakeEntry(tuned_optimizer));
    add("named_metrics", MakeEntry(named_metrics));
    add("warmup_cosine", MakeEntry(warmup_cosine));
    add("bad_schedule", MakeEntry(bad_schedule));
    if (with_metrics) add("eval_metrics_fn", MakeEntry(eval_metrics_fn));
    return *ZooLibrary::FromRegistry(&registry, "testzoo");
  }

  ZooProgram Resolve(ZooProgramNames names, std::string_view params = "",
                     bool with_metrics = true) {
    auto program = ZooProgram::Resolve(Zoo(with_metrics), names, params);
    EXPECT_TRUE(program.ok()) << program.status();
    return *program;
  }

  static ZooProgramNames Names(std::string model_def = "testzoo.program.linear") {
    ZooProgramNames names;
    names.model_def = std::move(model_def);
    return names;
  }

  std::vector<std::unique_ptr<ZooRegistry>> registries_;
};

TEST_F(ZooProgramTest, EntriesTakingParamsGetTheJobsParams) {
  ZooProgramNames names = Names();
  names.dataset_fn = "scaled_dataset_fn";
  names.loss = "scaled_loss";
  names.optimizer = "tuned_optimizer";
  names.eval_metrics_fn = "named_metrics";
  ZooProgram program = Resolve(names, "width=2, scale=3, learning_rate=0.25, metric='error'");
  auto dataset = program.MakeDataset(Dataset<Record>::FromVector({RecordOf("2")}), Mode::TRAINING);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto example = dataset->Next();
  ASSERT_TRUE(example.ok() && example->has_value());
  EXPECT_EQ((*example)->features.at("x")[0].item<double>(), 6);
  auto loss = program.Loss(torch::ones({1}), torch::zeros({1}));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->item<double>(), 3);
  auto optimizer = program.Optimizer();
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  EXPECT_EQ(std::get<torch::optim::AdamOptions>(*optimizer).lr(), 0.25);
  auto metrics = program.MakeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->count("error"), 1u);
}

TEST_F(ZooProgramTest, RunsTheEntries) {
  ZooProgram program = Resolve(Names(), "width=2");
  EXPECT_EQ(program.model_def(), "testzoo.program.linear");
  EXPECT_EQ(program.EntryLocation(EntryKind::kLoss), "testzoo/program.cc: loss");
  EXPECT_TRUE(program.has_eval_metrics());

  auto dataset = program.MakeDataset(Dataset<Record>::FromVector({RecordOf("1"), RecordOf("2")}),
                                     Mode::TRAINING);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto batch = dataset->batch(2).Next();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
  EXPECT_EQ((*batch)->features.at("x").sizes(), (std::vector<int64_t>{2, 2}));

  auto model = program.MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  auto outputs = program.Forward(**model, (*batch)->features, /*training=*/true);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_TRUE((*model)->is_training());
  auto loss = program.Loss((*batch)->labels, *outputs);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->dim(), 0);

  auto spec = program.Optimizer();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(DescribeOptimizer(*spec), "SGD(lr=0.1, momentum=0.9)");

  auto metrics = program.MakeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_EQ(metrics->size(), 2u);
  ASSERT_TRUE(program.UpdateMetrics(*metrics, torch::zeros({2, 1}), torch::ones({2, 1})).ok());
  EXPECT_DOUBLE_EQ(MetricResult(metrics->at("mse")->state()), 1.0);
  EXPECT_DOUBLE_EQ(MetricResult(metrics->at("mean_prediction")->state()), 1.0);
}

TEST_F(ZooProgramTest, WhatItMakesKeepsTheLibraryAlive) {
  ZooProgram program = Resolve(Names());
  const long before = program.library().use_count();
  auto model = program.MakeModel();
  auto metrics = program.MakeMetrics();
  auto dataset = program.MakeDataset(Dataset<Record>::FromVector({}), Mode::EVALUATION);
  EXPECT_EQ(program.library().use_count(), before + 4);  // model, 2 metrics, dataset
}

TEST_F(ZooProgramTest, ModelErrorsNameFileAndEntry) {
  ZooProgram program = Resolve(Names("testzoo.program.ThrowingModel"));
  auto model = program.MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  auto outputs = program.Forward(**model, {}, false);
  EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(outputs.status().message(),
            "testzoo/program.cc: ThrowingModel: forward threw: boom in forward");
  // A lone example is named only where a layer says it needs more.
  auto lone = program.Forward(**model, {{"x", torch::ones({1, 2})}}, true);
  EXPECT_EQ(lone.status().message(),
            "testzoo/program.cc: ThrowingModel: forward threw: boom in forward");
  ZooProgram norm = Resolve(Names("testzoo.program.NormModel"));
  auto norm_model = norm.MakeModel();
  ASSERT_TRUE(norm_model.ok()) << norm_model.status();
  EXPECT_TRUE(norm.Forward(**norm_model, {{"x", torch::ones({3, 2})}}, true).ok());
  EXPECT_THAT(norm.Forward(**norm_model, {{"x", torch::ones({1, 2})}}, true).status().message(),
              AllOf(HasSubstr("Expected more than 1 value per channel"),
                    HasSubstr("(this minibatch holds 1 example, what its task's records left: "
                              "layers such as BatchNorm need more than one in training")));

  ZooProgram linear = Resolve(Names());
  auto m = linear.MakeModel();
  auto wrong_shape = linear.Forward(**m, {{"x", torch::ones({4, 3})}}, false);
  EXPECT_EQ(wrong_shape.status().message(),
            "testzoo/program.cc: linear: forward threw: input 'x' has batch shape [4, 3]; the "
            "model expects [batch, 2]");
  auto missing = linear.Forward(**m, {{"y", torch::ones({4, 2})}}, false);
  EXPECT_EQ(missing.status().message(),
            "testzoo/program.cc: linear: forward threw: the model's input 'x' is not among the "
            "features [y]");

  ZooProgram bad_params = Resolve(Names(), "width=2.5");
  EXPECT_EQ(bad_params.MakeModel().status().message(),
            "testzoo/program.cc: linear threw: --params: 'width' is a float (2.5), expected an "
            "integer");
}

TEST_F(ZooProgramTest, LossMustBeAScalar) {
  ZooProgramNames names = Names();
  names.loss = "per_example_loss";
  ZooProgram program = Resolve(names);
  auto loss = program.Loss(torch::zeros({3, 1}), torch::ones({3, 1}));
  EXPECT_EQ(loss.status().message(),
            "testzoo/program.cc: per_example_loss: returned a Float tensor of shape [3, 1]; a "
            "loss is one floating-point value (reduce it, e.g. with .mean())");
  EXPECT_THAT(std::string(program.Loss(torch::zeros({3}), torch::ones({2, 2})).status().message()),
              StartsWith("testzoo/program.cc: per_example_loss threw: "));
}

TEST_F(ZooProgramTest, InvalidOptimizerAndThrowingMetric) {
  ZooProgramNames names = Names();
  names.optimizer = "nesterov_without_momentum";
  names.eval_metrics_fn = "throwing_metrics";
  ZooProgram program = Resolve(names);
  EXPECT_EQ(program.Optimizer().status().message(),
            "testzoo/program.cc: nesterov_without_momentum: optimizer SGD: nesterov needs "
            "momentum > 0 and dampening = 0");
  auto metrics = program.MakeMetrics();
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(program.UpdateMetrics(*metrics, torch::ones({1}), torch::ones({1})).message(),
            "testzoo/program.cc: throwing_metrics: metric 'broken' threw: metric exploded");
}

TEST_F(ZooProgramTest, DatasetErrorsCanBeAnnotated) {
  ZooProgram program = Resolve(Names());
  auto dataset =
      program.MakeDataset(Dataset<Record>::FromVector({RecordOf("bad")}), Mode::TRAINING);
  ASSERT_TRUE(dataset.ok());
  auto next = dataset->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(program.Annotate(next.status(), EntryKind::kDatasetFn).message(),
            "testzoo/program.cc: dataset_fn: record 0: unparsable record");
}

TEST_F(ZooProgramTest, ResolveErrorsNameTheFlag) {
  auto zoo = Zoo();
  auto resolve = [&](ZooProgramNames names, std::string_view params = "") {
    return ZooProgram::Resolve(zoo, names, params).status();
  };
  EXPECT_THAT(std::string(resolve(Names("linear")).message()),
              StartsWith("--model_def: 'linear' does not name a zoo entry"));
  EXPECT_EQ(resolve(Names("testzoo.program.loss")).message(),
            "--model_def: testzoo/program.cc: 'loss' is a loss, not a model");
  EXPECT_EQ(resolve(Names("testzoo.other.linear")).code(), StatusCode::kNotFound);

  ZooProgramNames names = Names();
  names.loss = "focal";
  EXPECT_THAT(std::string(resolve(names).message()),
              StartsWith("--loss: testzoo/program.cc has no entry 'focal'; entries: "));
  names = Names();
  names.dataset_fn = "elsewhere.dataset_fn";
  EXPECT_EQ(resolve(names).message(),
            "--dataset_fn: model zoo has no file elsewhere.cc (module elsewhere); files: "
            "testzoo/program.cc");
  names = Names();
  names.eval_metrics_fn = "metrics_that_are_not_there";
  EXPECT_THAT(std::string(resolve(names).message()),
              StartsWith("--eval_metrics_fn: testzoo/program.cc has no entry"));
  EXPECT_THAT(std::string(resolve(Names(), "width=").message()), StartsWith("--params: "));
}

TEST_F(ZooProgramTest, LearningRateScheduleIsOptionalUnderItsDefaultName) {
  auto none = Resolve(Names()).LearningRateScheduleOf();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  ZooProgramNames names = Names();
  names.learning_rate_schedule = "warmup_cosine";
  auto schedule = Resolve(names, "total=500").LearningRateScheduleOf();
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  ASSERT_TRUE(schedule->has_value());
  EXPECT_EQ(**schedule, LearningRateSchedule::Cosine(500, 1e-4).WithWarmup(10));

  names.learning_rate_schedule = "bad_schedule";
  EXPECT_EQ(Resolve(names).LearningRateScheduleOf().status().message(),
            "testzoo/program.cc: bad_schedule: learning-rate schedule: step=0 must be >= 1");
  names.learning_rate_schedule = "no_such_schedule";
  auto missing = ZooProgram::Resolve(Zoo(), names, "");
  EXPECT_THAT(std::string(missing.status().message()),
              StartsWith("--learning_rate_schedule: testzoo/program.cc has no entry"));
}

TEST_F(ZooProgramTest, DefaultEvalMetricsFnIsOptional) {
  ZooProgram program = Resolve(Names(), "", /*with_metrics=*/false);
  EXPECT_FALSE(program.has_eval_metrics());
  auto metrics = program.MakeMetrics();
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(metrics->empty());
}

TEST(ZooProgramNamesTest, ModulesAreTheModelsAndThoseOfDottedNames) {
  ZooProgramNames names;
  names.model_def = "mnist.mnist_functional_api.custom_model";
  EXPECT_EQ(names.Modules(), (std::vector<std::string>{"mnist.mnist_functional_api"}));
  names.loss = "loss";  // the model's module
  names.optimizer = "mnist.mnist_functional_api.custom_model.default_optimizer";  // a default
  names.dataset_fn = "mnist.mnist_input_fn.dataset_fn";
  names.eval_metrics_fn = "common.metrics.eval_metrics_fn";
  EXPECT_EQ(names.Modules(),
            (std::vector<std::string>{"common.metrics", "mnist.mnist_functional_api",
                                      "mnist.mnist_input_fn"}));
  names.model_def = "no_dots";
  EXPECT_TRUE(names.Modules().empty());
}

}  // namespace
}  // namespace elasticdl
