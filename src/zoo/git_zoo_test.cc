#include "zoo/git_zoo.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace elasticdl {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file:// repository made with the git command line, in a temporary
// directory that also holds the fetch cache.
class GitZooTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "git_zoo_test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
    work_ = root_ + "/work";
    cache_ = root_ + "/cache";
    Git("init -q -b main " + work_);
    Write("mnist/model.cc", "// one\n");
    first_ = Commit("first");
    Git("-C " + work_ + " tag v1");
    Git("-C " + work_ + " tag -a v1-annotated -m annotated");
    Git("-C " + work_ + " checkout -q -b dev");
    Write("mnist/dev.cc", "// dev\n");
    dev_ = Commit("dev");
    Git("-C " + work_ + " checkout -q main");
    Write("mnist/model.cc", "// two\n");
    second_ = Commit("second");
    url_ = "file://" + work_;
  }
  void TearDown() override { fs::remove_all(root_); }

  void Git(const std::string& args) {
    const std::string command =
        "git -c user.name=test -c user.email=test@example.com -c init.defaultBranch=main " + args +
        " > /dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(work_ + "/" + path).parent_path());
    std::ofstream(work_ + "/" + path) << text;
  }
  std::string Commit(const std::string& message) {
    Git("-C " + work_ + " add -A");
    Git("-C " + work_ + " commit -q -m " + message);
    std::string out;
    FILE* pipe = ::popen(("git -C " + work_ + " rev-parse HEAD").c_str(), "r");
    char buffer[64];
    while (pipe != nullptr && std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
    if (pipe != nullptr) ::pclose(pipe);
    return out.substr(0, 40);
  }
  StatusOr<FetchedGitZoo> Fetch(const std::string& model_zoo) {
    EDL_ASSIGN_OR_RETURN(GitZooUrl url, ParseGitZooUrl(model_zoo));
    return FetchGitZoo(url, cache_);
  }
  std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The names in the git cache: only published commits, nothing partial.
  std::vector<std::string> CacheEntries() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_ + "/git", ec)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string root_, work_, cache_, url_;
  std::string first_, second_, dev_;
};

TEST(GitZooUrlTest, Parse) {
  EXPECT_TRUE(IsZooUrl("https://host/models.git"));
  EXPECT_TRUE(IsZooUrl("file:///tmp/models"));
  EXPECT_FALSE(IsZooUrl("model_zoo"));
  EXPECT_FALSE(IsZooUrl("/abs/dir"));
  EXPECT_FALSE(IsZooUrl("dir/with://inside"));

  StatusOr<GitZooUrl> url = ParseGitZooUrl("https://host/models.git#v1");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->url, "https://host/models.git");
  EXPECT_EQ(url->ref, "v1");
  url = ParseGitZooUrl("git://host:9418/models.git");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->ref, "");
  for (const char* good : {"http://h/m", "file:///m"}) EXPECT_TRUE(ParseGitZooUrl(good).ok());

  url = ParseGitZooUrl("ftp://host/models.git");
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(url.status().message(), HasSubstr("scheme 'ftp' is not supported"));
  url = ParseGitZooUrl("https://host/models.git#");
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GitZooTest, DefaultIsTheRemoteHead) {
  StatusOr<FetchedGitZoo> zoo = Fetch(url_);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  EXPECT_EQ(zoo->commit, second_);
  EXPECT_FALSE(zoo->cached);
  EXPECT_EQ(zoo->dir, GitZooCacheEntry(cache_, second_));
  EXPECT_EQ(ReadFile(zoo->dir + "/mnist/model.cc"), "// two\n");
  EXPECT_FALSE(fs::exists(zoo->dir + "/.git"));
  EXPECT_FALSE(fs::exists(zoo->dir + "/mnist/dev.cc"));
  EXPECT_THAT(CacheEntries(), ElementsAre(second_));
}

TEST_F(GitZooTest, BranchTagAndCommits) {
  struct Case {
    std::string ref, commit;
  };
  for (const Case& c : std::vector<Case>{{"main", second_},
                                         {"dev", dev_},
                                         {"refs/heads/dev", dev_},
                                         {"v1", first_},
                                         {"v1-annotated", first_},
                                         {first_, first_},
                                         {dev_.substr(0, 7), dev_}}) {
    StatusOr<FetchedGitZoo> zoo = Fetch(url_ + "#" + c.ref);
    ASSERT_TRUE(zoo.ok()) << c.ref << ": " << zoo.status();
    EXPECT_EQ(zoo->commit, c.commit) << c.ref;
    EXPECT_TRUE(fs::is_regular_file(zoo->dir + "/mnist/model.cc")) << c.ref;
  }
  EXPECT_EQ(ReadFile(GitZooCacheEntry(cache_, first_) + "/mnist/model.cc"), "// one\n");
  EXPECT_TRUE(fs::exists(GitZooCacheEntry(cache_, dev_) + "/mnist/dev.cc"));
  std::vector<std::string> want = {first_, second_, dev_};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(CacheEntries(), want);
}

TEST_F(GitZooTest, MissingRefListsBranchesAndTags) {
  StatusOr<FetchedGitZoo> zoo = Fetch(url_ + "#nope");
  ASSERT_EQ(zoo.status().code(), absl::StatusCode::kNotFound) << zoo.status();
  EXPECT_THAT(zoo.status().message(), HasSubstr("'nope'"));
  EXPECT_THAT(zoo.status().message(), HasSubstr(url_));
  EXPECT_THAT(zoo.status().message(), HasSubstr("branches: dev, main; tags: v1, v1-annotated"));
  // A hex ref that is no commit: fetched, looked for, not found.
  zoo = Fetch(url_ + "#deadbeef");
  ASSERT_EQ(zoo.status().code(), absl::StatusCode::kNotFound) << zoo.status();
  EXPECT_THAT(zoo.status().message(), HasSubstr("'deadbeef'"));
  EXPECT_THAT(CacheEntries(), ElementsAre());
}

TEST_F(GitZooTest, FullCommitInTheCacheNeedsNoServer) {
  ASSERT_TRUE(Fetch(url_ + "#" + first_).ok());
  fs::remove_all(work_);
  StatusOr<FetchedGitZoo> zoo = Fetch(url_ + "#" + first_);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  EXPECT_TRUE(zoo->cached);
  EXPECT_EQ(ReadFile(zoo->dir + "/mnist/model.cc"), "// one\n");
  // Anything else needs the server, which is gone.
  zoo = Fetch(url_ + "#main");
  EXPECT_EQ(zoo.status().code(), absl::StatusCode::kUnavailable) << zoo.status();
  EXPECT_THAT(zoo.status().message(), HasSubstr(url_));
  EXPECT_THAT(CacheEntries(), ElementsAre(first_));
}

TEST_F(GitZooTest, UnreachableServer) {
  StatusOr<FetchedGitZoo> zoo = Fetch("git://127.0.0.1:1/models.git");
  EXPECT_EQ(zoo.status().code(), absl::StatusCode::kUnavailable) << zoo.status();
  EXPECT_THAT(zoo.status().message(), HasSubstr("git://127.0.0.1:1/models.git"));
  zoo = Fetch("http://127.0.0.1:1/models.git#main");
  EXPECT_EQ(zoo.status().code(), absl::StatusCode::kUnavailable) << zoo.status();
  EXPECT_THAT(CacheEntries(), ElementsAre());
}

TEST_F(GitZooTest, NoCcFileIsNoZoo) {
  fs::remove_all(work_ + "/mnist");
  Write("README.md", "nothing to compile\n");
  const std::string third = Commit("third");
  StatusOr<FetchedGitZoo> zoo = Fetch(url_);
  ASSERT_EQ(zoo.status().code(), absl::StatusCode::kInvalidArgument) << zoo.status();
  EXPECT_THAT(zoo.status().message(), HasSubstr("holds no .cc or .py file"));
  EXPECT_THAT(zoo.status().message(), HasSubstr(third));
  EXPECT_THAT(CacheEntries(), ElementsAre());
}

TEST_F(GitZooTest, AbandonedFetchesAreRemoved) {
  const std::string old = cache_ + "/git/.fetch-old", recent = cache_ + "/git/.fetch-recent";
  fs::create_directories(old + "/mnist");
  fs::create_directories(recent);
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(2));
  ASSERT_TRUE(Fetch(url_).ok());
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(recent));  // perhaps another process's fetch
}

TEST_F(GitZooTest, ConcurrentFetchersAgree) {
  std::vector<StatusOr<FetchedGitZoo>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] { result = Fetch(url_ + "#main"); });
  }
  for (auto& t : threads) t.join();
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->commit, second_);
  }
  EXPECT_THAT(CacheEntries(), ElementsAre(second_));
  EXPECT_EQ(ReadFile(GitZooCacheEntry(cache_, second_) + "/mnist/model.cc"), "// two\n");
}

}  // namespace
}  // namespace elasticdl
