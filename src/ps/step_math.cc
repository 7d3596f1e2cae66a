#include "ps/step_math.h"

#include <cstdint>

namespace elasticdl::ps {
namespace {

// Whether `t` can be read or written in place as `like`'s numel values of
// type `T`.
template <typename T>
bool Plain(const torch::Tensor& t, const torch::Tensor& like) {
  return t.device().is_cpu() && t.scalar_type() == c10::CppTypeToScalarType<T>::value &&
         t.is_contiguous() && t.numel() == like.numel();
}

// (This file is compiled with -ffp-contract=off: no product and sum here
// becomes a fused multiply-add, which would round once where LibTorch
// rounds twice.)
template <typename T>
bool SumAndDivideAs(const std::vector<torch::Tensor*>& terms, int divisor) {
  for (const torch::Tensor* t : terms) {
    if (!Plain<T>(*t, *terms.front())) return false;
  }
  T* sum = terms.front()->data_ptr<T>();
  const int64_t n = terms.front()->numel();
  const size_t last = terms.size() - 1;
  for (size_t k = 1; k < last; ++k) {
    const T* term = terms[k]->data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) sum[i] += term[i];
  }
  // The last term and the quotient in one pass: sum + term, rounded, then
  // divided by div_'s divisor (the integer as a value of the tensor's
  // type). A power of two has an exact reciprocal, and a product by it is
  // the quotient itself, rounded the same: a division costs far more.
  const T* term = last > 0 ? terms[last]->data_ptr<T>() : nullptr;
  auto pass = [&](auto op) {
    if (term != nullptr) {
      for (int64_t i = 0; i < n; ++i) sum[i] = op(sum[i] + term[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) sum[i] = op(sum[i]);
    }
  };
  const T d = static_cast<T>(divisor);
  if (divisor == 1) {
    if (term != nullptr) pass([](T x) { return x; });
  } else if ((divisor & (divisor - 1)) == 0) {
    const T r = T{1} / d;
    pass([r](T x) { return x * r; });
  } else {
    pass([d](T x) { return x / d; });
  }
  return true;
}

template <typename T>
bool FoldUpdateAs(torch::Tensor& held, const torch::Tensor& update, double decay) {
  if (!Plain<T>(held, held) || !Plain<T>(update, held)) return false;
  T* h = held.data_ptr<T>();
  const T* u = update.data_ptr<T>();
  const int64_t n = held.numel();
  if (decay != 1) {
    // mul_'s factor: the double as a value of the tensor's type.
    const T d = static_cast<T>(decay);
    for (int64_t i = 0; i < n; ++i) h[i] *= d;
  }
  for (int64_t i = 0; i < n; ++i) h[i] += u[i];
  return true;
}

}  // namespace

void SumAndDivide(const std::vector<torch::Tensor*>& terms, int divisor) {
  if (terms.empty()) return;
  if (SumAndDivideAs<float>(terms, divisor) || SumAndDivideAs<double>(terms, divisor)) return;
  torch::Tensor& sum = *terms.front();
  for (size_t k = 1; k < terms.size(); ++k) sum.add_(*terms[k]);
  if (divisor != 1) sum.div_(divisor);
}

void FoldUpdate(torch::Tensor& held, const torch::Tensor& update, double decay) {
  if (held.scalar_type() == torch::kBool) {
    // Set (1), cleared (-1) or kept (0): each push's changes in turn.
    held.copy_(held.to(torch::kInt8).add_(update).clamp_(0, 1));
    return;
  }
  if (FoldUpdateAs<float>(held, update, decay) || FoldUpdateAs<double>(held, update, decay)) return;
  if (decay == 1 && FoldUpdateAs<int64_t>(held, update, decay)) return;
  if (decay != 1) held.mul_(decay);
  held.add_(update);
}

}  // namespace elasticdl::ps
