// `elasticdl zoo init`: the repository's templates copied, and the
// directories it refuses, with nothing written.
#include "client/zoo_init.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "testing/temp_dir.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Every file under `dir`, relative to it.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    files.insert(entry.path().lexically_relative(dir).string());
  }
  return files;
}

class ZooInitTest : public ::testing::Test {
 protected:
  // The repository's templates (ctest sets ELASTICDL_TEST_SRCDIR).
  static std::string RepositoryTemplates() {
    const char* src = std::getenv("ELASTICDL_TEST_SRCDIR");
    return std::string(src != nullptr ? src : ".") + "/share/zoo_templates";
  }

  ZooInitOptions Options(const std::string& dir, const std::string& name) const {
    ZooInitOptions options;
    options.dir = dir;
    options.template_name = name;
    options.templates_dir = templates_;
    return options;
  }

  void SetUp() override {
    // A template of our own: its text names the zoo.
    templates_ = temp_.File("templates");
    Write(templates_ + "/mnist/README.md", "train --model_zoo={{zoo}} ({{zoo}})\n");
    Write(templates_ + "/mnist/mnist/model.cc", "// a model\n");
  }

  elasticdl::testing::TempDir temp_;
  std::string templates_;
};

TEST_F(ZooInitTest, EveryTemplateOfTheRepositoryIsAModelFileAndAReadme) {
  for (const ZooTemplate& t : ZooTemplates()) {
    SCOPED_TRACE(t.name);
    const std::string dir = temp_.File("zoo_" + std::string(t.name));
    ZooInitOptions options = Options(dir, std::string(t.name));
    options.templates_dir = RepositoryTemplates();
    StatusOr<ZooInitResult> result = InitZoo(options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->dir, dir);
    const std::string model_file(t.model_file);
    EXPECT_THAT(result->files, ::testing::Contains("README.md"));
    EXPECT_THAT(result->files, ::testing::Contains(model_file));
    const bool python = model_file.size() > 3 && model_file.substr(model_file.size() - 3) == ".py";
    EXPECT_THAT(Read(dir + "/" + model_file),
                HasSubstr(python ? "def dataset_fn(" : "ELASTICDL_REGISTER"));
    // The README names the zoo, and starts where `zoo init` says to.
    const std::string readme = Read(dir + "/README.md");
    EXPECT_THAT(readme, AllOf(HasSubstr("--model_zoo=" + dir + " "), Not(HasSubstr("{{zoo}}"))));
    EXPECT_THAT(result->next_command, HasSubstr(dir + "/data"));
    EXPECT_THAT(readme, HasSubstr(result->next_command));
    // What was written is what is there.
    std::set<std::string> written;
    for (const std::string& f : result->files) {
      for (fs::path p = f; !p.empty(); p = p.parent_path()) written.insert(p.string());
    }
    EXPECT_EQ(Tree(dir), written);
  }
}

TEST_F(ZooInitTest, TheTabularTemplateGetsItsDataSet) {
  ZooInitOptions options = Options(temp_.File("tabular"), "tabular");
  options.templates_dir = RepositoryTemplates();
  StatusOr<ZooInitResult> result = InitZoo(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->files, ::testing::IsSupersetOf({"data/train.csv", "data/test.csv"}));
  EXPECT_EQ(Read(result->dir + "/data/train.csv"), SyntheticTabularCsv(600, 1));
  EXPECT_EQ(Read(result->dir + "/data/test.csv"), SyntheticTabularCsv(200, 2));
}

TEST_F(ZooInitTest, TheSyntheticDataSetIsTheSameEveryTimeAndHasThreeClasses) {
  const std::string csv = SyntheticTabularCsv(300, 7);
  EXPECT_EQ(csv, SyntheticTabularCsv(300, 7));
  EXPECT_NE(csv, SyntheticTabularCsv(300, 8));
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "f0,f1,f2,f3,label");
  int rows = 0;
  int per_class[3] = {0, 0, 0};
  while (std::getline(lines, line)) {
    ++rows;
    ASSERT_EQ(std::count(line.begin(), line.end(), ','), 4) << line;
    const int label = std::stoi(line.substr(line.rfind(',') + 1));
    ASSERT_TRUE(label >= 0 && label < 3) << line;
    ++per_class[label];
    // Features with three decimals: inferred as floats, never as integers.
    EXPECT_EQ(line.find('.'), line.find(',') - 4) << line;
  }
  EXPECT_EQ(rows, 300);
  for (int n : per_class) EXPECT_GT(n, 70);
}

TEST_F(ZooInitTest, TheZoosDirectoryIsNamedAsGivenInItsFiles) {
  StatusOr<ZooInitResult> result = InitZoo(Options(temp_.File("a/b/zoo/"), "mnist"));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string dir = temp_.File("a/b/zoo");  // missing parents made; no trailing slash
  EXPECT_EQ(result->dir, dir);
  EXPECT_THAT(result->files, ElementsAre("README.md", "mnist/model.cc"));
  EXPECT_EQ(Read(dir + "/README.md"), "train --model_zoo=" + dir + " (" + dir + ")\n");
  EXPECT_EQ(Read(dir + "/mnist/model.cc"), "// a model\n");

  // A name a shell would split is quoted.
  result = InitZoo(Options(temp_.File("my zoo"), "mnist"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Read(temp_.File("my zoo/README.md")),
              HasSubstr("--model_zoo='" + temp_.File("my zoo") + "' "));
}

TEST_F(ZooInitTest, AnEmptyDirectoryIsFine) {
  const std::string dir = temp_.File("empty");
  fs::create_directories(dir);
  StatusOr<ZooInitResult> result = InitZoo(Options(dir, "mnist"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Tree(dir), (std::set<std::string>{"README.md", "mnist", "mnist/model.cc"}));
}

TEST_F(ZooInitTest, ADirectoryThatIsNotEmptyIsRefusedAndLeftAlone) {
  const std::string dir = temp_.File("zoo");
  Write(dir + "/notes.txt", "mine\n");
  StatusOr<ZooInitResult> result = InitZoo(Options(dir, "mnist"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(result.status().message(), HasSubstr(dir + ": exists and is not empty"));
  EXPECT_EQ(Tree(dir), std::set<std::string>{"notes.txt"});

  // A file where the directory would be.
  result = InitZoo(Options(dir + "/notes.txt", "mnist"));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("notes.txt: exists and is not a directory"));
  EXPECT_EQ(Read(dir + "/notes.txt"), "mine\n");
}

TEST_F(ZooInitTest, AnUnknownTemplateIsRefusedNamingTheKnownOnes) {
  const std::string dir = temp_.File("zoo");
  StatusOr<ZooInitResult> result = InitZoo(Options(dir, "resnet"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      result.status().message(),
      "--template=resnet: no such template (the templates are mnist, pytorch, tabular, trial)");
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(ZooInitTest, ADirectoryThatCannotBeCreatedIsRefusedWithNothingWritten) {
  Write(temp_.File("file"), "x\n");
  const std::string dir = temp_.File("file/a/zoo");  // under a regular file
  StatusOr<ZooInitResult> result = InitZoo(Options(dir, "mnist"));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr(dir + ": cannot create directory " + temp_.File("file/a")));
  EXPECT_EQ(
      Tree(temp_.path()),
      (std::set<std::string>{"templates", "templates/mnist", "templates/mnist/README.md",
                             "templates/mnist/mnist", "templates/mnist/mnist/model.cc", "file"}));
}

TEST_F(ZooInitTest, MissingTemplateFilesAreNotFound) {
  ZooInitOptions options = Options(temp_.File("zoo"), "tabular");  // not in our templates
  StatusOr<ZooInitResult> result = InitZoo(options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr(templates_ + "/tabular"));
  EXPECT_FALSE(fs::exists(temp_.File("zoo")));
}

}  // namespace
}  // namespace elasticdl::client
