// A trained model is published whole: a reused --output never mixes two
// models, a user's directory is never replaced, and a process killed at any
// point of a publish leaves the previous model or the next one.
#include "job/trained_model.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/file.h"
#include "common/strings.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

// A model of version `v`: its record, parameters, a zoo file and, when
// `tables`, an embeddings directory; each file says v.
Status FillModel(const std::string& dir, int64_t v, bool tables) {
  proto::TrainedModel record;
  record.set_model_version(v);
  proto::ModelValues values;
  values.set_version(v);
  proto::Tensor* t = values.add_parameters();
  t->set_name("w");
  t->set_content(std::string(64 << 10, static_cast<char>('a' + v % 26)));
  EDL_RETURN_IF_ERROR(WriteTrainedModel(dir, record, values));
  EDL_RETURN_IF_ERROR(CreateDirectories(dir + "/zoo"));
  EDL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/zoo/version", std::to_string(v)));
  if (tables) {
    EDL_RETURN_IF_ERROR(CreateDirectories(dir + "/embeddings"));
    EDL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/embeddings/version", std::to_string(v)));
  }
  return absl::OkStatus();
}

// The version of the model at `dir` if every file agrees on it; -1 if not.
int64_t WholeVersion(const std::string& dir) {
  StatusOr<proto::TrainedModel> record = ReadTrainedModelRecord(dir);
  StatusOr<proto::ModelValues> values = ReadModelValues(dir);
  StatusOr<std::string> zoo = ReadFileToString(dir + "/zoo/version");
  if (!record.ok() || !values.ok() || !zoo.ok()) return -1;
  const int64_t v = record->model_version();
  if (values->version() != v || *zoo != std::to_string(v)) return -1;
  if (values->parameters_size() != 1 ||
      values->parameters(0).content() != std::string(64 << 10, static_cast<char>('a' + v % 26))) {
    return -1;
  }
  // Tables in even versions only: an odd one with tables mixes two models.
  const bool tables = fs::exists(dir + "/embeddings");
  if (tables != (v % 2 == 0)) return -1;
  if (tables && *ReadFileToString(dir + "/embeddings/version") != std::to_string(v)) return -1;
  return v;
}

Status Publish(const std::string& dir, int64_t v) {
  return PublishTrainedModel(
      dir, [v](const std::string& staging) { return FillModel(staging, v, v % 2 == 0); });
}

TEST(PublishTrainedModelTest, ANewModelReplacesTheOldOneWhole) {
  testing::TempDir tmp;
  const std::string out = tmp.File("model");
  ASSERT_TRUE(Publish(out, 2).ok());
  EXPECT_EQ(WholeVersion(out), 2);
  // Version 3 has no tables: none of version 2's are left beside it.
  ASSERT_TRUE(Publish(out, 3).ok());
  EXPECT_EQ(WholeVersion(out), 3);
  EXPECT_FALSE(fs::exists(out + "/embeddings"));
  EXPECT_FALSE(fs::exists(TrainedModelStagingDir(out)));
}

TEST(PublishTrainedModelTest, AFailedBuildLeavesTheOldModel) {
  testing::TempDir tmp;
  const std::string out = tmp.File("model");
  ASSERT_TRUE(Publish(out, 2).ok());
  Status failed = PublishTrainedModel(out, [](const std::string& staging) -> Status {
    EDL_RETURN_IF_ERROR(FillModel(staging, 3, false));
    return absl::UnavailableError("a parameter server went away");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(WholeVersion(out), 2);
  EXPECT_FALSE(fs::exists(TrainedModelStagingDir(out)));
}

TEST(PublishTrainedModelTest, AUsersDirectoryIsNeverReplaced) {
  testing::TempDir tmp;
  const std::string out = tmp.File("notes");
  fs::create_directories(out);
  std::ofstream(out + "/notes.txt") << "keep";
  Status refused = Publish(out, 2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("not a trained model"), std::string::npos) << refused;
  EXPECT_EQ(*ReadFileToString(out + "/notes.txt"), "keep");
  EXPECT_FALSE(fs::exists(TrainedModelStagingDir(out)));
  // An empty directory is taken.
  const std::string empty = tmp.File("empty");
  fs::create_directories(empty);
  ASSERT_TRUE(Publish(empty, 2).ok());
  EXPECT_EQ(WholeVersion(empty), 2);
}

TEST(PublishTrainedModelTest, ProcessesKilledWhilePublishingLeaveOneWholeModel) {
  testing::TempDir tmp;
  const std::string out = tmp.File("model");
  ASSERT_TRUE(Publish(out, 0).ok());
  std::mt19937 rng(20261127);
  constexpr int kKills = 60;
  int64_t last = 0;
  int mid_publish = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Publishes one version after another until killed.
      for (int64_t v = last + 1;; ++v) {
        if (!Publish(out, v).ok()) _exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 30000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the publisher failed on its own: " << status;
    if (fs::exists(TrainedModelStagingDir(out))) ++mid_publish;
    const int64_t v = WholeVersion(out);
    ASSERT_GE(v, last) << "kill " << kill << ": the model is not whole, or went back";
    last = v;
  }
  // The next publish clears what the last kill left.
  ASSERT_TRUE(Publish(out, last + 1).ok());
  EXPECT_EQ(WholeVersion(out), last + 1);
  EXPECT_FALSE(fs::exists(TrainedModelStagingDir(out)));
  std::printf("%d kills, %d of them during a publish (a staging directory left); %lld versions\n",
              kKills, mid_publish, static_cast<long long>(last));
  EXPECT_GT(mid_publish, kKills / 4);
}

}  // namespace
}  // namespace elasticdl
