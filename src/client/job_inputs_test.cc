#include "client/job_inputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "elasticdl/data/record_file.h"
#include "testing/temp_dir.h"

namespace elasticdl::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class JobInputsTest : public ::testing::Test {
 protected:
  // A RecordIO file of `records` records.
  std::string WriteRecords(const std::string& name, int records) {
    const std::string path = dir_.File(name);
    auto writer = RecordWriter::Create(path, RecordWriterOptions());
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < records; ++i) EXPECT_TRUE((*writer)->Write("record").ok());
    EXPECT_TRUE((*writer)->Close().ok());
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(JobInputsTest, DataThatExistsPasses) {
  proto::JobSpec spec;
  spec.mutable_tasks()->add_training_data(WriteRecords("train.recordio", 10));
  spec.mutable_tasks()->add_validation_data(WriteRecords("test.recordio", 3));
  spec.mutable_tasks()->add_training_data(dir_.File("*.recordio"));
  EXPECT_TRUE(CheckDataPaths(spec).ok()) << CheckDataPaths(spec);
}

TEST_F(JobInputsTest, MissingPathNamesTheFlagAndThePath) {
  proto::JobSpec spec;
  spec.mutable_tasks()->add_training_data(WriteRecords("train.recordio", 10));
  spec.mutable_tasks()->add_training_data(dir_.File("no_such_dir"));
  Status s = CheckDataPaths(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--training_data: "), HasSubstr("no_such_dir"),
                                 HasSubstr("no such file or directory")));

  proto::JobSpec predict;
  predict.mutable_tasks()->add_prediction_data(dir_.File("none-*.tfrecord"));
  EXPECT_THAT(CheckDataPaths(predict).message(),
              AllOf(HasSubstr("--prediction_data: "), HasSubstr("no file matches")));
}

TEST_F(JobInputsTest, ValidationSetWithoutRecordsIsRefused) {
  proto::JobSpec spec;
  spec.mutable_tasks()->add_training_data(WriteRecords("train.recordio", 10));
  const std::string empty = WriteRecords("empty.recordio", 0);
  spec.mutable_tasks()->add_validation_data(empty);
  Status s = CheckDataPaths(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--validation_data=" + empty),
                                 HasSubstr("its 1 file holds no records")));

  // One empty file among others with records is fine.
  spec.mutable_tasks()->add_validation_data(WriteRecords("test.recordio", 2));
  EXPECT_TRUE(CheckDataPaths(spec).ok()) << CheckDataPaths(spec);
}

TEST_F(JobInputsTest, CorruptValidationFileIsNamed) {
  const std::string path = dir_.File("corrupt.recordio");
  std::ofstream(path) << "not a record file at all";
  proto::JobSpec spec;
  spec.mutable_tasks()->add_validation_data(path);
  EXPECT_THAT(CheckDataPaths(spec).message(),
              AllOf(HasSubstr("--validation_data: "), HasSubstr(path)));
}

TEST_F(JobInputsTest, PathsWithSchemeAreLeftToTheJob) {
  proto::JobSpec spec;
  spec.mutable_tasks()->add_training_data("hdfs://cluster/data/train");
  EXPECT_TRUE(CheckDataPaths(spec).ok());
}

TEST_F(JobInputsTest, WritableOutputs) {
  EXPECT_TRUE(CheckWritable("--output", dir_.File("model")).ok());
  EXPECT_TRUE(CheckWritable("--output", dir_.File("a/b/c/model")).ok());
  EXPECT_TRUE(CheckWritable("--output", dir_.path()).ok());
  EXPECT_TRUE(CheckWritable("--output", "").ok());
  const std::string csv = dir_.File("predictions.csv");
  std::ofstream(csv) << "old\n";
  EXPECT_TRUE(CheckWritable("--output", csv, /*is_file=*/true).ok());
  Status s = CheckWritable("--output", csv);
  EXPECT_THAT(s.message(), HasSubstr("exists and is not a directory"));
  EXPECT_THAT(CheckWritable("--output", csv + "/model").message(), HasSubstr("is not a directory"));
}

// What CheckWritable says of `path` (under `dir`) for a user who may not
// write into it: this user's, or, under root (which writes anywhere),
// nobody's in a child process. Empty when it passed; "skip: ..." when nobody
// may not even enter `dir` (a $TMPDIR closed to others).
std::string CheckAsUnprivileged(const std::string& flag, const std::string& path,
                                const std::string& dir) {
  if (::geteuid() != 0) {
    Status s = CheckWritable(flag, path);
    return s.ok() ? "" : std::string(s.message());
  }
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    constexpr uid_t kNobody = 65534;
    std::string message;
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
      message = "cannot drop privileges";
    } else if (::access(dir.c_str(), X_OK) != 0) {
      message = "skip: nobody may not enter " + dir;
    } else {
      Status s = CheckWritable(flag, path);
      message = s.ok() ? "" : std::string(s.message());
    }
    (void)!::write(pipe_fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) message.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return message;
}

TEST_F(JobInputsTest, UnwritableOutputIsRefused) {
  // Others may pass through the test's directory (0700 from mkdtemp) to the
  // locked one, and not write there.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
  const std::string locked = dir_.File("locked");
  ASSERT_EQ(::mkdir(locked.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);  // whatever the umask
  const std::string first = CheckAsUnprivileged("--output", locked + "/model", dir_.path());
  if (first.rfind("skip: ", 0) == 0) GTEST_SKIP() << first;
  EXPECT_THAT(first, AllOf(HasSubstr("--output=" + locked + "/model: cannot be created"),
                           HasSubstr(locked + " is not writable by this user")));
  EXPECT_THAT(CheckAsUnprivileged("--output", locked + "/a/b/model", dir_.path()),
              HasSubstr(locked + " is not writable"));
  EXPECT_THAT(CheckAsUnprivileged("--checkpoint_dir", locked, dir_.path()),
              HasSubstr("--checkpoint_dir=" + locked + ": not writable by this user"));
  ::chmod(locked.c_str(), 0755);

  // A directory on the way that may not be entered.
  const std::string closed = dir_.File("closed");
  ASSERT_EQ(::mkdir(closed.c_str(), 0), 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0), 0);
  EXPECT_THAT(CheckAsUnprivileged("--output", closed + "/model", dir_.path()),
              AllOf(HasSubstr("--output=" + closed + "/model: cannot be reached"),
                    HasSubstr("Permission denied")));
  ::chmod(closed.c_str(), 0755);
}

}  // namespace
}  // namespace elasticdl::client
