// Click-through-rate models over Criteo-shaped data (`elasticdl data criteo`
// writes it: label, integer features I1..I13, categorical C1..C26):
//
//   DeepFM       Guo et al. 2017: a factorization machine (first-order weights
//                and pairwise interactions of latent vectors) and a deep
//                network sharing the latent vectors.
//   WideAndDeep  Cheng et al. 2016: a linear model over the categorical ids
//                and a deep network over their embeddings.
//
// Every categorical value is hashed with its field into one id space, so a
// single table per kind of weight holds all 26 fields; the tables live on
// the parameter servers (elasticdl::Embedding) and grow with the values seen.
// Integer features enter as log(1 + max(x, 0)). The output is the click
// probability.
//
// --params: embedding_dim (default 8), hidden_units (default [400, 400]).
#include "elasticdl/elasticdl.h"

using namespace elasticdl;  // NOLINT(google-build-using-namespace): reads like the Python
namespace nn = torch::nn;

namespace {

constexpr int64_t kIntegers = 13;
constexpr int64_t kCategories = 26;

// The tables' rows: Adagrad, whose per-row step sizes suit ids seen a few
// times as well as ids seen in every minibatch (the dense layers keep the
// model's Adam).
torch::optim::AdagradOptions TableOptimizer() { return torch::optim::AdagradOptions(0.05); }

// The deep part: ReLU layers of `hidden` units, then one output.
nn::Sequential Tower(int64_t in, const std::vector<int64_t>& hidden) {
  nn::Sequential tower;
  for (int64_t units : hidden) {
    tower->push_back(nn::Linear(in, units));
    tower->push_back(nn::ReLU());
    in = units;
  }
  tower->push_back(nn::Linear(in, 1));
  return tower;
}

class DeepFM : public Model {
 public:
  explicit DeepFM(const Params& params)
      : dim_(params.get<int64_t>("embedding_dim", 8)),
        weights_(register_module(
            "weights",
            Embedding(EmbeddingOptions("weights", 1).zeros().optimizer(TableOptimizer())))),
        factors_(register_module(
            "factors",
            Embedding(
                EmbeddingOptions("factors", dim_).normal(0, 0.01).optimizer(TableOptimizer())))),
        numbers_(register_module("numbers", nn::Linear(kIntegers, 1))),
        deep_(register_module(
            "deep", Tower(kCategories * dim_ + kIntegers,
                          params.get<std::vector<int64_t>>("hidden_units", {400, 400})))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    const torch::Tensor& ids = inputs.at("ids");          // [batch, 26]
    const torch::Tensor& numbers = inputs.at("numbers");  // [batch, 13]
    torch::Tensor first = weights_(ids).sum({1, 2}) + numbers_(numbers).squeeze(1);
    torch::Tensor v = factors_(ids);  // [batch, 26, dim]
    // Pairwise interactions: (sum v)^2 - sum v^2, halved.
    torch::Tensor second = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1);
    torch::Tensor deep = deep_->forward(torch::cat({v.flatten(1), numbers}, 1)).squeeze(1);
    return torch::sigmoid(first + second + deep).unsqueeze(1);
  }

 private:
  int64_t dim_;
  Embedding weights_;
  Embedding factors_;
  nn::Linear numbers_;
  nn::Sequential deep_;
};
ELASTICDL_REGISTER_MODEL(DeepFM);

class WideAndDeep : public Model {
 public:
  explicit WideAndDeep(const Params& params)
      : dim_(params.get<int64_t>("embedding_dim", 8)),
        wide_(register_module(
            "wide", Embedding(EmbeddingOptions("wide", 1).zeros().optimizer(FtrlOptions(0.05))))),
        embeddings_(register_module(
            "embeddings", Embedding(EmbeddingOptions("embeddings", dim_).normal(0, 0.01)))),
        deep_(register_module(
            "deep", Tower(kCategories * dim_ + kIntegers,
                          params.get<std::vector<int64_t>>("hidden_units", {400, 400})))) {}

  torch::Tensor forward(const FeatureMap& inputs, bool /*training*/) override {
    const torch::Tensor& ids = inputs.at("ids");
    const torch::Tensor& numbers = inputs.at("numbers");
    torch::Tensor wide = wide_(ids).sum({1, 2});
    torch::Tensor deep =
        deep_->forward(torch::cat({embeddings_(ids).flatten(1), numbers}, 1)).squeeze(1);
    return torch::sigmoid(wide + deep).unsqueeze(1);
  }

 private:
  int64_t dim_;
  Embedding wide_;
  Embedding embeddings_;
  nn::Sequential deep_;
};
ELASTICDL_REGISTER_MODEL(WideAndDeep);

Dataset<Example> dataset_fn(Dataset<Record> dataset, Mode mode) {
  FeatureSpecMap spec;
  for (int64_t i = 1; i <= kIntegers; ++i) {
    spec["I" + std::to_string(i)] = FixedLenFeature({1}, torch::kInt64, torch::tensor(0L));
  }
  for (int64_t c = 1; c <= kCategories; ++c) {
    spec["C" + std::to_string(c)] = FixedLenBytesFeature({1}, std::vector<std::string>{""});
  }
  if (mode != Mode::PREDICTION) spec["label"] = FixedLenFeature({1}, torch::kInt64);
  auto parse = [spec, mode](const Record& record) -> StatusOr<Example> {
    EDL_ASSIGN_OR_RETURN(Features r, ParseExample(record.data, spec));
    torch::Tensor numbers = torch::empty({kIntegers}, torch::kInt64);
    for (int64_t i = 0; i < kIntegers; ++i) numbers[i] = r["I" + std::to_string(i + 1)][0];
    torch::Tensor ids = torch::empty({kCategories}, torch::kInt64);
    auto id = ids.accessor<int64_t, 1>();
    for (int64_t c = 0; c < kCategories; ++c) {
      // A missing value ("") is a value of its own in each field.
      id[c] = HashBucket(r.bytes.at("C" + std::to_string(c + 1))[0], 0, static_cast<uint64_t>(c));
    }
    Example example;
    example.features = {{"ids", ids}, {"numbers", LogNormalize(numbers)}};
    if (mode != Mode::PREDICTION) example.labels = r["label"].to(torch::kFloat32);
    return example;
  };
  auto parsed = dataset.map(parse);
  if (mode == Mode::TRAINING) parsed = parsed.shuffle(1024);
  return parsed;
}
ELASTICDL_REGISTER(dataset_fn);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::nn::functional::binary_cross_entropy(predictions.clamp(1e-7, 1 - 1e-7),
                                                     labels.view_as(predictions));
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::AdamOptions(1e-3); }
ELASTICDL_REGISTER(optimizer);

MetricMap eval_metrics_fn() {
  return {
      {"auc", [] { return AUC(1000); }},
      {"log_loss",
       [](const torch::Tensor& labels, const torch::Tensor& predictions) {
         torch::Tensor p = predictions.to(torch::kFloat64).flatten().clamp(1e-7, 1 - 1e-7);
         torch::Tensor y = labels.to(torch::kFloat64).flatten();
         return -(y * p.log() + (1 - y) * (1 - p).log());
       }},
  };
}
ELASTICDL_REGISTER(eval_metrics_fn);

}  // namespace
