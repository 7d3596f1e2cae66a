#include "client/zoo_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/file.h"
#include "zoo/zoo_sources.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A file:// repository with one commit, a copy of its sources (what a
// trained model keeps) and a cache directory (ELASTICDL_CACHE_DIR).
class ZooSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "zoo_source_test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
    work_ = root_ + "/work";
    copy_ = root_ + "/copy";
    ASSERT_EQ(::setenv("ELASTICDL_CACHE_DIR", (root_ + "/cache").c_str(), 1), 0);
    Write(work_ + "/mnist/model.cc", "// the model\n");
    Write(copy_ + "/mnist/model.cc", "// the model\n");
    Run("git -c init.defaultBranch=main init -q " + work_);
    Run("git -C " + work_ + " add -A");
    Run("git -C " + work_ + " -c user.name=t -c user.email=t@example.com commit -q -m zoo");
    commit_ = Output("git -C " + work_ + " rev-parse HEAD");
    url_ = "file://" + work_;
    StatusOr<ZooSources> sources = ScanZooSources(copy_);
    ASSERT_TRUE(sources.ok()) << sources.status();
    record_.set_model_zoo(url_ + "#main");
    record_.set_zoo_commit(commit_);
    record_.set_zoo_identity(sources->identity);
  }
  void TearDown() override {
    ::unsetenv("ELASTICDL_CACHE_DIR");
    fs::remove_all(root_);
  }

  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  static void Run(const std::string& command) {
    ASSERT_EQ(std::system((command + " > /dev/null 2>&1").c_str()), 0) << command;
  }
  static std::string Output(const std::string& command) {
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    char buffer[128];
    while (pipe != nullptr && std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
    if (pipe != nullptr) ::pclose(pipe);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string root_, work_, copy_, url_, commit_;
  proto::TrainedModel record_;
};

TEST_F(ZooSourceTest, DirectoryIsUsedAsItIs) {
  StatusOr<ZooSource> source = ResolveZooSource(copy_);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->dir, copy_);
  EXPECT_EQ(source->model_zoo, copy_);
  EXPECT_EQ(source->commit, "");
}

TEST_F(ZooSourceTest, GitUrlIsFetchedAndRecorded) {
  StatusOr<ZooSource> source = ResolveZooSource(url_ + "#main");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->dir, root_ + "/cache/git/" + commit_);
  EXPECT_EQ(source->commit, commit_);
  proto::ModelSpec model;
  RecordZooSource(*source, &model);
  EXPECT_EQ(model.model_zoo(), url_ + "#main");
  EXPECT_EQ(model.zoo_commit(), commit_);
}

TEST_F(ZooSourceTest, ErrorsNameTheFlag) {
  StatusOr<ZooSource> source = ResolveZooSource("ftp://host/models.git");
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr("--model_zoo=ftp://host/models.git: "));
  source = ResolveZooSource(url_ + "#nope");
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr("--model_zoo=" + url_ + "#nope: "));
}

TEST_F(ZooSourceTest, TrainedModelRefetchesItsCommit) {
  StatusOr<std::string> dir = TrainedZooSources(record_, copy_);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, root_ + "/cache/git/" + commit_);
}

TEST_F(ZooSourceTest, TrainedModelFallsBackToItsCopy) {
  fs::remove_all(work_);
  StatusOr<std::string> dir = TrainedZooSources(record_, copy_);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, copy_);

  // Other sources are refused, and no copy is no fallback.
  Write(copy_ + "/mnist/model.cc", "// another model\n");
  dir = TrainedZooSources(record_, copy_);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr("holds other sources"));
  dir = TrainedZooSources(record_, "");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(dir.status().message(), HasSubstr("cannot be fetched"));
}

TEST_F(ZooSourceTest, RefetchedSourcesMustHaveTheRecordedIdentity) {
  record_.set_zoo_identity("sha256:0000");
  StatusOr<std::string> dir = TrainedZooSources(record_, "");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr("holds other sources"));
}

TEST_F(ZooSourceTest, AGitCacheOthersCanWriteIntoIsRefused) {
  ASSERT_TRUE(ResolveZooSource(url_ + "#" + commit_).ok());
  for (const std::string& dir :
       {root_ + "/cache", root_ + "/cache/git", root_ + "/cache/git/" + commit_}) {
    SCOPED_TRACE(dir);
    ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
    StatusOr<ZooSource> source = ResolveZooSource(url_ + "#" + commit_);
    ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
    EXPECT_EQ(source.status().code(), StatusCode::kPermissionDenied) << source.status();
    EXPECT_THAT(std::string(source.status().message()), HasSubstr(dir + ": owned by uid"));
  }
  EXPECT_TRUE(ResolveZooSource(url_ + "#" + commit_).ok());
}

// A snapshot holds each file at its own path, links too, and nothing is
// written outside it.
TEST_F(ZooSourceTest, SnapshotCopiesLinksAtTheirOwnPaths) {
  const std::string zoo = root_ + "/zs", to = root_ + "/job/zoo";
  Write(zoo + "/mnist/model.cc", "// the model\n");
  Write(root_ + "/other/evil.h", "// evil\n");
  Write(root_ + "/other/a/b/c/deep.py", "x = 1\n");
  fs::create_symlink(root_ + "/other/evil.h", zoo + "/mnist/evil.h");
  fs::create_symlink("../../other/a/b/c/deep.py", zoo + "/mnist/deep.py");
  fs::create_symlink("loop2", zoo + "/loop1");
  fs::create_symlink("loop1", zoo + "/loop2");
  fs::create_symlink(root_ + "/nothing.h", zoo + "/dangling.h");
  ASSERT_TRUE(SnapshotZoo(zoo + "/", to).ok());
  std::vector<std::string> copied;
  for (const auto& entry : fs::recursive_directory_iterator(root_ + "/job")) {
    EXPECT_FALSE(entry.is_symlink()) << entry.path();
    if (entry.is_regular_file()) copied.push_back(entry.path().lexically_relative(to).string());
  }
  std::sort(copied.begin(), copied.end());
  EXPECT_EQ(copied, (std::vector<std::string>{"mnist/deep.py", "mnist/evil.h", "mnist/model.cc"}));
  EXPECT_EQ(*ReadFileToString(to + "/mnist/evil.h"), "// evil\n");
  EXPECT_EQ(fs::directory_iterator(root_ + "/job")->path(), to);
  EXPECT_EQ(*ReadFileToString(root_ + "/other/evil.h"), "// evil\n");

  // A loop with a source's name: an error naming it.
  fs::create_symlink("loop.h", zoo + "/mnist/loop.h");
  Status looped = SnapshotZoo(zoo, to);
  EXPECT_EQ(looped.code(), StatusCode::kInvalidArgument) << looped;
  EXPECT_THAT(std::string(looped.message()), HasSubstr(zoo + "/mnist/loop.h cannot be read"));
}

}  // namespace
}  // namespace elasticdl::client
