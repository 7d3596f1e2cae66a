// Compiled with ELASTICDL_ZOO_MODULE="testzoo.library": its registrations go
// to the test binary's own registry, as a zoo file's go to its library's.
#include "zoo/zoo_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "zoo/zoo_builder.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<Model> tiny_model() {
  return Functional(Input("x", {2}), torch::nn::Sequential(torch::nn::Linear(2, 1)));
}
ELASTICDL_REGISTER(tiny_model);

torch::Tensor loss(const torch::Tensor& labels, const torch::Tensor& predictions) {
  return torch::mse_loss(predictions, labels);
}
ELASTICDL_REGISTER(loss);

OptimizerSpec optimizer() { return torch::optim::AdamOptions(0.01); }
ELASTICDL_REGISTER(optimizer);

std::shared_ptr<ZooLibrary> TestZoo() {
  int abi = 0;
  const ZooRegistry* registry = elasticdl_zoo_registry_v1(&abi);
  EXPECT_EQ(abi, kZooAbiVersion);
  auto library = ZooLibrary::FromRegistry(registry, "zoo_test");
  EXPECT_TRUE(library.ok()) << library.status();
  return *library;
}

TEST(ZooLibraryTest, RegistrationsCarryModuleNameAndKind) {
  auto zoo = TestZoo();
  auto entry = zoo->Find("testzoo.library", "tiny_model", EntryKind::kModel);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ((*entry)->module, "testzoo.library");
  EXPECT_EQ((*entry)->name, "tiny_model");
  auto model = (*entry)->model(Params());
  EXPECT_EQ(model->forward({{"x", torch::ones({3, 2})}}, false).sizes(),
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ((*zoo->Find("testzoo.library", "optimizer", EntryKind::kOptimizer))
                ->optimizer(Params())
                .index(),
            1u);  // Adam
  EXPECT_EQ(zoo->Files(), std::vector<std::string>{"testzoo/library.cc"});
}

TEST(ZooLibraryTest, FindExplainsWhatIsMissing) {
  auto zoo = TestZoo();
  auto no_file = zoo->Find("mnist.foo", "custom_model", EntryKind::kModel);
  EXPECT_EQ(no_file.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(no_file.status().message(),
            "model zoo has no file mnist/foo.cc (module mnist.foo); files: testzoo/library.cc");

  auto no_entry = zoo->Find("testzoo.library", "bar", EntryKind::kModel);
  EXPECT_EQ(no_entry.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(no_entry.status().message(),
            "testzoo/library.cc has no entry 'bar'; entries: loss (loss), optimizer (optimizer), "
            "tiny_model (model)");

  auto wrong_kind = zoo->Find("testzoo.library", "loss", EntryKind::kModel);
  EXPECT_EQ(wrong_kind.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong_kind.status().message(), "testzoo/library.cc: 'loss' is a loss, not a model");
  EXPECT_EQ(zoo->Find("testzoo.library", "optimizer", EntryKind::kEvalMetricsFn).status().message(),
            "testzoo/library.cc: 'optimizer' is an optimizer, not an eval_metrics_fn");
}

TEST(ZooLibraryTest, DuplicateNamesInAFileAreRefused) {
  ZooRegistry registry;
  for (int i = 0; i < 2; ++i) {
    ZooEntry e = zoo_internal::MakeEntry(loss);
    e.module = "a.b";
    e.name = "loss";
    registry.Add(std::move(e));
  }
  auto zoo = ZooLibrary::FromRegistry(&registry, "dup");
  EXPECT_THAT(std::string(zoo.status().message()),
              HasSubstr("a/b.cc registers 'loss' more than once"));
}

TEST(ZooLibraryTest, ParseModelDef) {
  auto ref = ParseModelDef("mnist.mnist_functional_api.custom_model");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->module, "mnist.mnist_functional_api");
  EXPECT_EQ(ref->name, "custom_model");
  EXPECT_EQ(ref->file, "mnist/mnist_functional_api.cc");
  EXPECT_EQ(ParseModelDef("m.f")->file, "m.cc");
  for (const char* bad : {"custom_model", "", ".x", "a.", "a..b", "a.b."}) {
    auto r = ParseModelDef(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("expected module.entry")) << bad;
  }
}

TEST(ZooLibraryTest, ResolveEntry) {
  auto local = ResolveEntry("loss", "mnist.mnist_subclass");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->module, "mnist.mnist_subclass");
  EXPECT_EQ(local->name, "loss");
  EXPECT_EQ(local->file, "mnist/mnist_subclass.cc");
  auto other = ResolveEntry("common.losses.focal", "mnist.mnist_subclass");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->module, "common.losses");
  EXPECT_EQ(other->name, "focal");
  EXPECT_FALSE(ResolveEntry("", "m").ok());
}

TEST(ZooLibraryTest, LoadExplainsFailures) {
  auto missing = ZooLibrary::Load("/nonexistent/libzoo.so");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("cannot load model zoo library /nonexistent/libzoo.so: "));
  // A shared library that is not a zoo.
  std::string common = DefaultPackageDir() + "/../../libedl_common.so";
  auto not_zoo = ZooLibrary::Load(common);
  EXPECT_THAT(std::string(not_zoo.status().message()),
              HasSubstr("is not a model zoo library: it lacks elasticdl_zoo_registry_v1"));
}

}  // namespace
}  // namespace elasticdl
