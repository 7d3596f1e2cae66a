#include "zoo/zoo_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/file.h"
#include "testing/examples.h"
#include "testing/temp_dir.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Trains one step of `model_def` of the loaded zoo on four MNIST records and
// evaluates it.
void RunMnist(const std::shared_ptr<ZooLibrary>& zoo, const std::string& model_def) {
  SCOPED_TRACE(model_def);
  ZooProgramNames names;
  names.model_def = model_def;
  auto program = ZooProgram::Resolve(zoo, names, "");
  ASSERT_TRUE(program.ok()) << program.status();

  std::vector<Record> records;
  for (int label : {3, 1, 4, 1}) {
    records.emplace_back();
    records.back().data = testing::MnistExample(label, 100);
  }
  auto dataset = program->MakeDataset(Dataset<Record>::FromVector(records), Mode::TRAINING);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto batch = dataset->batch(4).Next();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
  const Example& example = **batch;
  EXPECT_EQ(example.features.at("image").sizes(), (std::vector<int64_t>{4, 28, 28}));

  auto model = program->MakeModel();
  ASSERT_TRUE(model.ok()) << model.status();
  auto spec = program->Optimizer();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(DescribeOptimizer(*spec), "SGD(lr=0.1)");
  auto optimizer = MakeOptimizer(*spec, (*model)->parameters());
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();

  auto outputs = program->Forward(**model, example.features, /*training=*/true);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(outputs->sizes(), (std::vector<int64_t>{4, 10}));
  auto loss = program->Loss(example.labels, *outputs);
  ASSERT_TRUE(loss.ok()) << loss.status();
  (*optimizer)->zero_grad();
  loss->backward();
  (*optimizer)->step();

  auto metrics = program->MakeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  outputs = program->Forward(**model, example.features, /*training=*/false);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_TRUE(program->UpdateMetrics(*metrics, example.labels, *outputs).ok());
  EXPECT_EQ(metrics->at("accuracy")->state().values[1], 4);

  auto predict = program->MakeDataset(Dataset<Record>::FromVector(records), Mode::PREDICTION);
  ASSERT_TRUE(predict.ok());
  auto first = predict->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_FALSE((*first)->labels.defined());
}

// The one slow test: a cold build of model_zoo's MNIST models (seed 001's),
// copied alone into a zoo of their own.
TEST(ZooBuilderTest, BuildsCachesAndLoadsTheMnistZoo) {
  testing::TempDir zoo_dir, cache;
  std::filesystem::create_directory(zoo_dir.path() + "/mnist");
  for (const char* file : {"mnist_functional_api.cc", "mnist_subclass.cc"}) {
    std::filesystem::copy(std::string(ELASTICDL_SOURCE_DIR) + "/model_zoo/mnist/" + file,
                          zoo_dir.path() + "/mnist/" + file);
  }
  ZooBuildOptions options;
  options.zoo_dir = zoo_dir.path();
  options.cache_dir = cache.path();

  // Two concurrent builders: one compiles, the other waits and reuses it.
  auto start = std::chrono::steady_clock::now();
  auto other = std::async(std::launch::async, [&] { return BuildZoo(options); });
  StatusOr<BuiltZoo> built = BuildZoo(options);
  StatusOr<BuiltZoo> built_too = other.get();
  std::cout << "cold build of the mnist zoo: " << SecondsSince(start) << " s\n";
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(built_too.ok()) << built_too.status();
  EXPECT_EQ(built->library_path, built_too->library_path);
  EXPECT_NE(built->cached, built_too->cached);
  EXPECT_EQ(built->sources,
            (std::vector<std::string>{"mnist/mnist_functional_api.cc", "mnist/mnist_subclass.cc"}));
  EXPECT_THAT(built->identity, StartsWith("sha256:"));
  EXPECT_THAT(built->library_path, StartsWith(cache.path() + "/zoo/"));

  start = std::chrono::steady_clock::now();
  auto again = BuildZoo(options);
  const double cached_seconds = SecondsSince(start);
  std::cout << "cached build of the mnist zoo: " << cached_seconds << " s\n";
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->library_path, built->library_path);
  EXPECT_LT(cached_seconds, 2.0);

  // The build tree's package precompiled LibTorch's headers for zoos, and
  // the compiler took them (GCC says -Winvalid-pch's "not used because ..."
  // where not; clang refuses the unit).
  StatusOr<std::string> log = ReadFileToString(
      std::filesystem::path(built->library_path).parent_path().string() + "/build.log");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, Not(HasSubstr("not used because")));
  StatusOr<std::string> config = ReadFileToString(DefaultPackageDir() + "/ElasticDLConfig.cmake");
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string key = "set(_elasticdl_pch_file \"";
  const size_t at = config->find(key);
  ASSERT_NE(at, std::string::npos) << *config;
  const std::string precompiled =
      config->substr(at + key.size(), config->find('"', at + key.size()) - at - key.size());
  EXPECT_TRUE(std::filesystem::exists(precompiled)) << precompiled;
  const std::string header = std::filesystem::path(precompiled).replace_extension().string();
  EXPECT_THAT(*log, HasSubstr("LibTorch's precompiled header: " + header));

  auto zoo = ZooLibrary::Load(built->library_path);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  EXPECT_EQ((*zoo)->Files(), built->sources);
  RunMnist(*zoo, "mnist.mnist_functional_api.custom_model");
  RunMnist(*zoo, "mnist.mnist_subclass.CustomModel");
}

TEST(ZooBuilderTest, CompileErrorsNameFileAndLine) {
  testing::TempDir zoo, cache;
  std::filesystem::create_directories(zoo.File("bad"));
  std::ofstream(zoo.File("bad/broken.cc")) << "int f() {\n  return undeclared_thing;\n}\n";
  ZooBuildOptions options;
  options.zoo_dir = zoo.path();
  options.cache_dir = cache.path();
  options.jobs = 1;  // the zoo's file first: fails before compiling zoo_registry.cc
  auto built = BuildZoo(options);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), StatusCode::kInvalidArgument);
  const std::string message(built.status().message());
  EXPECT_THAT(message, StartsWith("model zoo " + zoo.path() + " failed to compile:\n"));
  EXPECT_THAT(message, HasSubstr("bad/broken.cc:2:"));
  EXPECT_THAT(message, HasSubstr("error"));
  EXPECT_THAT(message, HasSubstr("undeclared_thing"));
  EXPECT_THAT(message, HasSubstr("(full log: " + cache.path() + "/zoo/"));
}

TEST(ZooBuilderTest, MissingPackageIsFailedPrecondition) {
  testing::TempDir zoo, cache;
  std::ofstream(zoo.File("a.cc")) << "";
  ZooBuildOptions options;
  options.zoo_dir = zoo.path();
  options.cache_dir = cache.path();
  options.package_dir = cache.path();
  auto built = BuildZoo(options);
  EXPECT_EQ(built.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("no ElasticDL CMake package at"));
}

// Two small files, "a/one.cc" and "a/two.cc", in a zoo of their own. The
// tests share a cache (the registry's object is compiled once); their files
// differ by a comment naming the test. They build against a copy of the
// package without its precompiled <torch/torch.h>, which these files do not
// include: with it, every unit spends 3 s (clang) to 9 s (GCC) on what the
// header instantiates, however small.
class ObjectCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = new testing::TempDir();
    package_ = cache_->path() + "/package/lib/cmake/ElasticDL";
    std::filesystem::create_directories(package_);
    const std::string real = DefaultPackageDir();
    StatusOr<std::string> config = ReadFileToString(real + "/ElasticDLConfig.cmake");
    ASSERT_TRUE(config.ok()) << config.status();
    const std::string pch = "set(ELASTICDL_PRECOMPILED_HEADER \"";
    const size_t at = config->find(pch);
    ASSERT_NE(at, std::string::npos);
    config->erase(at + pch.size(), config->find('"', at + pch.size()) - at - pch.size());
    std::ofstream(package_ + "/ElasticDLConfig.cmake") << *config;
    std::filesystem::copy_file(real + "/ElasticDLCompiler.cmake",
                               package_ + "/ElasticDLCompiler.cmake");
    // The package's files, relative to its prefix: absolute here.
    StatusOr<std::string> files = ReadFileToString(real + "/ElasticDLFiles.txt");
    ASSERT_TRUE(files.ok()) << files.status();
    std::istringstream lines(*files);
    std::ofstream out(package_ + "/ElasticDLFiles.txt");
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] != '/') line = real + "/../../../" + line;
      out << line << "\n";
    }
  }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
  }
  void SetUp() override {
    std::filesystem::create_directories(zoo_.File("a"));
    Write("a/one.cc", "int One() { return 1; }\n");
    Write("a/two.cc", "int Two() { return 2; }\n");
    options_.zoo_dir = zoo_.path();
    options_.cache_dir = cache_->path();
    options_.package_dir = package_;
  }
  void Write(const std::string& file, const std::string& text) {
    std::ofstream(zoo_.File(file))
        << "// " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n"
        << text;
  }
  BuiltZoo Build(std::vector<std::string> modules = {}) {
    ZooBuildOptions options = options_;
    options.modules = std::move(modules);
    StatusOr<BuiltZoo> built = BuildZoo(options);
    EXPECT_TRUE(built.ok()) << built.status();
    return built.ok() ? *built : BuiltZoo();
  }

  static testing::TempDir* cache_;
  static std::string package_;
  testing::TempDir zoo_;
  ZooBuildOptions options_;
};

testing::TempDir* ObjectCacheTest::cache_ = nullptr;
std::string ObjectCacheTest::package_;

// A cache another user could write into is refused before anything found in
// it is loaded or linked: the cache itself, zoo/ and each library's own
// directory.
TEST_F(ObjectCacheTest, ACacheOthersCanWriteIntoIsRefused) {
  const BuiltZoo first = Build();
  ASSERT_FALSE(first.library_path.empty());
  const std::string entry = std::filesystem::path(first.library_path).parent_path().string();
  for (const std::string& dir : {cache_->path(), cache_->path() + "/zoo", entry}) {
    SCOPED_TRACE(dir);
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
    StatusOr<BuiltZoo> built = BuildZoo(options_);
    ASSERT_EQ(::chmod(dir.c_str(), st.st_mode & 07777), 0);
    EXPECT_EQ(built.status().code(), StatusCode::kPermissionDenied) << built.status();
    EXPECT_THAT(std::string(built.status().message()),
                HasSubstr(dir + ": owned by uid " + std::to_string(::getuid())));
    EXPECT_THAT(std::string(built.status().message()), HasSubstr("mode 0777"));
  }
  if (::getuid() == 0) {
    ASSERT_EQ(::chown(entry.c_str(), 12345, 12345), 0);
    StatusOr<BuiltZoo> built = BuildZoo(options_);
    ASSERT_EQ(::chown(entry.c_str(), 0, 0), 0);
    EXPECT_EQ(built.status().code(), StatusCode::kPermissionDenied) << built.status();
    EXPECT_THAT(std::string(built.status().message()), HasSubstr("not by this user"));
  }
  EXPECT_TRUE(Build().cached);
}

// The directories the cache makes are this user's alone.
TEST(ZooBuilderTest, TheCacheMakesItsDirectoriesForThisUserAlone) {
  testing::TempDir zoo, root;
  std::ofstream(zoo.File("a.py")) << "x = 1\n";
  ZooBuildOptions options;
  options.zoo_dir = zoo.path();
  options.cache_dir = root.File("cache");
  const mode_t old_mask = ::umask(0);
  auto built = BuildZoo(options);
  ::umask(old_mask);
  ASSERT_TRUE(built.ok()) << built.status();
  for (std::filesystem::path dir = built->python_dir; dir != root.path(); dir = dir.parent_path()) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
}

TEST_F(ObjectCacheTest, AnEditedFileIsTheOnlyOneCompiledAgain) {
  const BuiltZoo first = Build();
  EXPECT_EQ(first.compiled, (std::vector<std::string>{"a/one.cc", "a/two.cc"}));
  EXPECT_EQ(first.objects_compiled, 2);
  EXPECT_FALSE(first.cached);

  Write("a/two.cc", "int Two() { return 22; }\n");
  const BuiltZoo edited = Build();
  EXPECT_EQ(edited.objects_compiled, 1);
  EXPECT_FALSE(edited.cached);
  EXPECT_NE(edited.library_path, first.library_path);
  EXPECT_TRUE(std::filesystem::exists(edited.library_path));
  auto log = ReadFileToString(std::filesystem::path(edited.library_path).parent_path().string() +
                              "/build.log");
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("a/two.cc"));
  EXPECT_THAT(*log, Not(HasSubstr("a/one.cc")));

  Write("a/two.cc", "int Two() { return 2; }\n");  // back: the first library
  const BuiltZoo reverted = Build();
  EXPECT_TRUE(reverted.cached);
  EXPECT_EQ(reverted.objects_compiled, 0);
  EXPECT_EQ(reverted.library_path, first.library_path);

  // Any file may include a header: one.cc's cached object is not taken.
  Write("a/shared.h", "#pragma once\n");
  EXPECT_EQ(Build({"a.one"}).objects_compiled, 1);
}

TEST_F(ObjectCacheTest, ALibraryForModulesHoldsTheirFilesOrEveryFile) {
  Write("a/three.py", "def f():\n    pass\n");
  const BuiltZoo one = Build({"a.one"});
  EXPECT_EQ(one.compiled, (std::vector<std::string>{"a/one.cc"}));
  EXPECT_EQ(one.objects_compiled, 1);
  EXPECT_FALSE(one.python_dir.empty());

  // Then the other file: the first object is the cache's.
  const BuiltZoo both = Build({"a.one", "a.two"});
  EXPECT_EQ(both.compiled, (std::vector<std::string>{"a/one.cc", "a/two.cc"}));
  EXPECT_EQ(both.objects_compiled, 1);
  EXPECT_NE(both.library_path, one.library_path);
  EXPECT_EQ(Build().library_path, both.library_path);  // every file: the same library

  // A module that is no file adds none; looking it up names every file.
  const BuiltZoo nothing = Build({"a.one", "a.nothing"});
  EXPECT_EQ(nothing.library_path, one.library_path);
  EXPECT_EQ(nothing.left_out, (std::vector<std::string>{"a/two.cc"}));
  auto partial = ZooLibrary::Load(nothing.library_path, nullptr, nothing.left_out);
  ASSERT_TRUE(partial.ok()) << partial.status();
  auto missing = (*partial)->Find("a.nothing", "model", EntryKind::kModel);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("files: a/two.cc"));
  // Python modules only: no library.
  const BuiltZoo python = Build({"a.three"});
  EXPECT_TRUE(python.library_path.empty());
  EXPECT_TRUE(python.compiled.empty());

  // A file that calls another's code does not link alone: every file.
  Write("a/one.cc", "int Two();\nint One() { return Two() - 1; }\n");
  const BuiltZoo calling = Build({"a.one"});
  EXPECT_EQ(calling.compiled, (std::vector<std::string>{"a/one.cc", "a/two.cc"}));
  EXPECT_EQ(calling.objects_compiled, 1);  // one.cc, once: its object was kept
  auto library = ZooLibrary::Load(calling.library_path);
  EXPECT_TRUE(library.ok()) << library.status();
  // The cache remembers: the next build links every file at once.
  const BuiltZoo again = Build({"a.one"});
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.library_path, calling.library_path);
}

TEST_F(ObjectCacheTest, BuildsAtOnceCompileASharedFileOnce) {
  // Two jobs at once, naming different entries of one file: one of them
  // compiles it, the other links its object.
  BuiltZoo one, both;
  std::thread first([&] { one = Build({"a.one"}); });
  std::thread second([&] { both = Build({"a.one", "a.two"}); });
  first.join();
  second.join();
  EXPECT_EQ(one.compiled, (std::vector<std::string>{"a/one.cc"}));
  EXPECT_EQ(both.compiled, (std::vector<std::string>{"a/one.cc", "a/two.cc"}));
  EXPECT_EQ(one.objects_compiled + both.objects_compiled, 2);
  EXPECT_TRUE(ZooLibrary::Load(one.library_path).ok());
  EXPECT_TRUE(ZooLibrary::Load(both.library_path).ok());
}

TEST(ZooBuilderTest, DefaultPackageDirIsBesideTheBinary) {
  EXPECT_THAT(DefaultPackageDir(), ::testing::EndsWith("/lib/cmake/ElasticDL"));
  EXPECT_TRUE(std::filesystem::exists(DefaultPackageDir() + "/ElasticDLConfig.cmake"));
}

}  // namespace
}  // namespace elasticdl
