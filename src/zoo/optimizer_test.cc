#include "elasticdl/zoo/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace elasticdl {
namespace {

using ::testing::HasSubstr;
namespace optim = torch::optim;

std::vector<OptimizerSpec> AllKinds() {
  return {
      optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4),
      optim::AdamOptions(0.01).betas({0.8, 0.99}).eps(1e-7).amsgrad(true),
      optim::AdamWOptions(0.01).betas({0.8, 0.99}).eps(1e-7).weight_decay(0.1).amsgrad(true),
      optim::AdagradOptions(0.05).lr_decay(0.01).initial_accumulator_value(0.1),
      optim::RMSpropOptions(0.02).alpha(0.9).momentum(0.5).centered(true),
  };
}

TEST(OptimizerTest, SerializeParseRoundTrips) {
  for (const OptimizerSpec& spec : AllKinds()) {
    auto parsed = ParseOptimizer(SerializeOptimizer(spec));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->index(), spec.index());
    EXPECT_EQ(DescribeOptimizer(*parsed), DescribeOptimizer(spec));
    EXPECT_EQ(SerializeOptimizer(*parsed), SerializeOptimizer(spec));
  }
}

TEST(OptimizerTest, Describe) {
  EXPECT_EQ(DescribeOptimizer(optim::SGDOptions(0.1)), "SGD(lr=0.1)");
  EXPECT_EQ(DescribeOptimizer(optim::SGDOptions(0.1).momentum(0.9)), "SGD(lr=0.1, momentum=0.9)");
  EXPECT_EQ(DescribeOptimizer(optim::AdamOptions(0.001).amsgrad(true)),
            "Adam(lr=0.001, amsgrad=true)");
  EXPECT_EQ(DescribeOptimizer(optim::AdamWOptions(0.001)), "AdamW(lr=0.001)");
  EXPECT_EQ(DescribeOptimizer(optim::AdamWOptions(0.001).weight_decay(0)),
            "AdamW(lr=0.001, weight_decay=0)");
}

// AdamW's decay is decoupled from the gradient: with none, a step scales the
// parameter by 1 - lr * weight_decay (2 -> 1.98), where Adam's L2 term, a
// gradient of its own, moves it by about lr (2 -> 1.9).
TEST(OptimizerTest, AdamWDecaysTheParameterItself) {
  auto step_from_2 = [](const OptimizerSpec& spec) {
    torch::Tensor w = torch::full({2}, 2.0, torch::requires_grad());
    auto optimizer = MakeOptimizer(spec, {w});
    EXPECT_TRUE(optimizer.ok()) << optimizer.status();
    w.mutable_grad() = torch::zeros({2});
    (*optimizer)->step();
    return w.detach();
  };
  const torch::Tensor adamw = step_from_2(optim::AdamWOptions(0.1).weight_decay(0.1));
  EXPECT_TRUE(torch::allclose(adamw, torch::full({2}, 1.98), 1e-6, 0)) << adamw;
  const torch::Tensor adam = step_from_2(optim::AdamOptions(0.1).weight_decay(0.1));
  EXPECT_TRUE(torch::allclose(adam, torch::full({2}, 1.9), 1e-6, 0)) << adam;
}

TEST(OptimizerTest, ParseRejectsGarbageAndEmptyConfig) {
  EXPECT_THAT(std::string(ParseOptimizer("\xff\xff\xff").status().message()),
              HasSubstr("not an OptimizerConfig"));
  EXPECT_THAT(std::string(ParseOptimizer("").status().message()), HasSubstr("names no optimizer"));
}

TEST(OptimizerTest, EveryKindStepsAgainstTheGradient) {
  for (const OptimizerSpec& spec : AllKinds()) {
    torch::Tensor w = torch::ones({3}, torch::requires_grad());
    auto optimizer = MakeOptimizer(spec, {w});
    ASSERT_TRUE(optimizer.ok()) << optimizer.status();
    (*optimizer)->zero_grad();
    w.square().sum().backward();  // gradient 2w > 0
    (*optimizer)->step();
    EXPECT_TRUE(torch::all(w < 1).item<bool>()) << DescribeOptimizer(spec) << ": " << w;
  }
}

TEST(OptimizerTest, InvalidHyperparametersAreInvalidArgument) {
  struct Case {
    OptimizerSpec spec;
    const char* message;
  } cases[] = {
      {optim::SGDOptions(-1), "optimizer SGD: lr=-1 must be >= 0"},
      {optim::SGDOptions(0.1).nesterov(true), "nesterov needs momentum > 0 and dampening = 0"},
      {optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true), "nesterov"},
      {optim::SGDOptions(std::nan("")), "lr=nan must be >= 0"},
      {optim::AdamOptions(0.1).betas({1.0, 0.9}), "optimizer Adam: beta1=1 must be in [0, 1)"},
      {optim::AdamWOptions(0.1).weight_decay(-0.01),
       "optimizer AdamW: weight_decay=-0.01 must be >= 0"},
      {optim::AdagradOptions(0.1).lr_decay(-0.5), "optimizer Adagrad: lr_decay=-0.5"},
      {optim::RMSpropOptions(0.1).alpha(-1), "optimizer RMSprop: alpha=-1"},
  };
  for (const Case& c : cases) {
    torch::Tensor w = torch::ones({1}, torch::requires_grad());
    auto optimizer = MakeOptimizer(c.spec, {w});
    ASSERT_FALSE(optimizer.ok()) << c.message;
    EXPECT_EQ(optimizer.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(optimizer.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace elasticdl
