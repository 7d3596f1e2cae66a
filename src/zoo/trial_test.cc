// Seed 004's trials resolved and run through ZooProgram: the compiled
// model's parts, the loaders on threads and processes, the callbacks, and
// the errors that name the trial.
#include "elasticdl/zoo/trial.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <set>
#include <thread>

#include "data/example_wire.h"
#include "zoo/zoo_program.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;

// How many examples the counting sequence has made.
std::atomic<int> made{0};

// A tf.train.Example with `pixels` (4 floats of `value`) and, unless
// negative, `label`; record `index` of file "data.rio".
Record ImageRecord(float value, int64_t label, uint64_t index) {
  static const auto file = std::make_shared<const std::string>("data.rio");
  Record r;
  example::ExampleEncoder e(&r.data);
  if (label >= 0) e.AddInt64("label", label);
  std::vector<float> pixels(4, value);
  e.AddFloats("pixels", pixels);
  e.Finish();
  r.file = file;
  r.index = index;
  return r;
}

std::vector<Record> Records(int n, bool labels = true) {
  std::vector<Record> records;
  for (int i = 0; i < n; ++i) records.push_back(ImageRecord(i, labels ? i % 2 : -1, i));
  return records;
}

// --- testzoo/trial.cc -------------------------------------------------------

StatusOr<Example> parse(const Record& record, Mode mode) {
  EDL_ASSIGN_OR_RETURN(Features f, ParseAllFeatures(record.data));
  Example example({{"pixels", f["pixels"]}});
  if (mode != Mode::PREDICTION) example.labels = f["label"];
  return example;
}

// Random augmentation from the generator.
StatusOr<Example> noisy(const Record& record, Mode mode, at::Generator& generator) {
  EDL_ASSIGN_OR_RETURN(Example example, parse(record, mode));
  example.features["pixels"] = example.features["pixels"] + torch::rand({4}, generator);
  return example;
}

// Where the example was made: the process and the thread.
StatusOr<Example> located(const Record& record, Mode mode) {
  EDL_ASSIGN_OR_RETURN(Example example, parse(record, mode));
  example.features["pid"] = torch::tensor({static_cast<int64_t>(::getpid())});
  example.features["thread"] = torch::tensor(
      {static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()))});
  return example;
}

StatusOr<Example> counted(const Record& record, Mode mode) {
  ++made;
  return parse(record, mode);
}

// Record 3 is refused; record 5 ends the process that makes it.
StatusOr<Example> picky(const Record& record, Mode mode) {
  EDL_ASSIGN_OR_RETURN(Example example, parse(record, mode));
  const float value = example.features["pixels"][0].item<float>();
  if (value == 3) return absl::InvalidArgumentError("three is not welcome");
  if (value == 5) std::_Exit(3);
  return example;
}

StatusOr<Example> sparse(const Record& record, Mode mode) {
  EDL_ASSIGN_OR_RETURN(Example example, parse(record, mode));
  example.features["pixels"] = example.features["pixels"].to_sparse();
  return example;
}

struct LinearModel : Model {
  LinearModel() { linear = register_module("linear", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(const FeatureMap& inputs, bool) override {
    return linear(inputs.at("pixels"));
  }
  torch::nn::Linear linear{nullptr};
};

torch::Tensor cross_entropy(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::nn::functional::cross_entropy(predictions, labels.flatten());
}

// The loaders follow hyperparameters: `sequence` (noisy, located, counted,
// picky, sparse), `workers`, `processes`, `queue`, `shuffle`; `callbacks`
// picks a set of callbacks.
class TestTrial : public Trial {
 public:
  explicit TestTrial(const Hparams& hparams) : constructed_with_(hparams) {}

  CompiledModel build_model(const Hparams& hparams) override {
    EXPECT_EQ(hparams, constructed_with_);
    ++models_built;
    return Compile(std::make_shared<LinearModel>())
        .optimizer(torch::optim::SGDOptions(hparams.get<double>("learning_rate")))
        .loss(cross_entropy)
        .metrics({{"accuracy", Accuracy}});
  }

  DataLoaders make_data_loaders(const Hparams& hparams) override {
    const std::string sequence = hparams.get<std::string>("sequence", "noisy");
    DataAdapter training;
    if (sequence == "noisy") training = DataAdapter(noisy);
    if (sequence == "located") training = DataAdapter(located);
    if (sequence == "counted") training = DataAdapter(counted);
    if (sequence == "picky") training = DataAdapter(picky);
    if (sequence == "sparse") training = DataAdapter(sparse);
    training.workers(hparams.get<int>("workers", 1))
        .use_multiprocessing(hparams.get<bool>("processes", false))
        .max_queue_size(hparams.get<int>("queue", 10))
        .shuffle(hparams.get<int>("shuffle", 0));
    return {training, DataAdapter(parse).workers(0)};
  }

  std::vector<Callback> callbacks(const Hparams& hparams) override {
    const std::string which = hparams.get<std::string>("callbacks", "none");
    if (which == "all") {
      return {LearningRateScheduler(LearningRateSchedule::Step(10, 0.5)),
              EarlyStopping("accuracy", EarlyStopping::kMax, 3, 0.01), MaxStepsStopping(100)};
    }
    if (which == "twice") return {MaxStepsStopping(100), MaxStepsStopping(200)};
    if (which == "unknown_metric") return {EarlyStopping("auc", EarlyStopping::kMax, 3)};
    if (which == "bad_schedule") {
      return {LearningRateScheduler(LearningRateSchedule::Step(0, 0.5))};
    }
    return {};
  }

  static inline std::atomic<int> models_built{0};

 private:
  Hparams constructed_with_;
};

// build_model throws; its loaders read a hyperparameter without default.
class ThrowingTrial : public Trial {
 public:
  CompiledModel build_model(const Hparams&) override {
    TORCH_CHECK(false, "no model today");
    return {};
  }
  DataLoaders make_data_loaders(const Hparams&) override { return {}; }
};

class LoaderKeyTrial : public TestTrial {
 public:
  using TestTrial::TestTrial;
  DataLoaders make_data_loaders(const Hparams& hparams) override {
    return {DataAdapter(parse).workers(hparams.get<int>("loader_threads")), DataAdapter(parse)};
  }
};

class IncompleteTrial : public Trial {
 public:
  CompiledModel build_model(const Hparams&) override {
    return Compile(std::make_shared<LinearModel>()).loss(cross_entropy);
  }
  DataLoaders make_data_loaders(const Hparams&) override { return {DataAdapter(parse), {}}; }
};

class TrialTest : public ::testing::Test {
 protected:
  std::shared_ptr<ZooLibrary> Zoo() {
    registries_.push_back(std::make_unique<ZooRegistry>());
    ZooRegistry& r = *registries_.back();
    using zoo_internal::MakeTrialEntry;
    r.Add("testzoo.trial", "TestTrial", MakeTrialEntry<TestTrial>());
    r.Add("testzoo.trial", "ThrowingTrial", MakeTrialEntry<ThrowingTrial>());
    r.Add("testzoo.trial", "LoaderKeyTrial", MakeTrialEntry<LoaderKeyTrial>());
    r.Add("testzoo.trial", "IncompleteTrial", MakeTrialEntry<IncompleteTrial>());
    return *ZooLibrary::FromRegistry(&r, "testzoo");
  }

  StatusOr<ZooProgram> Resolve(const std::string& params,
                               const std::string& trial = "testzoo.trial.TestTrial") {
    ZooProgramNames names;
    names.model_def = trial;
    return ZooProgram::Resolve(Zoo(), names, params);
  }

  // Every element of MakeDataset (batch 0) or MakeBatches over seeded records.
  static StatusOr<std::vector<Example>> All(const ZooProgram& program, std::vector<Record> records,
                                            Mode mode, size_t batch = 4) {
    Dataset<Record> seeded = Dataset<Record>::FromVector(std::move(records)).with_seed(42);
    EDL_ASSIGN_OR_RETURN(Dataset<Example> examples, batch == 0
                                                        ? program.MakeDataset(seeded, mode)
                                                        : program.MakeBatches(seeded, mode, batch));
    std::vector<Example> out;
    while (true) {
      EDL_ASSIGN_OR_RETURN(std::optional<Example> e, examples.Next());
      if (!e.has_value()) return out;
      out.push_back(std::move(*e));
    }
  }

  std::vector<std::unique_ptr<ZooRegistry>> registries_;
};

TEST_F(TrialTest, ATrialIsTheWholeProgram) {
  std::shared_ptr<ZooLibrary> zoo = Zoo();
  EXPECT_TRUE(*ZooProgram::NamesTrial(*zoo, "testzoo.trial.TestTrial"));
  EXPECT_EQ(ZooProgram::NamesTrial(*zoo, "testzoo.trial.Nothing").status().code(),
            absl::StatusCode::kNotFound);
  StatusOr<ZooProgram> program = Resolve("learning_rate=0.5");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(program->is_trial());
  const ZooProgramNames& used = program->resolved();
  EXPECT_EQ(used.model_def, "testzoo.trial.TestTrial");
  EXPECT_EQ(used.dataset_fn, "testzoo.trial.TestTrial.make_data_loaders");
  EXPECT_EQ(used.loss, "testzoo.trial.TestTrial.build_model");
  EXPECT_EQ(used.optimizer, "testzoo.trial.TestTrial.build_model");
  EXPECT_EQ(used.eval_metrics_fn, "testzoo.trial.TestTrial.build_model");
  EXPECT_EQ(used.learning_rate_schedule, "");
  EXPECT_EQ(DescribeOptimizer(*program->Optimizer()),
            DescribeOptimizer(torch::optim::SGDOptions(0.5)));
  EXPECT_TRUE(program->has_eval_metrics());
  EXPECT_EQ(program->EntryLocation(EntryKind::kLoss), "testzoo/trial.cc: TestTrial: loss");

  // The recorded names resolve to the same program: what evaluate and
  // predict do with --trained_model.
  StatusOr<ZooProgram> again = ZooProgram::Resolve(Zoo(), used, "learning_rate=0.5");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->resolved().dataset_fn, used.dataset_fn);

  // Every model is new, from build_model.
  const int built = TestTrial::models_built;
  StatusOr<std::shared_ptr<Model>> model = program->MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NE(model->get(), program->MakeModel()->get());
  EXPECT_EQ(TestTrial::models_built, built + 2);

  // Training minibatches come from the training loader, and train.
  StatusOr<std::vector<Example>> batches = All(*program, Records(10), Mode::TRAINING);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 3U);
  const Example& first = batches->front();
  EXPECT_EQ(first.features.at("pixels").sizes(), c10::IntArrayRef({4, 4}));
  EXPECT_EQ(first.labels.sizes(), c10::IntArrayRef({4, 1}));
  // The training sequence adds noise in [0, 1).
  EXPECT_FALSE(torch::equal(first.features.at("pixels")[1], torch::ones({4})));
  StatusOr<torch::Tensor> outputs = program->Forward(**model, first.features, true);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  StatusOr<torch::Tensor> loss = program->Loss(first.labels, *outputs);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->dim(), 0);
  auto metrics = program->MakeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_EQ(metrics->count("accuracy"), 1U);
  ASSERT_TRUE(program->UpdateMetrics(*metrics, first.labels, *outputs).ok());
  EXPECT_EQ(metrics->at("accuracy")->state().values.at(1), 4);  // (sum, count)

  // Evaluation and prediction use the validation loader: no noise, and no
  // labels in prediction.
  StatusOr<std::vector<Example>> evaluation = All(*program, Records(5), Mode::EVALUATION);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  EXPECT_TRUE(torch::equal(evaluation->front().features.at("pixels")[1], torch::ones({4})));
  EXPECT_TRUE(evaluation->front().labels.defined());
  StatusOr<std::vector<Example>> prediction =
      All(*program, Records(5, /*labels=*/false), Mode::PREDICTION);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_FALSE(prediction->front().labels.defined());
}

TEST_F(TrialTest, LoaderWorkersThreadsAndProcessesMakeTheSameExamples) {
  // Seeded records, shuffled, with noise from the generator: the same
  // examples, in the same order, however they are made.
  std::vector<Example> reference;
  for (const char* loader : {"workers=0", "workers=1", "workers=3", "workers=1,processes=true",
                             "workers=3,processes=true,queue=2", "workers=2,queue=1"}) {
    SCOPED_TRACE(loader);
    StatusOr<ZooProgram> program = Resolve(StrCat("learning_rate=0.1,shuffle=8,", loader));
    ASSERT_TRUE(program.ok()) << program.status();
    StatusOr<std::vector<Example>> batches = All(*program, Records(37), Mode::TRAINING);
    ASSERT_TRUE(batches.ok()) << batches.status();
    // Every record once.
    std::multiset<uint64_t> indices;
    for (const Example& b : *batches) {
      for (const RecordOrigin& o : b.origins) indices.insert(o.index);
    }
    std::multiset<uint64_t> expected;
    for (uint64_t i = 0; i < 37; ++i) expected.insert(i);
    EXPECT_EQ(indices, expected);
    if (reference.empty()) {
      reference = std::move(*batches);
      // Shuffled.
      EXPECT_NE(reference.front().origins.front().index, 0U);
      continue;
    }
    ASSERT_EQ(batches->size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_TRUE(
          torch::equal((*batches)[i].features.at("pixels"), reference[i].features.at("pixels")));
      EXPECT_TRUE(torch::equal((*batches)[i].labels, reference[i].labels));
      ASSERT_EQ((*batches)[i].origins.size(), reference[i].origins.size());
      for (size_t j = 0; j < reference[i].origins.size(); ++j) {
        EXPECT_EQ((*batches)[i].origins[j].index, reference[i].origins[j].index);
        EXPECT_EQ(*(*batches)[i].origins[j].file, "data.rio");
      }
    }
  }
}

TEST_F(TrialTest, LoaderOptionsReachTheMapStage) {
  const auto self = static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()));
  auto where = [&](const std::string& loader) -> std::pair<std::set<int64_t>, std::set<int64_t>> {
    StatusOr<ZooProgram> program = Resolve("learning_rate=0.1,sequence=located," + loader);
    EXPECT_TRUE(program.ok()) << program.status();
    StatusOr<std::vector<Example>> examples = All(*program, Records(24), Mode::TRAINING, 0);
    EXPECT_TRUE(examples.ok()) << examples.status();
    std::set<int64_t> pids;
    std::set<int64_t> threads;
    for (const Example& e : *examples) {
      pids.insert(e.features.at("pid").item<int64_t>());
      threads.insert(e.features.at("thread").item<int64_t>());
    }
    return {pids, threads};
  };
  // workers=0: the consumer's thread.
  auto [pids, threads] = where("workers=0");
  EXPECT_EQ(pids, std::set<int64_t>{::getpid()});
  EXPECT_EQ(threads, std::set<int64_t>{self});
  // Threads of this process.
  std::tie(pids, threads) = where("workers=3");
  EXPECT_EQ(pids, std::set<int64_t>{::getpid()});
  EXPECT_LE(threads.size(), 3U);
  EXPECT_EQ(threads.count(self), 0U);
  // Processes: two children, taking records in turn.
  std::tie(pids, threads) = where("workers=2,processes=true");
  EXPECT_EQ(pids.size(), 2U);
  EXPECT_EQ(pids.count(::getpid()), 0U);

  // max_queue_size bounds the examples made ahead of the consumer.
  StatusOr<ZooProgram> program =
      Resolve("learning_rate=0.1,sequence=counted,workers=2,queue=3,shuffle=4");
  ASSERT_TRUE(program.ok()) << program.status();
  made = 0;
  StatusOr<Dataset<Example>> examples =
      program->MakeDataset(Dataset<Record>::FromVector(Records(20)).with_seed(1), Mode::TRAINING);
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_TRUE(examples->Next().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (made < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(made, 4);  // the one taken and three ahead
}

TEST_F(TrialTest, LoaderErrorsNameTheRecordOnThreadsAndInProcesses) {
  auto error = [&](const std::string& loader) {
    StatusOr<ZooProgram> program = Resolve("learning_rate=0.1,sequence=picky," + loader);
    EXPECT_TRUE(program.ok()) << program.status();
    StatusOr<std::vector<Example>> batches = All(*program, Records(5), Mode::TRAINING, 1);
    return batches.ok() ? std::string("OK") : std::string(batches.status().message());
  };
  EXPECT_EQ(error("workers=2"), "data.rio: record 3: three is not welcome");
  EXPECT_EQ(error("workers=2,processes=true"), "data.rio: record 3: three is not welcome");

  // A process that ends while making an example.
  StatusOr<ZooProgram> program =
      Resolve("learning_rate=0.1,sequence=picky,workers=2,processes=true");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<Record> records = Records(8);
  records.erase(records.begin() + 3);  // 0 1 2 4 5 ...: 5 is element 4, in process 1 of 2
  StatusOr<std::vector<Example>> batches = All(*program, records, Mode::TRAINING, 1);
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(batches.status().message()),
              testing::MatchesRegex("data loader process [0-9]+ \\(1 of 2\\) exited with status "
                                    "3 while preparing examples"));

  // Examples that cannot travel back.
  program = Resolve("learning_rate=0.1,sequence=sparse,workers=1,processes=true");
  ASSERT_TRUE(program.ok()) << program.status();
  batches = All(*program, Records(2), Mode::TRAINING, 1);
  EXPECT_EQ(batches.status().message(),
            "data.rio: record 0: feature 'pixels' is a sparse tensor; examples made in data "
            "loader processes hold dense tensors");
}

TEST_F(TrialTest, EntryFlagsAreRefusedWithATrial) {
  const std::pair<const char*, std::string ZooProgramNames::*> flags[] = {
      {"--dataset_fn=my_input: testzoo.trial.TestTrial is a trial (seed 004): its "
       "make_data_loaders makes the input; drop --dataset_fn",
       &ZooProgramNames::dataset_fn},
      {"--loss=my_input: testzoo.trial.TestTrial is a trial (seed 004): its build_model "
       "compiles the loss; drop --loss",
       &ZooProgramNames::loss},
      {"--optimizer=my_input: testzoo.trial.TestTrial is a trial (seed 004): its build_model "
       "compiles the optimizer; drop --optimizer",
       &ZooProgramNames::optimizer},
      {"--eval_metrics_fn=my_input: testzoo.trial.TestTrial is a trial (seed 004): its "
       "build_model compiles the metrics; drop --eval_metrics_fn",
       &ZooProgramNames::eval_metrics_fn},
      {"--learning_rate_schedule=my_input: testzoo.trial.TestTrial is a trial (seed 004): its "
       "callbacks set the learning-rate schedule (--lr_schedule replaces it); drop "
       "--learning_rate_schedule",
       &ZooProgramNames::learning_rate_schedule},
  };
  for (const auto& [message, field] : flags) {
    ZooProgramNames names;
    names.model_def = "testzoo.trial.TestTrial";
    names.*field = "my_input";
    StatusOr<ZooProgram> program = ZooProgram::Resolve(Zoo(), names, "learning_rate=0.1");
    EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(program.status().message(), message);
  }
}

TEST_F(TrialTest, AMissingHyperparameterIsNamed) {
  StatusOr<ZooProgram> program = Resolve("");
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program.status().message(),
            "testzoo/trial.cc: TestTrial: build_model threw: --params: missing required key "
            "'learning_rate'");
  // make_data_loaders is called at Resolve too.
  program = Resolve("learning_rate=0.1", "testzoo.trial.LoaderKeyTrial");
  EXPECT_EQ(program.status().message(),
            "testzoo/trial.cc: LoaderKeyTrial: make_data_loaders threw: --params: missing "
            "required key 'loader_threads'");
  program = Resolve("learning_rate=0.1,loader_threads=2", "testzoo.trial.LoaderKeyTrial");
  EXPECT_TRUE(program.ok()) << program.status();
  // A hyperparameter of the wrong type.
  program = Resolve("learning_rate='fast'");
  EXPECT_THAT(program.status().message(),
              HasSubstr("testzoo/trial.cc: TestTrial: build_model threw: --params: "
                        "'learning_rate'"));
}

TEST_F(TrialTest, ErrorsNameTheTrialAndTheMethod) {
  StatusOr<ZooProgram> program = Resolve("", "testzoo.trial.ThrowingTrial");
  EXPECT_EQ(program.status().message(),
            "testzoo/trial.cc: ThrowingTrial: build_model threw: no model today");
  program = Resolve("", "testzoo.trial.IncompleteTrial");
  EXPECT_EQ(program.status().message(),
            "testzoo/trial.cc: IncompleteTrial: build_model: the compiled model has no optimizer: "
            "Compile(model).optimizer(spec)");
  program = Resolve("learning_rate=-1");
  EXPECT_THAT(program.status().message(), HasSubstr("testzoo/trial.cc: TestTrial: optimizer: "));
  program = Resolve("learning_rate=0.1", "testzoo.trial.NoTrial");
  EXPECT_EQ(program.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TrialTest, CallbacksBecomeTheJobsSettings) {
  StatusOr<ZooProgram> program = Resolve("learning_rate=0.1");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(program->trial_callbacks().learning_rate_schedule.has_value());
  EXPECT_FALSE(program->trial_callbacks().early_stopping.has_value());
  EXPECT_FALSE(program->trial_callbacks().max_steps.has_value());
  EXPECT_FALSE(program->LearningRateScheduleOf()->has_value());

  program = Resolve("learning_rate=0.1,callbacks=all");
  ASSERT_TRUE(program.ok()) << program.status();
  const TrialCallbacks& callbacks = program->trial_callbacks();
  EXPECT_EQ(callbacks.learning_rate_schedule, LearningRateSchedule::Step(10, 0.5));
  EXPECT_EQ(**program->LearningRateScheduleOf(), LearningRateSchedule::Step(10, 0.5));
  EXPECT_EQ(program->resolved().learning_rate_schedule, "testzoo.trial.TestTrial.callbacks");
  ASSERT_TRUE(callbacks.early_stopping.has_value());
  EXPECT_EQ(callbacks.early_stopping->metric, "accuracy");
  EXPECT_EQ(callbacks.early_stopping->mode, EarlyStopping::kMax);
  EXPECT_EQ(callbacks.early_stopping->patience, 3);
  EXPECT_DOUBLE_EQ(callbacks.early_stopping->min_delta, 0.01);
  EXPECT_EQ(callbacks.max_steps, 100);
  // Its recorded names resolve again.
  ZooProgramNames used = program->resolved();
  EXPECT_TRUE(ZooProgram::Resolve(Zoo(), used, "learning_rate=0.1,callbacks=all").ok());

  EXPECT_EQ(Resolve("learning_rate=0.1,callbacks=twice").status().message(),
            "testzoo/trial.cc: TestTrial: callbacks: two MaxStepsStoppings");
  EXPECT_EQ(Resolve("learning_rate=0.1,callbacks=unknown_metric").status().message(),
            "testzoo/trial.cc: TestTrial: callbacks: EarlyStopping: metric 'auc' is not one "
            "that build_model compiles (accuracy)");
  EXPECT_THAT(Resolve("learning_rate=0.1,callbacks=bad_schedule").status().message(),
              HasSubstr("testzoo/trial.cc: TestTrial: callbacks: LearningRateScheduler: "));
}

}  // namespace
}  // namespace elasticdl
