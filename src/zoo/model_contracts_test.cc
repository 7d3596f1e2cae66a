// Seed 002's model files (input_fn, feature_columns, label_columns) and seed
// 003's model-class defaults, resolved and run through ZooProgram.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/example_wire.h"
#include "zoo/zoo_program.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;

// A tf.train.Example with `pixels` (4 floats) and, unless negative, `label`.
Record ImageRecord(float value, int64_t label) {
  Record r;
  example::ExampleEncoder e(&r.data);
  if (label >= 0) e.AddInt64("label", label);
  std::vector<float> pixels(4, value);
  e.AddFloats("pixels", pixels);
  e.Finish();
  return r;
}

// --- seed 002: testzoo/seed002.cc ------------------------------------------

std::shared_ptr<Model> model() {
  return Functional(Input("image", {1, 2, 2}),
                    torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(4, 1)));
}

// The seed's input_fn: per record, then batched.
InputFnResult input_fn(const std::vector<Features>& records) {
  std::vector<torch::Tensor> images;
  std::vector<torch::Tensor> labels;
  for (const Features& r : records) {
    images.push_back(r["pixels"] / 255.0);
    if (r.tensors.count("label") != 0) labels.push_back(r["label"]);
  }
  torch::Tensor label_batch = labels.empty() ? torch::Tensor() : torch::cat(labels);
  return {{{"image", torch::stack(images)}}, label_batch};
}

std::vector<NumericColumn> feature_columns() {
  return {numeric_column("image", torch::kFloat32, {1, 2, 2})};
}
std::vector<NumericColumn> label_columns() { return {numeric_column("label", torch::kInt64)}; }

// (output, labels): the sum of the labels, whatever the output, so that the
// test sees which argument came first.
torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) {
  EXPECT_EQ(output.scalar_type(), torch::kFloat32);
  EXPECT_EQ(labels.scalar_type(), torch::kInt64);
  return labels.to(torch::kFloat32).sum() + 0 * output.sum();
}

OptimizerSpec optimizer(double lr = 0.1) { return torch::optim::SGDOptions(lr); }

// Variants that break the schema.
InputFnResult flat_input_fn(const std::vector<Features>& records) {
  auto [inputs, labels] = input_fn(records);
  inputs["image"] = inputs["image"].reshape({-1, 4});  // right count: reshaped
  return {inputs, labels};
}
InputFnResult short_input_fn(const std::vector<Features>& records) {
  auto [inputs, labels] = input_fn(records);
  inputs["image"] = inputs["image"].reshape({-1, 4}).narrow(1, 0, 3);
  return {inputs, labels};
}
InputFnResult renamed_input_fn(const std::vector<Features>& records) {
  auto [inputs, labels] = input_fn(records);
  return {{{"img", inputs["image"]}}, labels};
}
InputFnResult extra_input_fn(const std::vector<Features>& records) {
  auto [inputs, labels] = input_fn(records);
  inputs["extra"] = inputs["image"];
  return {inputs, labels};
}
InputFnResult double_input_fn(const std::vector<Features>& records) {
  auto [inputs, labels] = input_fn(records);
  return {{{"image", inputs["image"].to(torch::kFloat64)}}, labels};
}
InputFnResult unlabelled_input_fn(const std::vector<Features>& records) {
  return {input_fn(records).first, torch::Tensor()};
}

// A seed 001 file's dataset_fn, for the file that mixes both.
Dataset<Example> dataset_fn(Dataset<Record> records, Mode) {
  return records.map([](const Record&) { return Example(); });
}

// --- seed 003: testzoo/credit.cc --------------------------------------------

struct CreditModel : Model {
  CreditModel() { linear_ = register_module("linear", torch::nn::Linear(4, 1)); }
  torch::Tensor forward(const FeatureMap& inputs, bool) override {
    return linear_(inputs.at("pixels"));
  }

  static torch::Tensor default_loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
    return torch::mse_loss(predictions, labels.to(torch::kFloat32));
  }
  static OptimizerSpec default_optimizer() { return torch::optim::AdamOptions(0.01); }
  static StatusOr<Example> default_input(const Record& record, Mode mode) {
    EDL_ASSIGN_OR_RETURN(Features f, ParseAllFeatures(record.data));
    Example e;
    e.features["pixels"] = f["pixels"];
    if (mode != Mode::PREDICTION) e.labels = f["label"];
    return e;
  }
  static MetricMap default_eval_metrics() {
    return {{"mse", [] { return MeanSquaredError(); }}};
  }

  torch::nn::Linear linear_{nullptr};
};

// A subclass declaring one default of its own; and the file's own entries.
struct PlainModel : CreditModel {
  static torch::Tensor default_loss(const torch::Tensor&, const torch::Tensor& predictions) {
    return predictions.sum();
  }
};
torch::Tensor credit_loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::l1_loss(predictions, labels.to(torch::kFloat32));
}
OptimizerSpec sgd() { return torch::optim::SGDOptions(0.5); }

class ModelContractsTest : public ::testing::Test {
 protected:
  // A fresh registry each call.
  std::shared_ptr<ZooLibrary> Zoo() {
    registries_.push_back(std::make_unique<ZooRegistry>());
    ZooRegistry& r = *registries_.back();
    using zoo_internal::MakeEntry;
    r.Add("testzoo.seed002", "model", MakeEntry(model));
    r.Add("testzoo.seed002", "input_fn", MakeEntry(input_fn));
    r.Add("testzoo.seed002", "feature_columns", MakeEntry(feature_columns));
    r.Add("testzoo.seed002", "label_columns", MakeEntry(label_columns));
    r.Add("testzoo.seed002", "loss", MakeEntry(loss));
    r.Add("testzoo.seed002", "optimizer", MakeEntry(ELASTICDL_ZOO_FORWARD_(optimizer)));
    for (auto [name, fn] : {std::pair{"flat_input_fn", &flat_input_fn},
                            {"short_input_fn", &short_input_fn},
                            {"renamed_input_fn", &renamed_input_fn},
                            {"extra_input_fn", &extra_input_fn},
                            {"double_input_fn", &double_input_fn},
                            {"unlabelled_input_fn", &unlabelled_input_fn}}) {
      r.Add("testzoo.seed002", name, MakeEntry(fn));
    }
    // Both contracts in one file.
    r.Add("testzoo.mixed", "model", MakeEntry(model));
    r.Add("testzoo.mixed", "dataset_fn", MakeEntry(dataset_fn));
    r.Add("testzoo.mixed", "input_fn", MakeEntry(input_fn));
    r.Add("testzoo.mixed", "feature_columns", MakeEntry(feature_columns));
    // input_fn without label_columns.
    r.Add("testzoo.unlabelled", "model", MakeEntry(model));
    r.Add("testzoo.unlabelled", "input_fn", MakeEntry(input_fn));
    r.Add("testzoo.unlabelled", "feature_columns", MakeEntry(feature_columns));
    // Seed 003.
    r.Add("testzoo.credit", "CreditModel", zoo_internal::MakeModelClassEntry<CreditModel>());
    r.Add("testzoo.credit", "PlainModel", zoo_internal::MakeModelClassEntry<PlainModel>());
    r.Add("testzoo.credit", "credit_loss", MakeEntry(credit_loss));
    r.Add("testzoo.credit", "sgd", MakeEntry(sgd));
    r.Add("testzoo.credit", "optimizer", MakeEntry(sgd));
    return *ZooLibrary::FromRegistry(&r, "testzoo");
  }

  StatusOr<ZooProgram> Resolve(const std::string& model_def, const std::string& dataset_fn = "") {
    ZooProgramNames names;
    names.model_def = model_def;
    names.dataset_fn = dataset_fn;
    return ZooProgram::Resolve(Zoo(), names, "");
  }

  // The first minibatch of `records`, or the pipeline's error.
  static StatusOr<Example> FirstBatch(const ZooProgram& program, std::vector<Record> records,
                                      Mode mode, size_t minibatch) {
    EDL_ASSIGN_OR_RETURN(
        Dataset<Example> batches,
        program.MakeBatches(Dataset<Record>::FromVector(std::move(records)), mode, minibatch));
    EDL_ASSIGN_OR_RETURN(std::optional<Example> first, batches.Next());
    if (!first.has_value()) return absl::OutOfRangeError("no batch");
    return std::move(*first);
  }

  std::vector<std::unique_ptr<ZooRegistry>> registries_;
};

TEST_F(ModelContractsTest, Seed002FileTrainsWithModelDefAlone) {
  StatusOr<ZooProgram> program = Resolve("testzoo.seed002.model");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->resolved().dataset_fn, "testzoo.seed002.input_fn");
  EXPECT_EQ(program->resolved().loss, "testzoo.seed002.loss");
  EXPECT_EQ(program->resolved().optimizer, "testzoo.seed002.optimizer");
  EXPECT_EQ(program->resolved().eval_metrics_fn, "");
  EXPECT_EQ(DescribeOptimizer(*program->Optimizer()),
            DescribeOptimizer(torch::optim::SGDOptions(0.1)));

  std::vector<Record> records;
  for (int i = 0; i < 5; ++i) records.push_back(ImageRecord(10.0F * i, i));
  StatusOr<Dataset<Example>> batches =
      program->MakeBatches(Dataset<Record>::FromVector(records), Mode::TRAINING, 2);
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::vector<int64_t> sizes;
  for (const Example& batch : *batches) {
    sizes.push_back(batch.features.at("image").size(0));
    EXPECT_EQ(batch.features.at("image").sizes().slice(1), c10::IntArrayRef({1, 2, 2}));
    EXPECT_EQ(batch.labels.sizes(), c10::IntArrayRef({sizes.back(), 1}));
    EXPECT_EQ(batch.origins.size(), static_cast<size_t>(sizes.back()));
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));

  // The loss gets (output, labels).
  StatusOr<Example> batch =
      FirstBatch(*program, {ImageRecord(1, 3), ImageRecord(2, 4)}, Mode::TRAINING, 2);
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto m = program->MakeModel();
  ASSERT_TRUE(m.ok());
  auto output = program->Forward(**m, batch->features, true);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_DOUBLE_EQ(program->Loss(batch->labels, *output)->item<double>(), 7.0);
}

TEST_F(ModelContractsTest, Seed002PredictionNeedsNoLabels) {
  StatusOr<ZooProgram> program = Resolve("testzoo.seed002.model");
  ASSERT_TRUE(program.ok()) << program.status();
  StatusOr<Example> batch =
      FirstBatch(*program, {ImageRecord(1, -1), ImageRecord(2, -1)}, Mode::PREDICTION, 4);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_FALSE(batch->labels.defined());
  EXPECT_EQ(batch->features.at("image").size(0), 2);

  StatusOr<Example> training = FirstBatch(*program, {ImageRecord(1, -1)}, Mode::TRAINING, 4);
  EXPECT_THAT(training.status().message(),
              HasSubstr("testzoo/seed002.cc: input_fn: returned no labels for a training "
                        "minibatch; label_columns() declares label Long [1]"));
}

TEST_F(ModelContractsTest, Seed002OutputsAreCheckedAgainstTheColumns) {
  const std::vector<Record> records = {ImageRecord(1, 0), ImageRecord(2, 1)};
  auto error = [&](const std::string& input_fn) -> std::string {
    StatusOr<ZooProgram> program = Resolve("testzoo.seed002.model", input_fn);
    if (!program.ok()) return std::string(program.status().message());
    return std::string(FirstBatch(*program, records, Mode::TRAINING, 2).status().message());
  };
  // The same number of values per example is reshaped to the column's shape.
  EXPECT_EQ(error("flat_input_fn"), "");
  EXPECT_EQ(error("short_input_fn"),
            "testzoo/seed002.cc: short_input_fn: model input 'image' has shape [2, 3] (3 values "
            "per example); feature_columns() declares image Float [1, 2, 2] (4 values)");
  EXPECT_EQ(error("renamed_input_fn"),
            "testzoo/seed002.cc: renamed_input_fn: returned no model input 'image' that "
            "feature_columns() declares (image Float [1, 2, 2]); it returned: img");
  EXPECT_EQ(error("extra_input_fn"),
            "testzoo/seed002.cc: extra_input_fn: returned model input 'extra' that "
            "feature_columns() does not declare (it declares image)");
  EXPECT_EQ(error("double_input_fn"),
            "testzoo/seed002.cc: double_input_fn: model input 'image' is Double; "
            "feature_columns() declares image Float [1, 2, 2]");
  EXPECT_THAT(error("unlabelled_input_fn"), HasSubstr("returned no labels"));
}

TEST_F(ModelContractsTest, AFileMixingBothContractsIsRefused) {
  EXPECT_EQ(Resolve("testzoo.mixed.model").status().message(),
            "testzoo/mixed.cc mixes two model-file contracts: dataset_fn (seed 001) and "
            "input_fn, feature_columns (seed 002); a file registers either dataset_fn, or "
            "input_fn with feature_columns and label_columns");
  EXPECT_THAT(Resolve("testzoo.unlabelled.model").status().message(),
              HasSubstr("testzoo/unlabelled.cc registers input_fn but no label_columns"));
}

TEST_F(ModelContractsTest, ClassDefaultsAreUsedUnlessOverridden) {
  StatusOr<ZooProgram> program = Resolve("testzoo.credit.CreditModel");
  ASSERT_TRUE(program.ok()) << program.status();
  const ZooProgramNames& used = program->resolved();
  EXPECT_EQ(used.dataset_fn, "testzoo.credit.CreditModel.default_input");
  EXPECT_EQ(used.loss, "testzoo.credit.CreditModel.default_loss");
  EXPECT_EQ(used.optimizer, "testzoo.credit.CreditModel.default_optimizer");
  EXPECT_EQ(used.eval_metrics_fn, "testzoo.credit.CreditModel.default_eval_metrics");
  EXPECT_EQ(program->EntryLocation(EntryKind::kLoss),
            "testzoo/credit.cc: CreditModel.default_loss");
  EXPECT_EQ(DescribeOptimizer(*program->Optimizer()),
            DescribeOptimizer(torch::optim::AdamOptions(0.01)));

  // The recorded names resolve to the same entries again.
  StatusOr<ZooProgram> again = ZooProgram::Resolve(Zoo(), used, "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->resolved().loss, used.loss);
  EXPECT_EQ(again->resolved().dataset_fn, used.dataset_fn);

  // default_input is a per-record function; the batches come out as usual.
  StatusOr<Example> batch =
      FirstBatch(*program, {ImageRecord(1, 2), ImageRecord(3, 4)}, Mode::TRAINING, 2);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->features.at("pixels").sizes(), c10::IntArrayRef({2, 4}));
  EXPECT_EQ(batch->labels.sizes(), c10::IntArrayRef({2, 1}));
  EXPECT_EQ(program->MakeMetrics()->count("mse"), 1U);

  // The command line wins.
  ZooProgramNames names;
  names.model_def = "testzoo.credit.CreditModel";
  names.loss = "credit_loss";
  names.optimizer = "sgd";
  StatusOr<ZooProgram> overridden = ZooProgram::Resolve(Zoo(), names, "");
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->resolved().loss, "testzoo.credit.credit_loss");
  EXPECT_EQ(overridden->resolved().optimizer, "testzoo.credit.sgd");
  EXPECT_EQ(overridden->resolved().dataset_fn, "testzoo.credit.CreditModel.default_input");

  // A subclass inherits the defaults it does not declare.
  names.model_def = "testzoo.credit.PlainModel";
  names.loss.clear();
  names.dataset_fn = "testzoo.credit.CreditModel.default_input";
  names.optimizer.clear();
  // A default of another class is not reachable by its dotted name: only
  // the model's own.
  EXPECT_THAT(ZooProgram::Resolve(Zoo(), names, "").status().message(),
              HasSubstr("--dataset_fn: model zoo has no file testzoo/credit/CreditModel.cc"));
  names.dataset_fn = "testzoo.credit.PlainModel.default_input";
  StatusOr<ZooProgram> inherited = ZooProgram::Resolve(Zoo(), names, "");
  ASSERT_TRUE(inherited.ok()) << inherited.status();
  EXPECT_EQ(inherited->resolved().loss, "testzoo.credit.PlainModel.default_loss");
  EXPECT_EQ(inherited->resolved().optimizer, "testzoo.credit.PlainModel.default_optimizer");

  names.loss = "testzoo.credit.PlainModel.default_nothing";
  EXPECT_EQ(ZooProgram::Resolve(Zoo(), names, "").status().message(),
            "--loss: model testzoo.credit.PlainModel has no 'default_nothing' (its defaults: "
            "PlainModel.default_loss, PlainModel.default_optimizer, PlainModel.default_input, "
            "PlainModel.default_eval_metrics)");
}

TEST(ParseAllFeaturesTest, EveryFeatureWithoutASpec) {
  std::string record;
  example::ExampleEncoder e(&record);
  e.AddBytes("name", "ada");
  e.AddInt64("label", 7);
  std::vector<float> pixels = {1, 2, 3};
  e.AddFloats("pixels", pixels);
  e.Finish();
  StatusOr<Features> f = ParseAllFeatures(record);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(torch::equal((*f)["pixels"], torch::tensor({1.0F, 2.0F, 3.0F})));
  EXPECT_TRUE(torch::equal((*f)["label"], torch::tensor({int64_t{7}})));
  EXPECT_EQ(f->bytes.at("name"), std::vector<std::string>{"ada"});
  EXPECT_EQ(ParseAllFeatures("\x0a\xff").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace elasticdl
