#include "ps/step_math.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace elasticdl::ps {
namespace {

// A step's sum in LibTorch's own calls: add_ in order, then div_.
torch::Tensor AddThenDivide(const std::vector<torch::Tensor>& terms, int divisor) {
  torch::Tensor sum = terms.front().clone();
  for (size_t k = 1; k < terms.size(); ++k) sum.add_(terms[k]);
  if (divisor != 1) sum.div_(divisor);
  return sum;
}

torch::Tensor Summed(const std::vector<torch::Tensor>& terms, int divisor) {
  std::vector<torch::Tensor> own;
  for (const torch::Tensor& t : terms) own.push_back(t.clone());
  std::vector<torch::Tensor*> pointers;
  for (torch::Tensor& t : own) pointers.push_back(&t);
  SumAndDivide(pointers, divisor);
  return own.front();
}

// Values whose sum depends on the order of additions and whose quotients
// are rounded: any other order or operation shows in the bits.
std::vector<torch::Tensor> Terms(int count, torch::ScalarType type, std::vector<int64_t> shape) {
  torch::manual_seed(7);
  std::vector<torch::Tensor> terms;
  for (int k = 0; k < count; ++k) {
    terms.push_back((torch::randn(shape, torch::kFloat64) * std::pow(10.0, 3 * (k % 3))).to(type));
  }
  return terms;
}

TEST(SumAndDivideTest, GivesAddAndDivsValuesBitForBit) {
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    for (int count : {1, 2, 3, 5}) {
      for (int divisor : {1, 2, 3, 4, 6, 7, 8, 16}) {
        std::vector<torch::Tensor> terms = Terms(count, type, {10, 9217});
        torch::Tensor expected = AddThenDivide(terms, divisor);
        torch::Tensor got = Summed(terms, divisor);
        EXPECT_TRUE(torch::equal(got, expected))
            << c10::toString(type) << ", " << count << " terms, divisor " << divisor;
        // The order is the terms': another order gives other bits here.
        if (count >= 3) {
          std::vector<torch::Tensor> reversed(terms.rbegin(), terms.rend());
          EXPECT_FALSE(torch::equal(AddThenDivide(reversed, divisor), expected));
        }
      }
    }
  }
}

TEST(SumAndDivideTest, QuotientsOfTinyValuesRoundAsDivsDo) {
  // Subnormal quotients and sums, where a product by an inexact reciprocal
  // would round otherwise.
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    const double tiny = type == torch::kFloat32 ? 1e-38 : 1e-307;
    torch::manual_seed(11);
    std::vector<torch::Tensor> terms = {(torch::randn({4096}, torch::kFloat64) * tiny).to(type),
                                        (torch::randn({4096}, torch::kFloat64) * tiny).to(type)};
    for (int divisor : {2, 3, 8, 10}) {
      EXPECT_TRUE(torch::equal(Summed(terms, divisor), AddThenDivide(terms, divisor)))
          << c10::toString(type) << ", divisor " << divisor;
    }
  }
}

TEST(SumAndDivideTest, TensorsOfOtherKindsGoThroughAddAndDiv) {
  // A transposed view (not one contiguous piece), half precision, integers.
  std::vector<torch::Tensor> views = Terms(3, torch::kFloat32, {6, 5});
  for (torch::Tensor& t : views) t = t.t();
  EXPECT_TRUE(torch::equal(Summed(views, 3), AddThenDivide(views, 3)));
  // Scaled before the conversion: every value finite in half precision.
  std::vector<torch::Tensor> half = Terms(3, torch::kFloat64, {4, 4});
  for (torch::Tensor& t : half) t = (t / 1e6).to(torch::kFloat16);
  EXPECT_TRUE(torch::equal(Summed(half, 3), AddThenDivide(half, 3)));
  std::vector<torch::Tensor> ints = {torch::arange(6), torch::arange(6) * 2};
  EXPECT_TRUE(torch::equal(Summed(ints, 1), torch::arange(6) * 3));
  // Mixed: one term contiguous, one not, the same values.
  torch::Tensor a = torch::randn({3, 4});
  torch::Tensor b = torch::randn({4, 3}).t();
  EXPECT_TRUE(torch::equal(Summed({a, b}, 2), AddThenDivide({a, b}, 2)));
}

TEST(SumAndDivideTest, WritesTheFirstTermInPlaceAndLeavesTheOthers) {
  torch::Tensor a = torch::full({3}, 1.0);
  torch::Tensor b = torch::full({3}, 2.0);
  torch::Tensor b_before = b.clone();
  void* storage = a.data_ptr();
  std::vector<torch::Tensor*> terms = {&a, &b};
  SumAndDivide(terms, 2);
  EXPECT_EQ(a.data_ptr(), storage);
  EXPECT_TRUE(torch::equal(a, torch::full({3}, 1.5)));
  EXPECT_TRUE(torch::equal(b, b_before));
  SumAndDivide({}, 2);  // nothing to sum
}

// A buffer's fold in LibTorch's own calls: mul_ (unless the decay is 1),
// then add_.
torch::Tensor MulThenAdd(const torch::Tensor& held, const torch::Tensor& update, double decay) {
  torch::Tensor h = held.clone();
  if (decay != 1) h.mul_(decay);
  h.add_(update);
  return h;
}

torch::Tensor Folded(const torch::Tensor& held, const torch::Tensor& update, double decay) {
  torch::Tensor h = held.clone();
  FoldUpdate(h, update, decay);
  return h;
}

TEST(FoldUpdateTest, GivesMulAndAddsValuesBitForBit) {
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    // A decay a float cannot hold exactly, one it can, and none.
    for (double decay : {0.9, 0.1 / 3, 0.5, 1.0}) {
      std::vector<torch::Tensor> t = Terms(2, type, {64, 129});
      EXPECT_TRUE(torch::equal(Folded(t[0], t[1], decay), MulThenAdd(t[0], t[1], decay)))
          << c10::toString(type) << ", decay " << decay;
    }
  }
  // A running count (num_batches_tracked), a 0-dimensional int64.
  torch::Tensor count = torch::tensor(41, torch::kInt64);
  EXPECT_EQ(Folded(count, torch::tensor(1, torch::kInt64), 1).item<int64_t>(), 42);
}

TEST(FoldUpdateTest, TensorsOfOtherKindsGoThroughMulAndAdd) {
  std::vector<torch::Tensor> t = Terms(2, torch::kFloat32, {5, 7});
  torch::Tensor transposed = t[0].t().contiguous().t();  // the same shape, not contiguous
  EXPECT_TRUE(torch::equal(Folded(transposed, t[1], 0.9), MulThenAdd(transposed, t[1], 0.9)));
  std::vector<torch::Tensor> half = Terms(2, torch::kFloat64, {4, 4});
  for (torch::Tensor& h : half) h = (h / 1e3).to(torch::kFloat16);
  EXPECT_TRUE(torch::equal(Folded(half[0], half[1], 0.9), MulThenAdd(half[0], half[1], 0.9)));
  torch::Tensor ints = torch::arange(4, torch::kInt32);
  EXPECT_TRUE(torch::equal(Folded(ints, ints, 1), ints * 2));
}

TEST(FoldUpdateTest, ABoolBufferTakesEachPushsSetsAndClears) {
  torch::Tensor mask = torch::tensor({false, false, true, true});
  // One worker sets element 0 and clears element 2; another sets element 0
  // too and keeps the rest.
  FoldUpdate(mask, torch::tensor({1, 0, -1, 0}, torch::kInt8), 1);
  EXPECT_TRUE(torch::equal(mask, torch::tensor({true, false, false, true})));
  FoldUpdate(mask, torch::tensor({1, 0, 0, 0}, torch::kInt8), 1);
  EXPECT_TRUE(torch::equal(mask, torch::tensor({true, false, false, true})));
  EXPECT_EQ(mask.scalar_type(), torch::kBool);
}

}  // namespace
}  // namespace elasticdl::ps
