#include "common/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  return names;
}

TEST(WriteFileAtomicallyTest, ConcurrentWritersOfOnePathEachPublishWholeContents) {
  testing::TempDir dir;
  const std::string path = dir.File("predictions.csv");
  // Two attempts of one task publishing the same file at once, many times.
  std::vector<std::string> contents;
  for (int w = 0; w < 4; ++w)
    contents.push_back(std::string(64 * 1024, static_cast<char>('a' + w)));
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) ASSERT_TRUE(WriteFileAtomically(path, contents[w]).ok());
    });
  }
  std::vector<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    StatusOr<std::string> now = ReadFileToString(path);
    if (now.ok()) seen.push_back(*now);
  }
  for (std::thread& t : writers) t.join();
  for (const std::string& s : seen) {
    EXPECT_NE(std::find(contents.begin(), contents.end(), s), contents.end())
        << "a reader saw a mix or a part (" << s.size() << " bytes)";
  }
  StatusOr<std::string> last = ReadFileToString(path);
  ASSERT_TRUE(last.ok());
  EXPECT_NE(std::find(contents.begin(), contents.end(), *last), contents.end());
  // No temporary file is left behind.
  EXPECT_EQ(Entries(dir.path()), std::vector<std::string>{"predictions.csv"});
}

TEST(WriteFileAtomicallyTest, AFailedPublishLeavesTheOldContentsAndNoTemporaryFile) {
  testing::TempDir dir;
  const std::string path = dir.File("model");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  // The rename fails: a directory is in the way.
  fs::create_directory(dir.File("busy"));
  fs::create_directory(dir.File("busy/inside"));
  Status failed = WriteFileAtomically(dir.File("busy"), "new");
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find(dir.File("busy")), std::string::npos) << failed;
  EXPECT_EQ(*ReadFileToString(path), "old");
  std::vector<std::string> names = Entries(dir.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"busy", "model"}));
  // A directory that does not exist is named in the error.
  Status missing = WriteFileAtomically(dir.File("no/such/dir/f"), "x");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing;
}

TEST(CreatePrivateDirectoryTest, OnlyThisUsersDirectoriesWithNoWayInForOthers) {
  testing::TempDir dir;
  const mode_t old_mask = ::umask(0);
  Status created = CreatePrivateDirectory(dir.File("a/b/job"), /*exclusive=*/true);
  ::umask(old_mask);
  ASSERT_TRUE(created.ok()) << created;
  struct stat st {};
  ASSERT_EQ(::stat(dir.File("a/b/job").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(CreatePrivateDirectory(dir.File("a/b/job"), true).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(CreatePrivateDirectory(dir.File("a/b/job"), false).ok());
  // A link to a directory, and a file, are not directories of this user's.
  fs::create_directory_symlink(dir.File("a/b/job"), dir.File("link"));
  Status link = CreatePrivateDirectory(dir.File("link"), false);
  EXPECT_EQ(link.code(), StatusCode::kPermissionDenied) << link;
  EXPECT_NE(link.message().find("symbolic link"), std::string::npos) << link;
  ASSERT_TRUE(WriteFileAtomically(dir.File("file"), "x").ok());
  EXPECT_EQ(CreatePrivateDirectory(dir.File("file"), false).code(), StatusCode::kPermissionDenied);
  // Another user's directory (only root can make one here).
  if (::getuid() == 0) {
    fs::create_directory(dir.File("theirs"));
    ASSERT_EQ(::chown(dir.File("theirs").c_str(), 12345, 12345), 0);
    Status theirs = CreatePrivateDirectory(dir.File("theirs"), false);
    EXPECT_EQ(theirs.code(), StatusCode::kPermissionDenied) << theirs;
    EXPECT_NE(theirs.message().find("owned by uid 12345"), std::string::npos) << theirs;
  }
}

TEST(UsePrivateDirectoriesTest, CreatesEachDirectory0700AndRefusesOnesOthersCanWrite) {
  testing::TempDir dir;
  const mode_t old_mask = ::umask(0);
  Status made = UsePrivateDirectories(dir.File("cache"), "zoo/abc");
  ::umask(old_mask);
  ASSERT_TRUE(made.ok()) << made;
  for (const char* path : {"cache", "cache/zoo", "cache/zoo/abc"}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.File(path).c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << path;
  }
  EXPECT_TRUE(UsePrivateDirectories(dir.File("cache"), "zoo/abc").ok());
  // The root may be a link to a private directory; the directories below it
  // may not be links.
  fs::create_directory_symlink(dir.File("cache"), dir.File("cache-link"));
  EXPECT_TRUE(UsePrivateDirectories(dir.File("cache-link"), "zoo").ok());
  fs::create_directory_symlink(dir.File("cache/zoo"), dir.File("cache/linked"));
  Status link = UsePrivateDirectories(dir.File("cache"), "linked");
  EXPECT_EQ(link.code(), StatusCode::kPermissionDenied) << link;
  EXPECT_NE(link.message().find("symbolic link"), std::string::npos) << link;
  // Writable by the group or by others: refused, each level.
  ASSERT_EQ(::chmod(dir.File("cache/zoo/abc").c_str(), 0777), 0);
  Status writable = UsePrivateDirectories(dir.File("cache"), "zoo/abc");
  EXPECT_EQ(writable.code(), StatusCode::kPermissionDenied) << writable;
  EXPECT_NE(writable.message().find(dir.File("cache/zoo/abc") + ": owned by uid"),
            std::string::npos)
      << writable;
  EXPECT_NE(writable.message().find("mode 0777"), std::string::npos) << writable;
  EXPECT_NE(writable.message().find("chmod go-w"), std::string::npos) << writable;
  ASSERT_EQ(::chmod(dir.File("cache/zoo/abc").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.File("cache").c_str(), 0770), 0);
  Status root = UsePrivateDirectories(dir.File("cache"), "zoo");
  EXPECT_EQ(root.code(), StatusCode::kPermissionDenied) << root;
  EXPECT_NE(root.message().find("mode 0770"), std::string::npos) << root;
  ASSERT_EQ(::chmod(dir.File("cache").c_str(), 0755), 0);
  EXPECT_TRUE(UsePrivateDirectories(dir.File("cache"), "zoo/abc").ok());
  // Another user's directory (only root can make one here).
  if (::getuid() == 0) {
    ASSERT_EQ(::chown(dir.File("cache/zoo").c_str(), 12345, 12345), 0);
    Status theirs = UsePrivateDirectories(dir.File("cache"), "zoo/abc");
    EXPECT_EQ(theirs.code(), StatusCode::kPermissionDenied) << theirs;
    EXPECT_NE(theirs.message().find("owned by uid 12345, not by this user"), std::string::npos)
        << theirs;
  }
}

}  // namespace
}  // namespace elasticdl
