// A model whose trained values count how often each record was trained on.
//
// Every record is a tf.train.Example with an int64 feature "id", unique in
// 0..num_records-1. The model has one parameter, `rows` [num_records, 1],
// initialised to 0; its output for a record is rows[id] and the loss is the
// sum of the outputs, so each trained record adds exactly 1 to its own row's
// gradient and 0 to every other row. With plain SGD at lr=1 (no momentum, no
// decay) in asynchronous mode, every accepted minibatch lowers the rows of
// its records by exactly 1, in float32 without rounding (small integers). A
// job of E epochs therefore ends with rows[r] == -E for every r: a row above
// -E names a record that was lost, a row below it a record trained twice.
//
// Synchronous steps average the gradients of several minibatches, so a
// record's row would move by 1/k for a step of k. `unit_step_optimizer`
// (Adam with betas 0 and a negligible eps: each step moves a parameter by
// lr * g / |g|) lowers by exactly 1 every row whose record is in the step,
// whatever k: with it, E epochs end at -E in every mode. (Two minibatches
// of one step holding the same record count once. Epochs overlap (the next
// epoch's tasks go out while the last ones of this one run), but where
// steps are synchronous the master never hands out a range another worker
// holds or may still train, so the same records of two epochs do not meet
// in one step.)
//
// The buffer `trained` [num_records] (int64) counts the same in a buffer: a
// training forward adds 1 at each record's id, and a step applies what each
// of its minibatches added, on the parameter servers and under
// AllreduceStrategy alike; E epochs end with E everywhere.
//
// dataset_fn shuffles its records through a buffer of 64, smaller than a
// task of the chaos tests (128 records); wide_shuffle_dataset_fn through one
// of 1000, larger than a task. Both are seeded by the pipeline as any
// dataset_fn is, so every attempt of a task must replay the same order for
// the counts to hold.
//
// Evaluation reveals validation records counted twice or never: the means of
// id, id^2 and id^3 over validation ids 0..M-1 are (M-1)/2,
// (M-1)(2M-1)/6 and M(M-1)^2/4 only when each id counts once (three moments
// of a contiguous range match the whole only when it is the whole), and the
// mean prediction is -E once training is complete. All sums are of integers
// below 2^53 in double: exact.
//
// --params:
//   num_records  N, the number of rows (required; every id must be below it)
//   sleep_ms     milliseconds every training forward sleeps (default 0), to
//                keep a job of a few thousand records running long enough
//                for faults to land in it
//
// tests/scenario/exactness.py writes the data and checks the trained rows.
#include <chrono>
#include <thread>

#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python

// All files of a zoo link into one library: keep each file's names to itself.
namespace {

class Exactness : public Model {
 public:
  explicit Exactness(const Params& params)
      : sleep_(params.get<int64_t>("sleep_ms", 0)),
        rows_(register_parameter("rows", torch::zeros({params.get<int64_t>("num_records"), 1}))),
        trained_(register_buffer(
            "trained", torch::zeros({params.get<int64_t>("num_records")}, torch::kInt64))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    if (training && sleep_.count() > 0) std::this_thread::sleep_for(sleep_);
    torch::Tensor id = inputs.at("id").flatten();
    TORCH_CHECK(id.numel() == 0 ||
                    (id.min().item<int64_t>() >= 0 && id.max().item<int64_t>() < rows_.size(0)),
                "exactness: an id is outside 0..num_records-1 (num_records=", rows_.size(0),
                "); set --params num_records");
    if (training) trained_.index_add_(0, id, torch::ones_like(id));
    return rows_.index_select(0, id);
  }

 private:
  std::chrono::milliseconds sleep_;
  torch::Tensor rows_;
  torch::Tensor trained_;
};
ELASTICDL_REGISTER_MODEL(Exactness);

// The same counts kept in an embedding table on the parameter servers:
// table "records", dimension 1, ids 0..num_records-1, starting at 0. A
// record's row moves only when its minibatch's sparse gradient is applied,
// so the rows check lookups, the routing of rows to servers, and the
// exactly-once application of sparse gradients (with PS kills and
// restores: of rows and their optimizer slots) as `rows` does for dense
// parameters. The trained model keeps the table in embeddings/.
class EmbeddingExactness : public Model {
 public:
  explicit EmbeddingExactness(const Params& params)
      : sleep_(params.get<int64_t>("sleep_ms", 0)),
        records_(register_module("records",
                                 Embedding(EmbeddingOptions("records", 1)
                                               .zeros()
                                               .num_rows(params.get<int64_t>("num_records"))))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool training) override {
    if (training && sleep_.count() > 0) std::this_thread::sleep_for(sleep_);
    return records_(inputs.at("id").flatten());  // [batch, 1]
  }

 private:
  std::chrono::milliseconds sleep_;
  Embedding records_;
};
ELASTICDL_REGISTER_MODEL(EmbeddingExactness);

StatusOr<Example> ParseId(const Record& record) {
  EDL_ASSIGN_OR_RETURN(Features r,
                       ParseExample(record.data, {{"id", FixedLenFeature({1}, torch::kInt64)}}));
  Example example;
  example.features = {{"id", r["id"]}};
  example.labels = r["id"];
  return example;
}

Dataset<Example> Parse(Dataset<Record> dataset, Mode mode, size_t shuffle_buffer) {
  auto parsed = dataset.map(ParseId);
  return mode == Mode::PREDICTION ? parsed : parsed.shuffle(shuffle_buffer);
}

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  return Parse(std::move(dataset), mode, 64);
}
ELASTICDL_REGISTER(dataset_fn);

Dataset<Example> wide_shuffle_dataset_fn(Dataset<Record> dataset, Mode mode) {
  return Parse(std::move(dataset), mode, 1000);
}
ELASTICDL_REGISTER(wide_shuffle_dataset_fn);

// The records parsed by two forked processes (seed 004's use_multiprocessing
// loaders), shuffled through 64 as dataset_fn's: with --model_def naming the
// Python twin (python_exactness.py), a worker forks its loaders beside its
// Python interpreter.
Dataset<Example> forked_dataset_fn(Dataset<Record> dataset, Mode mode) {
  auto parse = [](const Record& record, Mode /*mode*/) { return ParseId(record); };
  return DataAdapter(parse)
      .workers(2)
      .use_multiprocessing(true)
      .shuffle(mode == Mode::PREDICTION ? 0 : 64)
      .Apply(std::move(dataset), mode);
}
ELASTICDL_REGISTER(forked_dataset_fn);

// Every output's gradient is exactly 1.
torch::Tensor loss(const torch::Tensor& /*labels*/, const torch::Tensor& predictions) {
  return predictions.sum();
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::SGDOptions(1.0); }
ELASTICDL_REGISTER(optimizer);

OptimizerSpec unit_step_optimizer() {
  return torch::optim::AdamOptions(1.0).betas({0.0, 0.0}).eps(1e-30);
}
ELASTICDL_REGISTER(unit_step_optimizer);

// Not under the default name: only jobs that ask for it
// (--learning_rate_schedule=warmup_step_schedule) follow it.
LearningRateSchedule warmup_step_schedule() {
  return LearningRateSchedule::Step(/*every=*/10, /*gamma=*/0.5).WithWarmup(4);
}
ELASTICDL_REGISTER(warmup_step_schedule);

MetricMap eval_metrics_fn() {
  auto power = [](int p) {
    return [p](const torch::Tensor& labels, const torch::Tensor& /*predictions*/) {
      return labels.to(torch::kFloat64).flatten().pow(p);
    };
  };
  return {
      {"mean_id", power(1)},
      {"mean_id_squared", power(2)},
      {"mean_id_cubed", power(3)},
      {"mean_prediction",
       [](const torch::Tensor& /*labels*/, const torch::Tensor& predictions) {
         return predictions.to(torch::kFloat64).flatten();
       }},
  };
}
ELASTICDL_REGISTER(eval_metrics_fn);

// The exactness model as a seed 004 trial, for experiments
// (tests/scenario/experiment_test.py). Hyperparameters: num_records and
// sleep_ms as Exactness's --params, and `quality` (required), which the
// metric "quality" of every evaluation reports exactly, so that a test
// knows how a searcher must rank the trials. unit_step_optimizer keeps the
// rows exact in every update mode; the training loader shuffles through 64
// records on 2 threads, as dataset_fn does on one.
class ExactnessTrial : public Trial {
 public:
  CompiledModel build_model(const Hparams& hparams) override {
    const double quality = hparams.get<double>("quality");
    MetricMap metrics = eval_metrics_fn();
    metrics.emplace("quality",
                    [quality](const torch::Tensor& labels, const torch::Tensor& /*predictions*/) {
                      return torch::full({labels.size(0)}, quality, torch::kFloat64);
                    });
    return Compile(std::make_shared<Exactness>(hparams))
        .optimizer(unit_step_optimizer())
        .loss(loss)
        .metrics(std::move(metrics));
  }

  DataLoaders make_data_loaders(const Hparams& /*hparams*/) override {
    auto parse = [](const Record& record, Mode /*mode*/) { return ParseId(record); };
    return {DataAdapter(parse).workers(2).shuffle(64), DataAdapter(parse).workers(0)};
  }
};
ELASTICDL_REGISTER_TRIAL(ExactnessTrial);

}  // namespace
