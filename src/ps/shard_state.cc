#include "ps/shard_state.h"

#include <c10/util/StringUtil.h>

#include <memory>
#include <utility>
#include <variant>

#include "common/strings.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::ps {
namespace {

using torch::optim::AdagradOptions;
using torch::optim::AdagradParamState;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::OptimizerParamState;
using torch::optim::RMSpropOptions;
using torch::optim::RMSpropParamState;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

// How LibTorch's optimizers key their per-parameter state.
std::string StateKey(const torch::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}

void PutSlot(const char* slot, const torch::Tensor& t, ParameterSnapshot* out) {
  if (t.defined()) out->slots[slot] = t.detach().clone();
}

// The slot `slot` from `slots`, or zeros like `param` when absent (and
// `required`), or an undefined tensor. Checks shape and type.
StatusOr<torch::Tensor> TakeSlot(const std::map<std::string, torch::Tensor>& slots,
                                 const char* slot, bool required, const std::string& name,
                                 const torch::Tensor& param) {
  auto it = slots.find(slot);
  if (it == slots.end()) {
    return required ? torch::zeros_like(param, torch::MemoryFormat::Preserve) : torch::Tensor();
  }
  const torch::Tensor& t = it->second;
  if (t.sizes() != param.sizes() || t.scalar_type() != param.scalar_type()) {
    return absl::InvalidArgumentError(
        StrCat("optimizer slot '", slot, "' of parameter '", name, "' has shape ",
               c10::str(t.sizes()), " ", c10::toString(t.scalar_type()), "; the parameter is ",
               c10::str(param.sizes()), " ", c10::toString(param.scalar_type())));
  }
  return t.clone();
}

// Adam's and AdamW's states have the same fields.
template <typename State>
void PutAdamSlots(const OptimizerParamState& state, ParameterSnapshot* out) {
  const auto& s = static_cast<const State&>(state);
  PutSlot("exp_avg", s.exp_avg(), out);
  PutSlot("exp_avg_sq", s.exp_avg_sq(), out);
  PutSlot("max_exp_avg_sq", s.max_exp_avg_sq(), out);
  out->step = s.step();
}

template <typename State>
StatusOr<std::unique_ptr<OptimizerParamState>> TakeAdamSlots(
    bool amsgrad, const std::string& name, const std::map<std::string, torch::Tensor>& slots,
    int64_t step, const torch::Tensor& param) {
  auto s = std::make_unique<State>();
  EDL_ASSIGN_OR_RETURN(torch::Tensor avg, TakeSlot(slots, "exp_avg", true, name, param));
  EDL_ASSIGN_OR_RETURN(torch::Tensor sq, TakeSlot(slots, "exp_avg_sq", true, name, param));
  EDL_ASSIGN_OR_RETURN(torch::Tensor max_sq,
                       TakeSlot(slots, "max_exp_avg_sq", amsgrad, name, param));
  s->exp_avg(avg);
  s->exp_avg_sq(sq);
  s->max_exp_avg_sq(max_sq);
  s->step(step);
  return std::unique_ptr<OptimizerParamState>(std::move(s));
}

}  // namespace

proto::OptimizerConfig OptimizerConfigOf(const OptimizerSpec& spec) {
  proto::OptimizerConfig config;
  // SerializeOptimizer writes an OptimizerConfig; parsing it cannot fail.
  config.ParseFromString(SerializeOptimizer(spec));
  return config;
}

Status EncodeSnapshot(ShardSnapshot snapshot, proto::ShardCheckpoint* out) {
  out->Clear();
  out->set_version(snapshot.version);
  out->set_ps_id(snapshot.ps_id);
  out->set_num_ps(snapshot.num_ps);
  for (const auto& [name, p] : snapshot.parameters) {
    proto::ParameterState* state = out->add_parameters();
    EDL_RETURN_IF_ERROR(rpc::EncodeTensor(name, p.value, state->mutable_value()));
    for (const auto& [slot, t] : p.slots) {
      EDL_RETURN_IF_ERROR(rpc::EncodeTensor(slot, t, state->add_slots()));
    }
    state->set_step(p.step);
  }
  for (const auto& [name, t] : snapshot.buffers) {
    EDL_RETURN_IF_ERROR(rpc::EncodeTensor(name, t, out->add_buffers()));
  }
  for (const auto& [task, n] : snapshot.applied) {
    proto::TaskProgress* progress = out->add_applied();
    progress->set_task_id(task);
    progress->set_minibatches(n);
  }
  *out->mutable_optimizer() = snapshot.optimizer;
  for (proto::EmbeddingTableSpec& spec : snapshot.tables) {
    *out->add_embedding_tables() = std::move(spec);
  }
  for (proto::EmbeddingRowBlock& block : snapshot.blocks) {
    *out->add_embedding_blocks() = std::move(block);
  }
  out->set_embedding_block_count(out->embedding_blocks_size());
  return absl::OkStatus();
}

void ExportOptimizerState(const OptimizerSpec& spec, const torch::optim::Optimizer& optimizer,
                          const torch::Tensor& param, ParameterSnapshot* out) {
  out->slots.clear();
  out->step = 0;
  auto it = optimizer.state().find(StateKey(param));
  if (it == optimizer.state().end()) return;
  const OptimizerParamState& state = *it->second;
  torch::NoGradGuard no_grad;
  if (std::holds_alternative<SGDOptions>(spec)) {
    const auto& s = static_cast<const SGDParamState&>(state);
    PutSlot("momentum_buffer", s.momentum_buffer(), out);
  } else if (std::holds_alternative<AdamOptions>(spec)) {
    PutAdamSlots<AdamParamState>(state, out);
  } else if (std::holds_alternative<AdamWOptions>(spec)) {
    PutAdamSlots<AdamWParamState>(state, out);
  } else if (std::holds_alternative<AdagradOptions>(spec)) {
    const auto& s = static_cast<const AdagradParamState&>(state);
    PutSlot("sum", s.sum(), out);
    out->step = s.step();
  } else {
    const auto& s = static_cast<const RMSpropParamState&>(state);
    PutSlot("square_avg", s.square_avg(), out);
    PutSlot("momentum_buffer", s.momentum_buffer(), out);
    PutSlot("grad_avg", s.grad_avg(), out);
    out->step = s.step();
  }
}

Status ImportOptimizerState(const OptimizerSpec& spec, const std::string& name,
                            const std::map<std::string, torch::Tensor>& slots, int64_t step,
                            const torch::Tensor& param, torch::optim::Optimizer* optimizer) {
  if (slots.empty()) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  std::unique_ptr<OptimizerParamState> state;
  if (const auto* sgd = std::get_if<SGDOptions>(&spec)) {
    // SGD keeps no state without momentum.
    if (sgd->momentum() == 0) return absl::OkStatus();
    auto s = std::make_unique<SGDParamState>();
    EDL_ASSIGN_OR_RETURN(torch::Tensor buf, TakeSlot(slots, "momentum_buffer", true, name, param));
    s->momentum_buffer(buf);
    state = std::move(s);
  } else if (const auto* adam = std::get_if<AdamOptions>(&spec)) {
    EDL_ASSIGN_OR_RETURN(state,
                         TakeAdamSlots<AdamParamState>(adam->amsgrad(), name, slots, step, param));
  } else if (const auto* adamw = std::get_if<AdamWOptions>(&spec)) {
    EDL_ASSIGN_OR_RETURN(
        state, TakeAdamSlots<AdamWParamState>(adamw->amsgrad(), name, slots, step, param));
  } else if (std::holds_alternative<AdagradOptions>(spec)) {
    auto s = std::make_unique<AdagradParamState>();
    EDL_ASSIGN_OR_RETURN(torch::Tensor sum, TakeSlot(slots, "sum", true, name, param));
    s->sum(sum);
    s->step(step);
    state = std::move(s);
  } else {
    const auto& rms = std::get<RMSpropOptions>(spec);
    auto s = std::make_unique<RMSpropParamState>();
    EDL_ASSIGN_OR_RETURN(torch::Tensor sq, TakeSlot(slots, "square_avg", true, name, param));
    EDL_ASSIGN_OR_RETURN(torch::Tensor mom,
                         TakeSlot(slots, "momentum_buffer", rms.momentum() > 0, name, param));
    EDL_ASSIGN_OR_RETURN(torch::Tensor avg,
                         TakeSlot(slots, "grad_avg", rms.centered(), name, param));
    s->square_avg(sq);
    s->momentum_buffer(mom);
    s->grad_avg(avg);
    s->step(step);
    state = std::move(s);
  }
  optimizer->state()[StateKey(param)] = std::move(state);
  return absl::OkStatus();
}

}  // namespace elasticdl::ps
