// --lr_schedule, --max_steps and --early_stopping as the client checks them.
#include "client/stop_settings.h"

#include <gtest/gtest.h>

#include "client/job_settings.h"

namespace elasticdl::client {
namespace {

JobArgs TrainArgs() {
  JobArgs a;
  a.model_zoo = "zoo";
  a.model_def = "m.m.M";
  a.training_data = "data/train";
  return a;
}

std::string Error(const JobArgs& args) {
  Status s = CheckJobArgs(args, JobCommand::kTrain);
  return s.ok() ? "OK" : std::string(s.message());
}

std::string ParseError(const char* text) {
  StatusOr<proto::EarlyStopping> e = ParseEarlyStopping(text);
  return e.ok() ? "OK" : std::string(e.status().message());
}

TEST(StopSettingsTest, EarlyStoppingParses) {
  StatusOr<proto::EarlyStopping> e =
      ParseEarlyStopping("metric=accuracy,mode=max,patience=3,min_delta=0.001");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->metric(), "accuracy");
  EXPECT_TRUE(e->maximize());
  EXPECT_EQ(e->patience(), 3);
  EXPECT_DOUBLE_EQ(e->min_delta(), 0.001);
  e = ParseEarlyStopping("metric=loss, mode=min, patience=1");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->maximize());
  EXPECT_DOUBLE_EQ(e->min_delta(), 0);
  // max is the default mode.
  EXPECT_TRUE(ParseEarlyStopping("metric=auc,patience=2")->maximize());
}

TEST(StopSettingsTest, EarlyStoppingErrorsNameTheFlagAndThePart) {
  EXPECT_EQ(ParseError("patience=3"), "--early_stopping=patience=3: 'metric' is required");
  EXPECT_EQ(ParseError("metric=a"), "--early_stopping=metric=a: 'patience' is required");
  EXPECT_EQ(ParseError("metric=a,patience=0"),
            "--early_stopping=metric=a,patience=0: 'patience=0': expected an integer >= 1");
  EXPECT_EQ(ParseError("metric=a,patience=2,mode=up"),
            "--early_stopping=metric=a,patience=2,mode=up: 'mode=up': expected max or min");
  EXPECT_EQ(ParseError("metric=a,patience=2,min_delta=-1"),
            "--early_stopping=metric=a,patience=2,min_delta=-1: 'min_delta=-1': expected a "
            "number >= 0");
  EXPECT_EQ(ParseError("metric=a,patience=2,delta=1"),
            "--early_stopping=metric=a,patience=2,delta=1: unknown key 'delta' (expected metric, "
            "mode, patience, min_delta)");
  EXPECT_EQ(ParseError("metric"), "--early_stopping=metric: 'metric': expected key=value");
}

TEST(StopSettingsTest, EarlyStoppingNeedsEvaluationsDuringTraining) {
  JobArgs a = TrainArgs();
  a.early_stopping = "metric=accuracy,patience=2";
  EXPECT_EQ(Error(a), "--early_stopping needs --validation_data to evaluate on");
  a.validation_data = "data/valid";
  EXPECT_EQ(Error(a),
            "--early_stopping needs --evaluation_steps > 0: it watches the evaluations during "
            "training");
  a.evaluation_steps = 10;
  EXPECT_EQ(Error(a), "OK");
  StatusOr<proto::JobSpec> spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tasks().early_stopping().metric(), "accuracy");
  EXPECT_EQ(spec->tasks().early_stopping().patience(), 2);
}

TEST(StopSettingsTest, LrScheduleIsCheckedBeforeTheJobStarts) {
  JobArgs a = TrainArgs();
  a.lr_schedule = "warmup=100,cosine=2000,min_lr=0.0001";
  EXPECT_EQ(Error(a), "OK");
  a.lr_schedule = "warmup=100,cosine=2000,min=0.0001";
  EXPECT_EQ(Error(a),
            "--lr_schedule=warmup=100,cosine=2000,min=0.0001: learning-rate schedule: unknown key "
            "'min' (expected warmup, step, milestones, gamma, exponential, rate, staircase, "
            "cosine, min_lr, periodic, linear, start_factor, end_factor, polynomial, power, at)");
  a.lr_schedule = "step=0,gamma=0.5";
  EXPECT_EQ(Error(a),
            "--lr_schedule=step=0,gamma=0.5: learning-rate schedule: step=0 must be >= 1");
}

TEST(StopSettingsTest, MaxStepsTravelsInTheTaskSpec) {
  JobArgs a = TrainArgs();
  a.max_steps = -1;
  EXPECT_EQ(Error(a), "--max_steps=-1: must be at least 0");
  a.max_steps = 500;
  StatusOr<proto::JobSpec> spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tasks().max_steps(), 500);
  EXPECT_FALSE(spec->tasks().has_early_stopping());
}

TEST(StopSettingsTest, DeclaredStoppingAppliesUnlessTheFlagsAreGiven) {
  DeclaredStopping declared;
  declared.early_stopping.emplace();
  declared.early_stopping->set_metric("accuracy");
  declared.early_stopping->set_maximize(true);
  declared.early_stopping->set_patience(2);
  declared.max_steps = 300;
  const char* from = "mnist/mnist_trial.cc: MnistTrial: callbacks";

  JobArgs a = TrainArgs();
  a.validation_data = "data/validation";
  a.evaluation_steps = 10;
  StatusOr<proto::JobSpec> spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(ApplyDeclaredStopping(a, declared, from, spec->mutable_tasks()).ok());
  EXPECT_EQ(spec->tasks().max_steps(), 300);
  EXPECT_EQ(spec->tasks().early_stopping().metric(), "accuracy");
  EXPECT_EQ(spec->tasks().early_stopping().patience(), 2);

  // The flags win.
  a.max_steps = 50;
  a.early_stopping = "metric=accuracy,patience=5";
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(ApplyDeclaredStopping(a, declared, from, spec->mutable_tasks()).ok());
  EXPECT_EQ(spec->tasks().max_steps(), 50);
  EXPECT_EQ(spec->tasks().early_stopping().patience(), 5);

  // Early stopping watches evaluations during training.
  a = TrainArgs();
  proto::TaskSpec tasks;
  EXPECT_EQ(ApplyDeclaredStopping(a, declared, from, &tasks).message(),
            "mnist/mnist_trial.cc: MnistTrial: callbacks: EarlyStopping needs --validation_data "
            "to evaluate on");
  a.validation_data = "data/validation";
  EXPECT_EQ(ApplyDeclaredStopping(a, declared, from, &tasks).message(),
            "mnist/mnist_trial.cc: MnistTrial: callbacks: EarlyStopping needs "
            "--evaluation_steps > 0: it watches the evaluations during training");
  declared.early_stopping.reset();
  EXPECT_TRUE(ApplyDeclaredStopping(a, declared, from, &tasks).ok());
  EXPECT_EQ(tasks.max_steps(), 300);
}

}  // namespace
}  // namespace elasticdl::client
