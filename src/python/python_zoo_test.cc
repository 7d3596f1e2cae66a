// A zoo's Python files through ZooProgram, in this process's embedded
// interpreter: what the worker and the client do with them.
#include "python/python_zoo.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <pybind11/stl.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/example_wire.h"
#include "data/process_map.h"
#include "python/interpreter.h"
#include "python/python_model.h"
#include "testing/temp_dir.h"
#include "zoo/embedding_spec.h"
#include "zoo/mirrored_module.h"
#include "zoo/zoo_program.h"

namespace elasticdl::python {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The seed's model file, small: a model with BatchNorm and Dropout, a
// dataset_fn that parses and shuffles, and the other entries.
constexpr char kSeedFile[] = R"(
import functools
import torch
from torch import nn
import elasticdl
from elasticdl import Mode

def custom_model(width=4):
    return nn.Sequential(nn.Linear(4, width), nn.BatchNorm1d(width, momentum=0.3),
                         nn.ReLU(), nn.Dropout(0.5), nn.Linear(width, 3))

def dataset_fn(dataset, mode):
    def _parse(record):
        spec = {"x": elasticdl.FixedLenFeature([4], torch.float32)}
        if mode != Mode.PREDICTION:
            spec["label"] = elasticdl.FixedLenFeature([1], torch.int64)
        r = elasticdl.parse_example(record, spec)
        if mode == Mode.PREDICTION:
            return {"x": r["x"]}
        return {"x": r["x"]}, r["label"]
    dataset = dataset.map(_parse)
    return dataset if mode == Mode.PREDICTION else dataset.shuffle(4)

def with_noise(dataset, mode):
    return dataset_fn(dataset, mode).map(
        lambda e, generator: ({"x": e[0]["x"] + torch.rand(4, generator=generator)}, e[1]))

def odd_labels_only(dataset, mode):
    return dataset_fn(dataset, mode).filter(lambda e: int(e[1]) % 2 == 1)

def loss(labels, predictions):
    return nn.functional.cross_entropy(predictions, labels.flatten())

def optimizer():
    return functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9, nesterov=True)

def eval_metrics_fn():
    return {"accuracy": lambda labels, predictions: predictions.argmax(1) == labels.flatten(),
            "builtin_accuracy": elasticdl.metrics.Accuracy()}
)";

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

Record MakeRecord(const std::vector<float>& x, int64_t label, uint64_t index = 0) {
  Record r;
  example::ExampleEncoder e(&r.data);
  e.AddFloats("x", x);
  if (label >= 0) e.AddInt64("label", label);
  e.Finish();
  r.file = std::make_shared<const std::string>("data.recordio");
  r.index = index;
  return r;
}

std::vector<Record> Records(int n) {
  std::vector<Record> records;
  for (int i = 0; i < n; ++i) {
    records.push_back(MakeRecord({float(i), 1, 2, 3}, i % 3, static_cast<uint64_t>(i)));
  }
  return records;
}

class PythonZooTest : public ::testing::Test {
 protected:
  void SetUp() override { Write(zoo_.File("seed/model.py"), kSeedFile); }

  std::shared_ptr<ZooLibrary> Open() {
    auto library = OpenZoo("", zoo_.path());
    EXPECT_TRUE(library.ok()) << library.status();
    return library.ok() ? *library : nullptr;
  }

  StatusOr<ZooProgram> Resolve(const std::string& model_def, const std::string& params = "",
                               ZooProgramNames names = {}) {
    names.model_def = model_def;
    return ZooProgram::Resolve(Open(), names, params);
  }

  // The examples of the program's dataset_fn over `records`, with a seed.
  static std::vector<Example> Run(const ZooProgram& program, std::vector<Record> records, Mode mode,
                                  uint64_t seed) {
    auto dataset =
        program.MakeDataset(Dataset<Record>::FromVector(std::move(records)).with_seed(seed), mode);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    std::vector<Example> out;
    while (true) {
      StatusOr<std::optional<Example>> next = dataset->Next();
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok() || !next->has_value()) return out;
      out.push_back(std::move(**next));
    }
  }

  testing::TempDir zoo_;
};

TEST_F(PythonZooTest, RunsTheModelFilesEntriesAsTheWorkerDoes) {
  StatusOr<ZooProgram> program = Resolve("seed.model.custom_model", "width=5");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->resolved().dataset_fn, "seed.model.dataset_fn");
  EXPECT_EQ(program->resolved().eval_metrics_fn, "seed.model.eval_metrics_fn");
  EXPECT_EQ(program->EntryLocation(EntryKind::kLoss), "seed/model.py: loss");

  StatusOr<std::shared_ptr<Model>> made = program->MakeModel();
  ASSERT_TRUE(made.ok()) << made.status();
  Model& model = **made;
  // The state_dict's names, the same tensors.
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.key());
  EXPECT_THAT(names, ElementsAre("0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"));
  EXPECT_EQ(model.named_parameters()["1.weight"].size(0), 5);  // --params width=5
  std::vector<std::string> buffers;
  for (const auto& b : model.named_buffers()) buffers.push_back(b.key());
  EXPECT_THAT(buffers, ElementsAre("1.running_mean", "1.running_var", "1.num_batches_tracked"));
  auto* norm = model.named_children()["1"]->as<MirroredModule>();
  ASSERT_NE(norm, nullptr);
  ASSERT_TRUE(norm->running_stats.has_value());
  EXPECT_DOUBLE_EQ(*norm->running_stats->momentum, 0.3);
  EXPECT_FALSE(model.named_children()["0"]->as<MirroredModule>()->running_stats.has_value());

  auto batches = program->MakeBatches(Dataset<Record>::FromVector(Records(10)).with_seed(1),
                                      Mode::TRAINING, 4);
  ASSERT_TRUE(batches.ok()) << batches.status();
  StatusOr<std::optional<Example>> batch = batches->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((**batch).features.at("x").sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ((**batch).origins.size(), 4u);

  // Forward in training mode moves the running mean (a Python buffer, seen here);
  // backward from C++ fills the gradients of the same tensors.
  torch::Tensor mean_before = model.named_buffers()["1.running_mean"].clone();
  StatusOr<torch::Tensor> out = program->Forward(model, (**batch).features, true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_FALSE(torch::equal(mean_before, model.named_buffers()["1.running_mean"]));
  StatusOr<torch::Tensor> loss = program->Loss((**batch).labels, *out);
  ASSERT_TRUE(loss.ok()) << loss.status();
  loss->backward();
  EXPECT_TRUE(model.named_parameters()["4.weight"].grad().defined());
  // Values written into the C++ tensors are the Python module's.
  {
    torch::NoGradGuard no_grad;
    model.named_parameters()["0.bias"].fill_(0.5);
  }
  auto* python_model = dynamic_cast<PythonModel*>(&model);
  ASSERT_NE(python_model, nullptr);
  {
    pybind11::gil_scoped_acquire gil;
    pybind11::object bias = python_model->module().get().attr("__getitem__")(0).attr("bias");
    EXPECT_TRUE(torch::all(bias.cast<torch::Tensor>() == 0.5).item<bool>());
  }

  StatusOr<OptimizerSpec> optimizer = program->Optimizer();
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  EXPECT_EQ(DescribeOptimizer(*optimizer), "SGD(lr=0.1, momentum=0.9, nesterov=true)");

  auto metrics = program->MakeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->size(), 2u);
  ASSERT_TRUE(
      program
          ->UpdateMetrics(*metrics, torch::tensor({0, 1}), torch::tensor({{2.0, 1.0}, {3.0, 0.0}}))
          .ok());
  MetricState accuracy = metrics->at("accuracy")->state();
  EXPECT_EQ(accuracy.values, (std::vector<double>{1, 2}));
  EXPECT_EQ(metrics->at("builtin_accuracy")->state().values, accuracy.values);
}

TEST_F(PythonZooTest, WhereAThreadIsInTheModelsCodeIsTold) {
  // A dataset_fn whose map waits for good on its third record: where it
  // waits, from another thread, as a worker's heartbeat thread asks.
  Write(zoo_.File("stuck/model.py"), std::string(kSeedFile) + R"(
import threading

_never = threading.Event()

def waits_forever(record):
    _never.wait()
    return record

def stuck_dataset_fn(dataset, mode):
    seen = [0]
    def _third_waits(record):
        seen[0] += 1
        return waits_forever(record) if seen[0] == 3 else record
    return dataset_fn(dataset.map(_third_waits), mode)
)");
  ZooProgramNames names;
  names.dataset_fn = "stuck_dataset_fn";
  StatusOr<ZooProgram> program = Resolve("stuck.model.custom_model", "", names);
  ASSERT_TRUE(program.ok()) << program.status();
  auto batches =
      program->MakeBatches(Dataset<Record>::FromVector(Records(8)).with_seed(1), Mode::TRAINING, 4);
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::atomic<uint64_t> stuck_thread{0};
  std::thread stuck([&] {
    stuck_thread = static_cast<uint64_t>(pthread_self());
    batches->Next().IgnoreError();  // returns once _never is set, below
  });
  while (stuck_thread == 0) std::this_thread::yield();
  std::string where;
  for (int i = 0; i < 200 && where.find("_never.wait()") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    where = program->Where({stuck_thread}, std::chrono::seconds(2));
  }
  EXPECT_THAT(where, HasSubstr("stuck/model.py\", line "));
  EXPECT_THAT(where, HasSubstr(", in waits_forever\n    _never.wait()"));
  EXPECT_THAT(where, HasSubstr("in _third_waits"));
  // No Python code on this thread, nor on an unknown one: the first thread
  // that runs some is told.
  const auto self = static_cast<uint64_t>(pthread_self());
  EXPECT_EQ(program->Where({self, 12345}, std::chrono::seconds(2)), "");
  EXPECT_EQ(program->Where({self, stuck_thread}, std::chrono::seconds(2)), where);
  {
    pybind11::gil_scoped_acquire gil;
    pybind11::module_::import("stuck.model").attr("_never").attr("set")();
  }
  stuck.join();
}

TEST_F(PythonZooTest, PipelinesAreSeededPerTaskAndNameTheirRecords) {
  StatusOr<ZooProgram> program = Resolve("seed.model.custom_model");
  ASSERT_TRUE(program.ok()) << program.status();
  auto order = [](const std::vector<Example>& examples) {
    std::vector<uint64_t> indices;
    for (const Example& e : examples) indices.push_back(e.origins.at(0).index);
    return indices;
  };
  // The same seed, the same order (a task's every attempt); another, another.
  const auto first = order(Run(*program, Records(12), Mode::TRAINING, 7));
  EXPECT_EQ(first.size(), 12u);
  EXPECT_EQ(order(Run(*program, Records(12), Mode::TRAINING, 7)), first);
  EXPECT_NE(order(Run(*program, Records(12), Mode::TRAINING, 8)), first);
  // Prediction keeps the records' order and yields no labels.
  std::vector<Example> predicted = Run(*program, Records(5), Mode::PREDICTION, 7);
  EXPECT_THAT(order(predicted), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_FALSE(predicted[0].labels.defined());

  // A map function of (element, generator) draws from a generator seeded by the
  // pipeline and the element: the same noise for the same seed.
  ZooProgramNames noisy;
  noisy.dataset_fn = "with_noise";
  StatusOr<ZooProgram> with_noise = Resolve("seed.model.custom_model", "", noisy);
  ASSERT_TRUE(with_noise.ok()) << with_noise.status();
  const auto a = Run(*with_noise, Records(6), Mode::TRAINING, 3);
  const auto b = Run(*with_noise, Records(6), Mode::TRAINING, 3);
  const auto c = Run(*with_noise, Records(6), Mode::TRAINING, 4);
  ASSERT_EQ(a.size(), 6u);
  EXPECT_TRUE(torch::equal(a[0].features.at("x"), b[0].features.at("x")));
  EXPECT_FALSE(torch::equal(a[0].features.at("x"), c[0].features.at("x")));

  ZooProgramNames filtered;
  filtered.dataset_fn = "odd_labels_only";
  StatusOr<ZooProgram> odd = Resolve("seed.model.custom_model", "", filtered);
  ASSERT_TRUE(odd.ok()) << odd.status();
  for (const Example& e : Run(*odd, Records(9), Mode::TRAINING, 1)) {
    EXPECT_EQ(e.labels.item<int64_t>(), 1);
  }

  // A record that does not parse: its file and index, the exception and the line.
  std::vector<Record> records = Records(3);
  records.push_back(MakeRecord({1, 2}, 0, 3));  // 2 values where 4 are due
  auto dataset = program->MakeDataset(Dataset<Record>::FromVector(records), Mode::EVALUATION);
  ASSERT_TRUE(dataset.ok());
  Status failed;
  while (failed.ok()) {
    StatusOr<std::optional<Example>> next = dataset->Next();
    failed = next.status();
    if (next.ok() && !next->has_value()) break;
  }
  EXPECT_THAT(std::string(failed.message()),
              StartsWith("data.recordio: record 3: ValueError: feature 'x'"));
  EXPECT_THAT(std::string(failed.message()), HasSubstr("File \"seed/model.py\", line "));
  EXPECT_THAT(std::string(failed.message()), HasSubstr("in _parse"));
}

// A record source that fails as a damaged file does.
class DamagedSource final : public internal::Source<Record> {
 public:
  StatusOr<std::optional<Record>> Next() override {
    if (served_++ == 0) return std::optional<Record>(MakeRecord({1, 2, 3, 4}, 0));
    return absl::DataLossError("data.recordio: chunk 0: checksum mismatch");
  }

 private:
  int served_ = 0;
};

TEST_F(PythonZooTest, DamagedRecordsAreTheDatasFaultNotTheModelFiles) {
  StatusOr<ZooProgram> program = Resolve("seed.model.custom_model");
  ASSERT_TRUE(program.ok()) << program.status();
  auto dataset =
      program->MakeDataset(Dataset<Record>(std::make_shared<DamagedSource>()), Mode::PREDICTION);
  ASSERT_TRUE(dataset.ok());
  ASSERT_TRUE(dataset->Next().ok());
  StatusOr<std::optional<Example>> next = dataset->Next();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(next.status().message(), "data.recordio: chunk 0: checksum mismatch");
}

TEST_F(PythonZooTest, OptimizersArePyTorchsIdiom) {
  Write(zoo_.File("opt/choices.py"), R"(
import functools
import torch
import elasticdl
def model(): return torch.nn.Linear(2, 1)
def adam(): return functools.partial(torch.optim.Adam, lr=0.01, betas=(0.5, 0.9), amsgrad=True)
def adagrad(): return functools.partial(torch.optim.Adagrad, lr=0.2, foreach=True)
def rmsprop(): return functools.partial(torch.optim.RMSprop, lr=0.01, centered=True)
def adam_class(): return torch.optim.Adam
def sgd_without_lr(): return torch.optim.SGD
def maximize(): return functools.partial(torch.optim.SGD, lr=0.1, maximize=True)
def adamw(): return functools.partial(torch.optim.AdamW, lr=0.1)
def adadelta(): return functools.partial(torch.optim.Adadelta, lr=0.1)
def positional(): return functools.partial(torch.optim.SGD, None, 0.1)
def typo(): return functools.partial(torch.optim.SGD, lr=0.1, momentun=0.9)
def string_lr(): return functools.partial(torch.optim.SGD, lr="0.1")
def ftrl(): return functools.partial(elasticdl.optim.Ftrl, lr=0.1)
def not_an_optimizer(): return 0.1
)");
  auto optimizer = [&](const std::string& name) -> StatusOr<std::string> {
    ZooProgramNames names;
    names.optimizer = name;
    names.loss = "seed.model.loss";
    names.dataset_fn = "seed.model.dataset_fn";
    EDL_ASSIGN_OR_RETURN(ZooProgram program, Resolve("opt.choices.model", "", names));
    EDL_ASSIGN_OR_RETURN(OptimizerSpec spec, program.Optimizer());
    return DescribeOptimizer(spec);
  };
  EXPECT_EQ(*optimizer("adam"), "Adam(lr=0.01, beta1=0.5, beta2=0.9, amsgrad=true)");
  EXPECT_THAT(*optimizer("adagrad"), StartsWith("Adagrad(lr=0.2"));
  EXPECT_THAT(*optimizer("rmsprop"), HasSubstr("centered=true"));
  EXPECT_EQ(*optimizer("adam_class"), "Adam(lr=0.001)");
  EXPECT_EQ(*optimizer("adamw"), "AdamW(lr=0.1)");
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"sgd_without_lr",
       "opt/choices.py: sgd_without_lr threw: TypeError: optimizer(): "
       "torch.optim.SGD needs 'lr': functools.partial(torch.optim.SGD, lr=...)"},
      {"maximize",
       "opt/choices.py: maximize threw: torch.optim.SGD(maximize=True): the "
       "parameter servers cannot apply 'maximize'"},
      {"adadelta",
       "opt/choices.py: adadelta threw: torch.optim.Adadelta: the parameter servers apply "
       "torch.optim.SGD, Adam, AdamW, Adagrad and RMSprop"},
      {"positional", "give the optimizer's arguments by keyword"},
      {"typo", "torch.optim.SGD has no argument 'momentun'"},
      {"string_lr", "torch.optim.SGD(lr='0.1'): expected a number"},
      {"ftrl", "elasticdl.optim.Ftrl updates embedding tables only"},
      {"not_an_optimizer",
       "optimizer() returned a float: expected a factory of a torch.optim "
       "optimizer"},
  };
  for (const auto& [name, message] : errors) {
    StatusOr<std::string> got = optimizer(name);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(message)) << name;
  }
}

// What the servers apply is what PyTorch's own optimizer does: each factory's
// spec, made into LibTorch's optimizer, and the factory itself run in Python,
// over the same gradients, end at the same values, bit for bit.
TEST_F(PythonZooTest, OptimizersStepAsPyTorchsOwn) {
  Write(zoo_.File("opt/steps.py"), R"(
import functools
import torch
def model(): return torch.nn.Linear(2, 1)
def sgd(): return functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9, dampening=0.1,
                                    weight_decay=0.01)
def nesterov(): return functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9, nesterov=True)
def adam(): return functools.partial(torch.optim.Adam, lr=0.01, betas=(0.5, 0.9),
                                     weight_decay=0.1, amsgrad=True)
def adamw(): return functools.partial(torch.optim.AdamW, lr=0.01, weight_decay=0.3)
def adamw_amsgrad(): return functools.partial(torch.optim.AdamW, lr=0.05, betas=(0.8, 0.99),
                                              eps=1e-6, weight_decay=0.1, amsgrad=True)
def adagrad(): return functools.partial(torch.optim.Adagrad, lr=0.2, lr_decay=0.01,
                                        weight_decay=0.1, initial_accumulator_value=0.1)
def rmsprop(): return functools.partial(torch.optim.RMSprop, lr=0.01, alpha=0.9,
                                        weight_decay=0.1, momentum=0.5, centered=True)

def steps(factory, start, grads):
    w = torch.nn.Parameter(start.clone())
    optimizer = factory([w])
    for g in grads:
        w.grad = g.clone()
        optimizer.step()
    return w.detach()
)");
  torch::manual_seed(3);
  const torch::Tensor start = torch::randn({5, 3});
  std::vector<torch::Tensor> grads;
  for (int i = 0; i < 8; ++i) grads.push_back(torch::randn({5, 3}));
  for (const char* name :
       {"sgd", "nesterov", "adam", "adamw", "adamw_amsgrad", "adagrad", "rmsprop"}) {
    ZooProgramNames names;
    names.optimizer = std::string("opt.steps.") + name;
    names.loss = "seed.model.loss";
    names.dataset_fn = "seed.model.dataset_fn";
    StatusOr<ZooProgram> program = Resolve("opt.steps.model", "", names);
    ASSERT_TRUE(program.ok()) << program.status();
    StatusOr<OptimizerSpec> spec = program->Optimizer();
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status();
    torch::Tensor ours = start.clone().requires_grad_(true);
    auto optimizer = MakeOptimizer(*spec, {ours});
    ASSERT_TRUE(optimizer.ok()) << optimizer.status();
    for (const torch::Tensor& g : grads) {
      ours.mutable_grad() = g.clone();
      (*optimizer)->step();
    }
    torch::Tensor theirs;
    {
      pybind11::gil_scoped_acquire gil;
      pybind11::dict file =
          pybind11::module_::import("runpy").attr("run_path")(zoo_.File("opt/steps.py"));
      pybind11::list gradients;
      for (const torch::Tensor& g : grads) gradients.append(g);
      theirs = file["steps"](file[name](), start, gradients).cast<torch::Tensor>();
    }
    EXPECT_TRUE(torch::equal(ours.detach(), theirs))
        << name << ": " << DescribeOptimizer(*spec) << "\n"
        << ours << "\n"
        << theirs;
    EXPECT_FALSE(torch::allclose(ours.detach(), start)) << name;
  }
}

// A learning_rate_schedule() entry returns --lr_schedule's text or PyTorch's
// idiom, a scheduler's factory: the servers' rate at each version is the one
// PyTorch's scheduler, stepped once a step, gives that step.
TEST_F(PythonZooTest, SchedulesArePyTorchsSchedulers) {
  Write(zoo_.File("schedules/choices.py"), R"(
import functools
import torch
from torch.optim import lr_scheduler
def model(): return torch.nn.Linear(2, 1)
def text(): return "warmup=5,step=10,gamma=0.5"
def step(): return functools.partial(lr_scheduler.StepLR, step_size=7, gamma=0.5)
def exponential(): return functools.partial(lr_scheduler.ExponentialLR, gamma=0.9)
def cosine(): return functools.partial(lr_scheduler.CosineAnnealingLR, T_max=20, eta_min=0.001)
def one_cycle(): return functools.partial(lr_scheduler.OneCycleLR, max_lr=0.1, total_steps=10)
def multi_step():  # in any order; 30 twice: two decays there, as PyTorch's
    return functools.partial(lr_scheduler.MultiStepLR, milestones=[30, 4, 30, 11], gamma=0.3)
def multi_step_array():  # a NumPy array, a milestone at the first step
    import numpy
    return functools.partial(lr_scheduler.MultiStepLR, milestones=numpy.array([0, 9]))
def no_milestones(): return functools.partial(lr_scheduler.MultiStepLR, milestones=[])
def bare_multi_step(): return lr_scheduler.MultiStepLR
def negative_milestone(): return functools.partial(lr_scheduler.MultiStepLR, milestones=[5, -1])
def plateau(): return functools.partial(lr_scheduler.ReduceLROnPlateau, patience=3)
def growing(): return functools.partial(lr_scheduler.ExponentialLR, gamma=1.5)
def resumed(): return functools.partial(lr_scheduler.StepLR, step_size=7, last_epoch=3)
def zero_steps(): return functools.partial(lr_scheduler.StepLR, step_size=0)
def whole_float_steps(): return lambda optimizer: lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
def half_steps(): return functools.partial(lr_scheduler.StepLR, step_size=2.5)
def a_number(): return 0.5
def linear(): return functools.partial(lr_scheduler.LinearLR, start_factor=0.25, total_iters=8)
def constant(): return functools.partial(lr_scheduler.ConstantLR, factor=0.5, total_iters=6)
def polynomial(): return functools.partial(lr_scheduler.PolynomialLR, total_iters=30, power=2.0)
def built_step(): return lambda optimizer: lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.5)
def torchvision():  # torchvision's reference recipe: a linear warm-up, then the main schedule
    def build(optimizer):
        warmup = lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=5)
        main = lr_scheduler.CosineAnnealingLR(optimizer, T_max=20, eta_min=0.001)
        return lr_scheduler.SequentialLR(optimizer, [warmup, main], milestones=[5])
    return build
def three_phases():  # a ConstantLR ended before its total, then a StepLR, a MultiStepLR
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.ConstantLR(o, factor=0.5, total_iters=10),
        lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
        lr_scheduler.MultiStepLR(o, milestones=[4, 9, 4], gamma=0.8)], milestones=[4, 20])
def constant_inside():  # a ConstantLR's two phases between two others
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.LinearLR(o, start_factor=0.5, end_factor=0.9, total_iters=4),
        lr_scheduler.ConstantLR(o, factor=0.3, total_iters=5),
        lr_scheduler.PolynomialLR(o, total_iters=10, power=0.5)], milestones=[3, 12])
def nested():
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2)], milestones=[]),
        lr_scheduler.StepLR(o, 3)], milestones=[5])
def other_optimizer():
    other = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    return lambda o: lr_scheduler.StepLR(other, step_size=3)
def milestone_zero():
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.LinearLR(o, start_factor=0.5), lr_scheduler.StepLR(o, 2)], milestones=[0])
def builds_a_number(): return lambda o: 3
def lambda_lr(): return lambda o: lr_scheduler.LambdaLR(o, lambda step: 0.9 ** step)
def sequential_factory(): return functools.partial(lr_scheduler.SequentialLR, milestones=[3])
def equal_milestones():  # the middle scheduler never runs; the ConstantLR ends at 6
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.ConstantLR(o, factor=0.25, total_iters=6),
        lr_scheduler.ExponentialLR(o, gamma=0.5),
        lr_scheduler.MultiStepLR(o, milestones=[0, 2], gamma=0.5)], milestones=[6, 6])
def stepped_before():
    def build(o):
        s = lr_scheduler.StepLR(o, step_size=3)
        s.step()
        return s
    return build
def first_stepped_before():
    def build(o):
        warmup = lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=4)
        decay = lr_scheduler.StepLR(o, step_size=3)
        warmup.step()
        warmup.step()
        return lr_scheduler.SequentialLR(o, [warmup, decay], milestones=[4])
    return build
def twice():
    def build(o):
        a = lr_scheduler.StepLR(o, step_size=3)
        return lr_scheduler.SequentialLR(o, [a, lr_scheduler.StepLR(o, 2), a], milestones=[4, 8])
    return build
def no_optimizer(): return lambda: None
def another_not_returned():  # its warm-up sets the optimizer's lr; the StepLR is returned
    def build(o):
        lr_scheduler.LinearLR(o, start_factor=0.1)
        return lr_scheduler.StepLR(o, step_size=3)
    return build
def lr_changed_after():
    def build(o):
        s = lr_scheduler.StepLR(o, step_size=3)
        o.param_groups[0]["lr"] *= 0.1
        return s
    return build
def numpy_numbers():  # NumPy numbers and arrays of none, float milestones of whole numbers
    import numpy
    return lambda o: lr_scheduler.SequentialLR(o, [
        lr_scheduler.CosineAnnealingLR(o, T_max=numpy.int64(8), eta_min=numpy.array(0.01)),
        lr_scheduler.MultiStepLR(o, milestones=[3.0, numpy.int32(5)], gamma=numpy.float32(0.5)),
    ], milestones=numpy.array([6]))
def verbose():
    return lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5, verbose=True)
def infinite_eta_min():
    return functools.partial(lr_scheduler.CosineAnnealingLR, T_max=4, eta_min=float("inf"))
class Halving(lr_scheduler.StepLR):
    pass
def subclass(): return functools.partial(Halving, step_size=2)
def eta_min_of_the_lr():
    return lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=10,
                                                    eta_min=o.defaults["lr"] / 100)
def linear_from_zero():
    return functools.partial(lr_scheduler.LinearLR, start_factor=0, total_iters=4)

def rates(factory, steps):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = factory(optimizer)
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out
)");
  auto schedule = [&](const std::string& name) -> StatusOr<LearningRateSchedule> {
    ZooProgramNames names;
    names.learning_rate_schedule = "schedules.choices." + name;
    names.optimizer = "seed.model.optimizer";
    names.loss = "seed.model.loss";
    names.dataset_fn = "seed.model.dataset_fn";
    EDL_ASSIGN_OR_RETURN(ZooProgram program, Resolve("schedules.choices.model", "", names));
    EDL_ASSIGN_OR_RETURN(std::optional<LearningRateSchedule> s, program.LearningRateScheduleOf());
    if (!s.has_value()) return absl::NotFoundError("no schedule");
    return *s;
  };
  StatusOr<LearningRateSchedule> text = schedule("text");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->Describe(), "warmup=5,step=10,gamma=0.5");
  constexpr int kSteps = 50;  // the cosine's T_max, back up to lr0 and down again
  for (const char* name :
       {"step", "multi_step", "multi_step_array", "exponential", "cosine", "linear", "constant",
        "polynomial", "built_step", "torchvision", "three_phases", "constant_inside",
        "equal_milestones", "numpy_numbers", "verbose"}) {
    StatusOr<LearningRateSchedule> ours = schedule(name);
    ASSERT_TRUE(ours.ok()) << name << ": " << ours.status();
    std::vector<double> theirs;
    {
      pybind11::gil_scoped_acquire gil;
      pybind11::dict file =
          pybind11::module_::import("runpy").attr("run_path")(zoo_.File("schedules/choices.py"));
      theirs = file["rates"](file[name](), kSteps).cast<std::vector<double>>();
    }
    ASSERT_EQ(theirs.size(), static_cast<size_t>(kSteps));
    for (int v = 0; v < kSteps; ++v) {
      EXPECT_NEAR(ours->LearningRate(0.1, v), theirs[v], 1e-12)
          << name << " (" << ours->Describe() << ") at version " << v;
    }
  }
  EXPECT_EQ(schedule("cosine")->Describe(), "cosine=20,min_lr=0.001,periodic=true");
  // PyTorch's tutorials write StepLR(optimizer, 1.0, ...): a whole number all the same.
  EXPECT_EQ(schedule("whole_float_steps")->Describe(), "step=1,gamma=0.1");
  EXPECT_EQ(schedule("multi_step")->Describe(), "milestones=4:11:30:30,gamma=0.3");
  EXPECT_EQ(schedule("multi_step_array")->Describe(), "milestones=0:9,gamma=0.1");
  EXPECT_TRUE(schedule("no_milestones")->is_constant());
  EXPECT_EQ(schedule("torchvision")->Describe(),
            "linear=5,start_factor=0.01;at=5,cosine=20,min_lr=0.001,periodic=true");
  EXPECT_EQ(schedule("constant")->Describe(), "linear=6,start_factor=0.5,end_factor=0.5;at=6");
  EXPECT_EQ(schedule("three_phases")->Describe(),
            "linear=10,start_factor=0.5,end_factor=0.5;at=4,step=3,gamma=0.5;"
            "at=20,milestones=4:4:9,gamma=0.8");
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"one_cycle",
       "torch.optim.lr_scheduler.OneCycleLR: the parameter servers follow "
       "torch.optim.lr_scheduler.StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, "
       "LinearLR, ConstantLR, PolynomialLR and a SequentialLR of them"},
      {"nested",
       "a SequentialLR in a SequentialLR: give its schedulers and milestones to the "
       "outer one"},
      {"other_optimizer",
       "the function's torch.optim.lr_scheduler.StepLR steps an optimizer other than the one "
       "the function is given"},
      {"milestone_zero",
       "SequentialLR(milestones=[0]): expected ascending whole numbers >= 1 (of steps)"},
      {"builds_a_number",
       "the function returned an int: expected a torch.optim.lr_scheduler "
       "scheduler of the optimizer it is given"},
      {"lambda_lr", "torch.optim.lr_scheduler.LambdaLR: the parameter servers follow"},
      {"sequential_factory",
       "torch.optim.lr_scheduler.SequentialLR takes schedulers built on the optimizer: return a "
       "function of the optimizer that builds it"},
      {"stepped_before",
       "the function's torch.optim.lr_scheduler.StepLR is at step 1, not 0 (built with "
       "last_epoch, or stepped before it was returned)"},
      {"first_stepped_before", "the function's torch.optim.lr_scheduler.LinearLR is at step 2"},
      {"twice", "a SequentialLR given the same scheduler twice: build one for each place"},
      {"no_optimizer",
       "returned a function that cannot be called with an optimizer (too many positional "
       "arguments): expected a function of the optimizer that builds a scheduler on it"},
      {"another_not_returned",
       "the function leaves the optimizer's lr at 0.1, where the scheduler it returns sets 1.0 "
       "(on an lr of 1.0): a scheduler built on the optimizer and not returned, or a change to "
       "its lr, which the servers would not follow; return the one scheduler that sets the rate "
       "(a SequentialLR of several)"},
      {"lr_changed_after", "the function leaves the optimizer's lr at 0.1, where the scheduler"},
      {"infinite_eta_min", "CosineAnnealingLR(eta_min=inf): expected a finite number"},
      {"subclass", "schedules.choices.Halving: the parameter servers follow"},
      {"eta_min_of_the_lr",
       "the scheduler the function builds depends on the optimizer's lr "
       "('cosine=10,min_lr=0.01,periodic=true' for an lr of 1, "
       "'cosine=10,min_lr=0.02,periodic=true' for 2): give its settings as numbers"},
      {"linear_from_zero",
       "LinearLR(start_factor=0): the parameter servers' schedules take start_factor in (0, 1]"},
      {"bare_multi_step",
       "torch.optim.lr_scheduler.MultiStepLR needs 'milestones': functools.partial("
       "torch.optim.lr_scheduler.MultiStepLR, milestones=...)"},
      {"negative_milestone",
       "MultiStepLR(milestones=[5, -1]): expected whole numbers >= 0 (of steps)"},
      {"plateau", "torch.optim.lr_scheduler.ReduceLROnPlateau: the parameter servers follow"},
      {"growing",
       "ExponentialLR(gamma=1.5): the parameter servers' schedules take gamma in "
       "(0, 1]"},
      {"resumed", "StepLR(last_epoch=3): the schedule follows the model's version"},
      {"zero_steps", "StepLR(step_size=0): expected a whole number >= 1"},
      {"half_steps", "StepLR(step_size=2.5): expected a whole number >= 1"},
      {"a_number", "returned a float: expected a schedule in --lr_schedule's form"},
  };
  for (const auto& [name, message] : errors) {
    StatusOr<LearningRateSchedule> got = schedule(name);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(message)) << name;
  }
}

TEST_F(PythonZooTest, BadFilesAndEntriesAreNamedWithTheirTraceback) {
  Write(zoo_.File("bad/syntax.py"), "import torch\ndef custom_model(:\n    pass\n");
  Write(zoo_.File("bad/imports.py"), "import torch\nimport no_such_module\n");
  Write(zoo_.File("bad/entries.py"), R"(
import torch
instance = torch.nn.Linear(2, 1)
number = 3
class NotAModule:
    pass
def returns_a_number():
    return 3
def throws():
    raise ValueError("cannot build it")
def dataset_fn(dataset, mode):
    return [1, 2]
def throws_lines():
    raise ValueError("hidden must be an int\ngot 16.5")
)");
  auto resolve_error = [&](const std::string& model_def) {
    StatusOr<ZooProgram> program = Resolve(model_def);
    return program.ok() ? std::string("resolved") : std::string(program.status().message());
  };
  EXPECT_THAT(resolve_error("bad.syntax.custom_model"),
              StartsWith("--model_def: bad/syntax.py cannot be imported: SyntaxError: invalid "
                         "syntax"));
  EXPECT_THAT(resolve_error("bad.syntax.custom_model"),
              HasSubstr("File \"bad/syntax.py\", line 2"));
  EXPECT_THAT(resolve_error("bad.imports.model"),
              StartsWith("--model_def: bad/imports.py cannot be imported: ModuleNotFoundError: "
                         "No module named 'no_such_module'"));
  EXPECT_THAT(resolve_error("bad.imports.model"),
              HasSubstr("File \"bad/imports.py\", line 2, in <module>"));
  EXPECT_THAT(resolve_error("seed.model.custom_modle"),
              StartsWith("--model_def: seed/model.py has no entry 'custom_modle'; entries: "
                         "custom_model (function), dataset_fn (function)"));
  EXPECT_THAT(resolve_error("seed.nope.model"),
              HasSubstr("model zoo has no file seed/nope.cc or seed/nope.py"));
  EXPECT_THAT(resolve_error("bad.entries.instance"),
              HasSubstr("bad/entries.py: 'instance' is a Linear instance: name a torch.nn.Module "
                        "class or a function that builds one"));
  EXPECT_THAT(resolve_error("bad.entries.number"),
              HasSubstr("'number' is an int, not a torch.nn.Module subclass nor a function"));
  EXPECT_THAT(resolve_error("bad.entries.NotAModule"),
              HasSubstr("is the class bad.entries.NotAModule, not a torch.nn.Module subclass"));

  ZooProgramNames names;
  names.dataset_fn = "seed.model.dataset_fn";
  names.loss = "seed.model.loss";
  names.optimizer = "seed.model.optimizer";
  auto make_error = [&](const std::string& model_def) {
    StatusOr<ZooProgram> program = Resolve(model_def, "", names);
    if (!program.ok()) return std::string(program.status().message());
    return std::string(program->MakeModel().status().message());
  };
  EXPECT_THAT(make_error("bad.entries.returns_a_number"),
              StartsWith("bad/entries.py: returns_a_number threw: TypeError: returns_a_number "
                         "returned an int, expected a torch.nn.Module"));
  const std::string threw = make_error("bad.entries.throws");
  EXPECT_THAT(threw, StartsWith("bad/entries.py: throws threw: ValueError: cannot build it\n"
                                "Traceback (most recent call last):\n"));
  EXPECT_THAT(threw, HasSubstr("File \"bad/entries.py\", line 10, in throws"));
  // A message of several lines: the type and the first line lead.
  EXPECT_THAT(make_error("bad.entries.throws_lines"),
              StartsWith("bad/entries.py: throws_lines threw: ValueError: hidden must be an int\n"
                         "Traceback (most recent call last):\n"));
  // An unknown keyword of --params, and an entry that is no model factory
  // (it needs arguments --params does not give): Python's own message, and
  // what the entry is called with.
  const std::string unknown =
      std::string(Resolve("seed.model.custom_model", "depth=3")->MakeModel().status().message());
  EXPECT_THAT(unknown, HasSubstr("custom_model cannot build the model: got an unexpected keyword "
                                 "argument 'depth'"));
  EXPECT_THAT(unknown, HasSubstr("called with --params as keyword arguments, here depth,"));
  EXPECT_THAT(std::string(Resolve("seed.model.loss", "")->MakeModel().status().message()),
              HasSubstr("loss cannot build the model: missing a required argument: 'labels' "
                        "(the model entry is called with --params as keyword arguments, here "
                        "none, and returns a torch.nn.Module)"));

  names.dataset_fn = "bad.entries.dataset_fn";
  StatusOr<ZooProgram> program = Resolve("seed.model.custom_model", "", names);
  ASSERT_TRUE(program.ok()) << program.status();
  auto dataset = program->MakeDataset(Dataset<Record>::FromVector(Records(2)), Mode::TRAINING);
  EXPECT_THAT(std::string(dataset.status().message()),
              HasSubstr("bad/entries.py: dataset_fn threw: TypeError: dataset_fn returned a list: "
                        "return the elasticdl.Dataset it was given"));
}

TEST_F(PythonZooTest, ModelClassesCarryDefaultsAndTakeParamsAsKeywords) {
  Write(zoo_.File("defaults/classy.py"), R"(
import functools
import torch
import elasticdl
from elasticdl import Mode

class Regressor(torch.nn.Module):
    def __init__(self, hidden_units=(8,), learning_rate=0.1):
        super().__init__()
        self.hidden_units = list(hidden_units)
        self.learning_rate = learning_rate
        layers, width = [], 4
        for units in hidden_units:
            layers += [torch.nn.Linear(width, units), torch.nn.ReLU()]
            width = units
        self.layers = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))

    def forward(self, x):
        return self.layers(x)

    @staticmethod
    def default_loss(labels, predictions):
        return torch.nn.functional.mse_loss(predictions.flatten(), labels.flatten().float())

    @staticmethod
    def default_optimizer():
        return functools.partial(torch.optim.Adam, lr=1e-3)

    @staticmethod
    def default_input(record, mode):
        r = elasticdl.parse_example(record, {"x": elasticdl.FixedLenFeature([4], torch.float32),
                                             "label": elasticdl.FixedLenFeature([1], torch.int64)})
        return {"x": r["x"]} if mode == Mode.PREDICTION else ({"x": r["x"]}, r["label"])

    @staticmethod
    def default_eval_metrics():
        return {"mse": elasticdl.metrics.MeanSquaredError()}

def doubled_input(dataset, mode):
    return dataset.map(lambda r: Regressor.default_input(r, mode)).map(
        lambda e: ({"x": e[0]["x"] * 2}, e[1]))
)");
  StatusOr<ZooProgram> program =
      Resolve("defaults.classy.Regressor", "hidden_units=[10, 100, 20, 5], learning_rate=0.01");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->resolved().dataset_fn, "defaults.classy.Regressor.default_input");
  EXPECT_EQ(program->resolved().loss, "defaults.classy.Regressor.default_loss");
  EXPECT_EQ(program->resolved().optimizer, "defaults.classy.Regressor.default_optimizer");
  EXPECT_EQ(program->resolved().eval_metrics_fn, "defaults.classy.Regressor.default_eval_metrics");
  EXPECT_EQ(DescribeOptimizer(*program->Optimizer()), "Adam(lr=0.001)");
  StatusOr<std::shared_ptr<Model>> model = program->MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((**model).named_parameters()["layers.6.weight"].sizes(), (std::vector<int64_t>{5, 20}));
  EXPECT_EQ(Run(*program, Records(3), Mode::TRAINING, 1).at(0).features.at("x")[1].item<float>(),
            1.0f);

  // --input_fn wins over default_input.
  ZooProgramNames names;
  names.dataset_fn = "doubled_input";
  StatusOr<ZooProgram> doubled = Resolve("defaults.classy.Regressor", "", names);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_EQ(doubled->resolved().dataset_fn, "defaults.classy.doubled_input");
  EXPECT_EQ(Run(*doubled, Records(3), Mode::TRAINING, 1).at(0).features.at("x")[1].item<float>(),
            2.0f);
}

TEST_F(PythonZooTest, EmbeddingTablesAreTheWorkersOwn) {
  Write(zoo_.File("ctr/tables.py"), R"(
import functools
import torch
import elasticdl

class Ctr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids = elasticdl.nn.Embedding(
            "features", 4, initializer=("normal", 0, 0.01), combiner="mean", num_rows=100,
            optimizer=functools.partial(elasticdl.optim.Ftrl, lr=0.05, l1=1.0))
        self.dense = torch.nn.Linear(4, 1)

    def forward(self, ids):
        return self.dense(self.ids(ids))

class BadTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids = elasticdl.nn.Embedding("t", 4, initializer=("gaussian", 0, 1))
)");
  ZooProgramNames names;
  names.dataset_fn = "seed.model.dataset_fn";
  names.loss = "seed.model.loss";
  names.optimizer = "seed.model.optimizer";
  StatusOr<ZooProgram> program = Resolve("ctr.tables.Ctr", "", names);
  ASSERT_TRUE(program.ok()) << program.status();
  StatusOr<std::shared_ptr<Model>> model = program->MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  StatusOr<std::vector<EmbeddingImpl*>> tables = EmbeddingsOf(**model);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 1u);
  const EmbeddingOptions& options = (*tables)[0]->options();
  EXPECT_EQ(options.name(), "features");
  EXPECT_EQ(options.dim(), 4);
  EXPECT_EQ(options.num_rows(), 100);
  EXPECT_EQ(options.combiner(), Combiner::kMean);
  ASSERT_TRUE(options.optimizer().has_value());
  EXPECT_DOUBLE_EQ(std::get<FtrlOptions>(*options.optimizer()).l1, 1.0);
  proto::EmbeddingTableSpec spec = TableSpecOf(options, 1);
  EXPECT_EQ(spec.initializer().kind(), proto::EmbeddingInitializer::NORMAL);
  // Only the dense layer's tensors are parameters; the rows live on servers.
  std::vector<std::string> names_seen;
  for (const auto& p : (**model).named_parameters()) names_seen.push_back(p.key());
  EXPECT_THAT(names_seen, ElementsAre("dense.weight", "dense.bias"));
  // The worker's training flag reaches the table.
  (**model).train(false);
  EXPECT_FALSE((*tables)[0]->is_training());

  // Without servers (here) a lookup says where the rows are.
  StatusOr<torch::Tensor> out =
      program->Forward(**model, {{"ids", torch::zeros({2, 3}, torch::kInt64)}}, false);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("Embedding 'features' has no rows here: its table lives on the parameter "
                        "servers of a job"));

  StatusOr<ZooProgram> bad = Resolve("ctr.tables.BadTable", "", names);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT(std::string(bad->MakeModel().status().message()),
              HasSubstr("ValueError: Embedding 't': initializer ('gaussian', 0, 1), expected"));
}

// Forked data loaders (process maps) in a process with Python: a child keeps
// only the forking thread and runs C++ alone, even while another thread
// holds the GIL and runs Python.
TEST_F(PythonZooTest, ProcessMapsForkBesidePython) {
  StatusOr<ZooProgram> program = Resolve("seed.model.custom_model");
  ASSERT_TRUE(program.ok()) << program.status();
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) {
      pybind11::gil_scoped_acquire gil;
      pybind11::module_::import("builtins")
          .attr("sum")(pybind11::module_::import("builtins").attr("range")(100000));
    }
  });
  ProcessMapOptions options;
  options.processes = 2;
  auto source = MakeProcessMapSource(
      Dataset<Record>::FromVector(Records(40)).source(),
      [](Record record, uint64_t position) -> StatusOr<Example> {
        Example e;
        e.features["x"] = torch::full({1}, static_cast<double>(position));
        return e;
      },
      options);
  int n = 0;
  while (true) {
    StatusOr<std::optional<Example>> next = source->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) break;
    EXPECT_EQ((**next).features.at("x").item<double>(), n);
    ++n;
  }
  stop = true;
  busy.join();
  EXPECT_EQ(n, 40);
}

}  // namespace
}  // namespace elasticdl::python
