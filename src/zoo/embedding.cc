#include "elasticdl/zoo/embedding.h"

#include <ATen/ATen.h>

#include <map>
#include <ostream>
#include <set>
#include <utility>

#include "common/strings.h"
#include "elasticdl/seed.h"
#include "ps/placement.h"
#include "zoo/embedding_spec.h"

namespace elasticdl {

EmbeddingOptions::EmbeddingOptions(std::string name, int64_t dim)
    : name_(std::move(name)), dim_(dim) {}

EmbeddingOptions& EmbeddingOptions::uniform(double low, double high) {
  initializer_ = {Initializer::kUniform, low, high};
  return *this;
}
EmbeddingOptions& EmbeddingOptions::normal(double mean, double stddev) {
  initializer_ = {Initializer::kNormal, mean, stddev};
  return *this;
}
EmbeddingOptions& EmbeddingOptions::zeros() {
  initializer_ = {Initializer::kZeros, 0, 0};
  return *this;
}
EmbeddingOptions& EmbeddingOptions::constant(double value) {
  initializer_ = {Initializer::kConstant, value, 0};
  return *this;
}
EmbeddingOptions& EmbeddingOptions::optimizer(TableOptimizerSpec spec) {
  optimizer_ = std::move(spec);
  return *this;
}
EmbeddingOptions& EmbeddingOptions::combiner(Combiner combiner) {
  combiner_ = combiner;
  return *this;
}
EmbeddingOptions& EmbeddingOptions::num_rows(int64_t rows) {
  num_rows_ = rows;
  return *this;
}
EmbeddingOptions& EmbeddingOptions::admit_after(int32_t k, double unadmitted_value) {
  admit_after_ = k;
  unadmitted_value_ = unadmitted_value;
  return *this;
}
EmbeddingOptions& EmbeddingOptions::evict_after_versions(int64_t versions) {
  evict_after_versions_ = versions;
  return *this;
}
EmbeddingOptions& EmbeddingOptions::max_rows_per_server(int64_t rows) {
  max_rows_ = rows;
  return *this;
}
EmbeddingOptions& EmbeddingOptions::dtype(torch::Dtype dtype) {
  dtype_ = dtype;
  return *this;
}

EmbeddingImpl::EmbeddingImpl(EmbeddingOptions options) : options_(std::move(options)) {
  TORCH_CHECK(!options_.name().empty(), "an Embedding needs a table name");
  TORCH_CHECK(options_.dim() >= 1, "Embedding '", options_.name(), "': dimension ", options_.dim(),
              ", expected >= 1");
  TORCH_CHECK(options_.dtype() == torch::kFloat32 || options_.dtype() == torch::kFloat64,
              "Embedding '", options_.name(), "': dtype must be float32 or float64");
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids, const torch::Tensor& mask) {
  const std::string& name = options_.name();
  TORCH_CHECK(source_ != nullptr, "Embedding '", name,
              "' has no rows here: its table lives on the parameter servers of a job");
  TORCH_CHECK(ids.scalar_type() == torch::kInt64, "Embedding '", name, "': ids must be int64, not ",
              ids.scalar_type());
  const bool combine = options_.combiner() != Combiner::kNone;
  TORCH_CHECK(!combine || ids.dim() == 2, "Embedding '", name,
              "': a combiner takes ids of shape [batch, n], not ", ids.sizes());
  TORCH_CHECK(!mask.defined() || (combine && mask.sizes() == ids.sizes()), "Embedding '", name,
              "': a mask goes with a combiner and has the shape of the ids (", ids.sizes(), ")");
  // Masked positions are not looked up (padding need not be a valid id).
  torch::Tensor flat = ids.reshape({-1});
  torch::Tensor positions;
  if (mask.defined()) {
    positions = mask.reshape({-1}).to(torch::kBool).nonzero().squeeze(1);
    flat = flat.index_select(0, positions);
  }
  torch::Tensor unique;
  torch::Tensor inverse;
  std::tie(unique, inverse, std::ignore) =
      at::_unique2(flat, /*sorted=*/false, /*return_inverse=*/true, /*return_counts=*/false);
  torch::Tensor rows = source_->Rows(*this, unique, is_training());
  TORCH_CHECK(rows.dim() == 2 && rows.size(0) == unique.size(0) && rows.size(1) == options_.dim(),
              "Embedding '", name, "': the row source answered ", rows.sizes(), " for ",
              unique.size(0), " ids");
  torch::Tensor looked_up = rows.index_select(0, inverse);
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(options_.dim());
  if (!combine) return looked_up.view(shape);
  torch::Tensor out = positions.defined() ? torch::zeros({ids.numel(), options_.dim()},
                                                         rows.options().requires_grad(false))
                                                .index_add(0, positions, looked_up)
                                          : looked_up;
  torch::Tensor sum = out.view(shape).sum(1);
  if (options_.combiner() == Combiner::kSum) return sum;
  torch::Tensor count =
      (mask.defined() ? mask.to(rows.scalar_type()).sum(1, /*keepdim=*/true)
                      : torch::full({ids.size(0), 1}, static_cast<double>(ids.size(1)),
                                    rows.options().requires_grad(false)))
          .clamp_min(1);
  return options_.combiner() == Combiner::kMean ? sum / count : sum / count.sqrt();
}

void EmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "elasticdl::Embedding(" << options_.name() << ", dim=" << options_.dim() << ")";
}

proto::EmbeddingTableSpec TableSpecOf(const EmbeddingOptions& options, uint64_t job_seed) {
  proto::EmbeddingTableSpec spec;
  spec.set_name(options.name());
  spec.set_dim(options.dim());
  spec.set_dtype(options.dtype() == torch::kFloat64 ? proto::DT_FLOAT64 : proto::DT_FLOAT32);
  proto::EmbeddingInitializer* init = spec.mutable_initializer();
  using Init = EmbeddingOptions::Initializer;
  switch (options.initializer().kind) {
    case Init::kUniform:
      init->set_kind(proto::EmbeddingInitializer::UNIFORM);
      break;
    case Init::kNormal:
      init->set_kind(proto::EmbeddingInitializer::NORMAL);
      break;
    case Init::kZeros:
      init->set_kind(proto::EmbeddingInitializer::ZEROS);
      break;
    case Init::kConstant:
      init->set_kind(proto::EmbeddingInitializer::CONSTANT);
      break;
  }
  init->set_a(options.initializer().a);
  init->set_b(options.initializer().b);
  // The job's seed and the table's name: tables of one model differ, and
  // every process of the job agrees.
  spec.set_seed(SeedMix(job_seed, ps::StableHash(options.name())));
  if (options.optimizer().has_value()) {
    proto::OptimizerConfig* config = spec.mutable_optimizer();
    std::visit(
        [config](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, FtrlOptions>) {
            proto::FtrlConfig* f = config->mutable_ftrl();
            f->set_lr(o.lr);
            f->set_lr_power(o.lr_power);
            f->set_l1(o.l1);
            f->set_l2(o.l2);
            f->set_initial_accumulator_value(o.initial_accumulator_value);
          } else {
            config->ParseFromString(SerializeOptimizer(OptimizerSpec(o)));
          }
        },
        *options.optimizer());
  }
  spec.set_num_rows(options.num_rows());
  spec.set_admit_after(options.admit_after());
  spec.set_unadmitted_value(options.unadmitted_value());
  spec.set_evict_after_versions(options.evict_after_versions());
  spec.set_max_rows(options.max_rows_per_server());
  return spec;
}

StatusOr<std::vector<EmbeddingImpl*>> EmbeddingsOf(Model& model) {
  std::vector<EmbeddingImpl*> layers;
  std::map<std::string, EmbeddingImpl*> by_name;
  std::set<EmbeddingImpl*> seen;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    auto* layer = module->as<EmbeddingImpl>();
    if (layer == nullptr || !seen.insert(layer).second) continue;
    auto [it, inserted] = by_name.emplace(layer->options().name(), layer);
    if (!inserted) {
      const EmbeddingOptions& a = it->second->options();
      const EmbeddingOptions& b = layer->options();
      if (a.dim() != b.dim() || a.dtype() != b.dtype() || a.num_rows() != b.num_rows()) {
        return absl::InvalidArgumentError(
            StrCat("two Embedding layers name table '", a.name(),
                   "' with different dimensions, dtypes or ranges (", a.dim(), " and ", b.dim(),
                   "): layers share a table only when its rows fit both"));
      }
    }
    layers.push_back(layer);
  }
  return layers;
}

Status CheckDenseModel(Model& model, std::string_view strategy) {
  EDL_ASSIGN_OR_RETURN(std::vector<EmbeddingImpl*> embeddings, EmbeddingsOf(model));
  if (embeddings.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat("--distribution_strategy=", strategy, ": the model's embedding table '",
             embeddings[0]->options().name(),
             "' needs parameter servers, and this strategy trains dense models only; use "
             "--distribution_strategy=ParameterServerStrategy for models with Embedding layers"));
}

}  // namespace elasticdl
