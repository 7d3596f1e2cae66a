// accuracy_bench: the test accuracy the seed CNN's recipe reaches in one
// process — the row bench/accuracy_bench.sh compares every distributed
// configuration with.
//
//   accuracy_bench --train=DIR --test=DIR --seed=S [--epochs=1] [--threads=2]
//                  [--dataset_fn=dataset_fn] [--optimizer=optimizer]
//
// The recipe is the zoo's own (model_zoo/mnist/mnist_functional_api.cc is
// compiled in): custom_model, dataset_fn (tf.Example parsing, /255,
// shuffle(1024)), loss, optimizer (SGD 0.1) or the entries named by
// --dataset_fn and --optimizer, minibatches of 64, run as a job
// runs them and with the same random choices a job with --seed=S makes
// (elasticdl/seed.h): the files cut into tasks of 64 x 8 records in the
// master's order, shuffled every epoch as the master does, task ids counted
// as the master deals them, each task's pipeline, the initial model and
// every minibatch's dropout seeded as a worker seeds them. One worker of a
// job therefore computes the same minibatches; only the parameter server's
// arithmetic (and BatchNorm statistics folded in there) differ in rounding.
// The accuracy is measured on every record of --test with the model in
// evaluation mode (BatchNorm's running statistics, no dropout), as a job's
// final evaluation does.
// Prints "RESULT accuracy=A seed=S seconds=T".
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>

#include "elasticdl/data/dataset.h"
#include "elasticdl/seed.h"
#include "elasticdl/zoo/optimizer.h"
#include "mnist_tasks.h"

namespace elasticdl::bench {
namespace {

constexpr int kMinibatch = 64;
constexpr int kMinibatchesPerTask = 8;

struct Flags {
  std::string train, test;
  uint64_t seed = 0;
  int epochs = 1;
  int threads = 2;
  std::string dataset_fn = "dataset_fn", optimizer = "optimizer";
};

double Train(const Flags& f, const ZooProgram& program, Model& model) {
  auto optimizer = OrDie(MakeOptimizer(OrDie(program.Optimizer()), model.parameters()));
  const std::vector<Task> tasks = MakeTasks(f.train, kMinibatch * kMinibatchesPerTask);
  std::mt19937_64 rng(job_seeds::TaskOrder(f.seed));  // the master's TaskManager
  int64_t task_id = 0;
  double loss_sum = 0;
  int64_t minibatches = 0;
  for (int epoch = 0; epoch < f.epochs; ++epoch) {
    std::vector<Task> order = tasks;
    std::shuffle(order.begin(), order.end(), rng);
    for (const Task& task : order) {
      Dataset<Record> records = ReadRecords(task.file, task.start, task.end)
                                    .with_seed(job_seeds::Pipeline(f.seed, epoch, task_id));
      Dataset<Example> batches =
          OrDie(program.MakeDataset(records, Mode::TRAINING)).batch(kMinibatch);
      for (int64_t i = 0;; ++i) {
        torch::manual_seed(job_seeds::PipelinePull(f.seed, task_id, i));
        std::optional<Example> batch = OrDie(batches.Next());
        if (!batch) break;
        torch::manual_seed(job_seeds::Minibatch(f.seed, task_id, i));
        model.zero_grad();
        torch::Tensor out = OrDie(program.Forward(model, batch->features, true));
        torch::Tensor loss = OrDie(program.Loss(batch->labels, out));
        loss.backward();
        optimizer->step();
        loss_sum += loss.item<double>();
        ++minibatches;
      }
      ++task_id;
    }
  }
  return minibatches > 0 ? loss_sum / minibatches : 0;
}

double Accuracy(const Flags& f, const ZooProgram& program, Model& model) {
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  for (const Task& task : MakeTasks(f.test, kMinibatch * kMinibatchesPerTask)) {
    Dataset<Example> batches =
        OrDie(program.MakeDataset(ReadRecords(task.file, task.start, task.end), Mode::EVALUATION))
            .batch(kMinibatch);
    while (std::optional<Example> batch = OrDie(batches.Next())) {
      torch::Tensor out = OrDie(program.Forward(model, batch->features, false));
      correct += torch::eq(torch::argmax(out, 1), batch->labels.flatten()).sum().item<int64_t>();
      total += batch->labels.size(0);
    }
  }
  return total > 0 ? double(correct) / total : 0;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> const char* {
      return a.substr(0, name.size()) == name ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = value("--train=")) {
      f.train = v;
    } else if (const char* v = value("--test=")) {
      f.test = v;
    } else if (const char* v = value("--seed=")) {
      f.seed = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--epochs=")) {
      f.epochs = std::max(1, std::atoi(v));
    } else if (const char* v = value("--threads=")) {
      f.threads = std::max(1, std::atoi(v));
    } else if (const char* v = value("--dataset_fn=")) {
      f.dataset_fn = v;
    } else if (const char* v = value("--optimizer=")) {
      f.optimizer = v;
    } else {
      std::fprintf(stderr,
                   "usage: accuracy_bench --train=DIR --test=DIR --seed=S [--epochs=N] "
                   "[--threads=N] [--dataset_fn=ENTRY] [--optimizer=ENTRY]\n");
      return 2;
    }
  }
  if (f.train.empty() || f.test.empty()) {
    Die(absl::InvalidArgumentError("--train=DIR and --test=DIR (from `elasticdl data mnist`)"));
  }
  torch::set_num_threads(f.threads);
  const auto start = std::chrono::steady_clock::now();
  ZooProgram program = MakeProgram(f.dataset_fn, f.optimizer);
  torch::manual_seed(job_seeds::InitialModel(f.seed));
  std::shared_ptr<Model> model = OrDie(program.MakeModel());
  const double loss = Train(f, program, *model);
  const double accuracy = Accuracy(f, program, *model);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("RESULT accuracy=%.4f seed=%llu epochs=%d mean_loss=%.4f seconds=%.1f\n", accuracy,
              static_cast<unsigned long long>(f.seed), f.epochs, loss, seconds);
  return 0;
}

}  // namespace
}  // namespace elasticdl::bench

int main(int argc, char** argv) { return elasticdl::bench::Main(argc, argv); }
