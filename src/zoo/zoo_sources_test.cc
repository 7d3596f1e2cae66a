#include "zoo/zoo_sources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void Write(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << contents;
}

TEST(ZooSourcesTest, ListsSourcesAndHashesThem) {
  testing::TempDir a, b;
  for (const testing::TempDir* dir : {&a, &b}) {
    Write(dir->File("mnist/model.cc"), "model");
    Write(dir->File("mnist/util.h"), "util");
    Write(dir->File("top.cc"), "top");
    Write(dir->File("README.md"), "ignored");
    Write(dir->File(".git/x.cc"), "ignored");
  }
  auto sa = ScanZooSources(a.path());
  ASSERT_TRUE(sa.ok()) << sa.status();
  EXPECT_EQ(sa->files, (std::vector<std::string>{"mnist/model.cc", "mnist/util.h", "top.cc"}));
  EXPECT_EQ(sa->CompiledFiles(), (std::vector<std::string>{"mnist/model.cc", "top.cc"}));
  EXPECT_THAT(sa->identity, StartsWith("sha256:"));
  EXPECT_EQ(sa->identity.size(), 7u + 64u);
  // Where the zoo lies does not matter; what it holds does.
  EXPECT_EQ(ScanZooSources(b.path() + "/")->identity, sa->identity);
  Write(b.File("mnist/util.h"), "util2");
  EXPECT_NE(ScanZooSources(b.path())->identity, sa->identity);
  Write(a.File("README.md"), "changed");
  EXPECT_EQ(ScanZooSources(a.path())->identity, sa->identity);
}

TEST(ZooSourcesTest, SourceModule) {
  EXPECT_EQ(SourceModule("mnist/mnist_functional_api.cc"), "mnist.mnist_functional_api");
  EXPECT_EQ(SourceModule("top.cc"), "top");
}

TEST(ZooSourcesTest, RejectsWhatCannotBeAZoo) {
  testing::TempDir dir;
  EXPECT_THAT(std::string(ScanZooSources(dir.File("nope")).status().message()),
              HasSubstr("nope is not a directory"));
  Write(dir.File("only.h"), "");
  EXPECT_THAT(std::string(ScanZooSources(dir.path()).status().message()),
              HasSubstr("has no model files (.cc or .py)"));
  Write(dir.File("my-models/a.cc"), "");
  EXPECT_THAT(std::string(ScanZooSources(dir.path()).status().message()),
              HasSubstr("model zoo file my-models/a.cc cannot be named by a module path"));
  std::filesystem::remove_all(dir.File("my-models"));
  Write(dir.File("2fast.py"), "");
  EXPECT_THAT(std::string(ScanZooSources(dir.path()).status().message()),
              HasSubstr("model zoo file 2fast.py cannot be named by a module path: its "
                        "directories and name (without .py) must be identifiers"));
  std::filesystem::remove(dir.File("2fast.py"));
  Write(dir.File("mnist/model.cc"), "");
  Write(dir.File("mnist/model.py"), "");
  EXPECT_THAT(std::string(ScanZooSources(dir.path()).status().message()),
              HasSubstr("model zoo files mnist/model.cc and mnist/model.py define the same "
                        "module mnist.model: a module is one file"));
}

TEST(ZooSourcesTest, PythonFilesAreSourcesWithAnIdentityOfTheirOwn) {
  testing::TempDir dir;
  Write(dir.File("mnist/model.py"), "import torch");
  auto python_only = ScanZooSources(dir.path());
  ASSERT_TRUE(python_only.ok()) << python_only.status();
  EXPECT_EQ(python_only->PythonFiles(), std::vector<std::string>{"mnist/model.py"});
  EXPECT_TRUE(python_only->CompiledFiles().empty());
  EXPECT_TRUE(python_only->compiled_identity.empty());
  EXPECT_THAT(python_only->python_identity, StartsWith("sha256:"));

  Write(dir.File("cc/model.cc"), "int x;");
  auto mixed = ScanZooSources(dir.path());
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->files, (std::vector<std::string>{"cc/model.cc", "mnist/model.py"}));
  // The zoo's identity covers both; each half's, only its own files.
  EXPECT_NE(mixed->identity, python_only->identity);
  EXPECT_EQ(mixed->python_identity, python_only->python_identity);
  const std::string compiled = mixed->compiled_identity;
  Write(dir.File("mnist/model.py"), "import torch  # changed");
  auto changed = ScanZooSources(dir.path());
  EXPECT_EQ(changed->compiled_identity, compiled);
  EXPECT_NE(changed->python_identity, mixed->python_identity);
}

TEST(ZooSourcesTest, ALinkIsNamedByItsOwnPathWhereverItPoints) {
  testing::TempDir root;
  Write(root.File("zoo/mnist/model.cc"), "model");
  Write(root.File("other/evil.h"), "evil");
  Write(root.File("other/deep/er/helper.py"), "x = 1");
  std::filesystem::create_symlink(root.File("other/evil.h"), root.File("zoo/mnist/evil.h"));
  std::filesystem::create_symlink("../../other/deep/er/helper.py",
                                  root.File("zoo/mnist/helper.py"));
  // Links to nothing are no files; links that loop are skipped unless their
  // names are those of model files.
  std::filesystem::create_symlink(root.File("nothing.h"), root.File("zoo/dangling.h"));
  std::filesystem::create_symlink("loop2", root.File("zoo/loop1"));
  std::filesystem::create_symlink("loop1", root.File("zoo/loop2"));
  auto sources = ScanZooSources(root.File("zoo"));
  ASSERT_TRUE(sources.ok()) << sources.status();
  EXPECT_EQ(sources->files,
            (std::vector<std::string>{"mnist/evil.h", "mnist/helper.py", "mnist/model.cc"}));
  EXPECT_EQ(sources->digests.at("mnist/evil.h"), Sha256().Update("evil").HexDigest());

  std::filesystem::create_symlink("loop.h", root.File("zoo/mnist/loop.h"));
  auto looped = ScanZooSources(root.File("zoo"));
  EXPECT_EQ(looped.status().code(), StatusCode::kInvalidArgument) << looped.status();
  EXPECT_THAT(std::string(looped.status().message()),
              HasSubstr("model zoo file " + root.File("zoo/mnist/loop.h") + " cannot be read"));
}

TEST(ZooSourcesTest, Sha256KnownAnswer) {
  EXPECT_EQ(Sha256().Update("abc").HexDigest(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace elasticdl
