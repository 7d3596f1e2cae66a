#include "client/job_settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "common/strings.h"
#include "elasticdl/seed.h"

namespace elasticdl::client {
namespace {

JobArgs TrainArgs() {
  JobArgs a;
  a.model_zoo = "zoo";
  a.model_def = "m.m.M";
  a.training_data = "data/train,/abs/more";
  return a;
}

std::string Error(const JobArgs& args, JobCommand command) {
  Status s = CheckJobArgs(args, command);
  return s.ok() ? "OK" : std::string(s.message());
}

TEST(JobSettingsTest, FlagsAreUniqueAndDefaultsAreInRange) {
  std::set<std::string> names;
  JobArgs defaults;
  for (const JobSetting& s : JobSettings()) {
    EXPECT_TRUE(names.insert(FlagName(s)).second) << FlagName(s);
    EXPECT_NE(s.commands, 0u) << FlagName(s);
    EXPECT_EQ(s.required & ~s.commands, 0u) << FlagName(s) << " required where not taken";
    if (auto* m = std::get_if<int64_t JobArgs::*>(&s.field)) {
      EXPECT_GE(defaults.**m, s.min) << FlagName(s);
      EXPECT_LE(defaults.**m, s.max) << FlagName(s);
    }
  }
  EXPECT_TRUE(names.count("--no_progress"));
  EXPECT_TRUE(names.count("--dataset_fn"));
}

TEST(JobSettingsTest, RequiredSettingsDependOnTheCommand) {
  EXPECT_EQ(Error(TrainArgs(), JobCommand::kTrain), "OK");
  JobArgs a = TrainArgs();
  a.model_zoo.clear();
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--model_zoo is required");
  a = TrainArgs();
  a.training_data.clear();
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--training_data is required");

  JobArgs e;
  e.trained_model = "model";
  EXPECT_EQ(Error(e, JobCommand::kEvaluate), "--validation_data is required");
  e.validation_data = "v";
  EXPECT_EQ(Error(e, JobCommand::kEvaluate), "OK");
  JobArgs p;
  p.trained_model = "model";
  p.prediction_data = "p";
  EXPECT_EQ(Error(p, JobCommand::kPredict), "--output is required");
}

TEST(JobSettingsTest, NumbersOutOfRangeNameTheFlag) {
  JobArgs a = TrainArgs();
  a.minibatch_size = 0;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--minibatch_size=0: must be at least 1");
  a = TrainArgs();
  a.max_staleness = -2;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--max_staleness=-2: must be at least -1");
  a = TrainArgs();
  a.num_workers = int64_t{1} << 40;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--num_workers=1099511627776: must be at most 1048576");
  a.num_workers = 2;
  a.min_workers = 3;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--min_workers=3 is above --num_workers=2: the job would wait for workers it never "
            "starts");
  a.min_workers = -1;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--min_workers=-1: must be at least 0");
  // The local cluster's processes share this machine.
  const int64_t most = 16 * std::max(1u, std::thread::hardware_concurrency());
  a = TrainArgs();
  a.num_workers = most + 1;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            StrCat("--num_workers=", most + 1, ": the local cluster runs at most ", most,
                   " workers (16 per core of this machine's ", most / 16,
                   "); --cluster=slurm, kubernetes or external runs more"));
  a.cluster = "slurm";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  a = TrainArgs();
  a.worker_lease_ms = 10;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--worker_lease_ms=10: must be at least 100");
  a = TrainArgs();
  a.grads_to_wait = -1;
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--grads_to_wait=-1: must be at least 0");
  // A setting the command does not take is not checked.
  JobArgs p;
  p.trained_model = "model";
  p.prediction_data = "p";
  p.output = "out.csv";
  p.num_epochs = 0;
  EXPECT_EQ(Error(p, JobCommand::kPredict), "OK");
}

TEST(JobSettingsTest, JobNameIsAName) {
  JobArgs a = TrainArgs();
  a.job_name = "mnist run 2";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  for (const char* bad : {"../elsewhere", "a/b", "..", "."}) {
    a.job_name = bad;
    EXPECT_EQ(Error(a, JobCommand::kTrain),
              std::string("--job_name=") + bad +
                  ": a job's name names its directory and leads its log lines: no '/', no "
                  "control characters, not '.' or '..'");
  }
  a.job_name = "red\x1b[31m";
  EXPECT_NE(Error(a, JobCommand::kTrain).find("--job_name=red\\x1b[31m: "), std::string::npos);
}

TEST(JobSettingsTest, KubernetesFlags) {
  JobArgs a = TrainArgs();
  a.yaml = "job.yaml";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--yaml needs --cluster=kubernetes");
  a.cluster = "kubernetes";
  EXPECT_NE(Error(a, JobCommand::kTrain).find("--cluster=kubernetes needs --image_name"),
            std::string::npos);
  a.image_name = "zoo:1";
  EXPECT_NE(Error(a, JobCommand::kTrain).find("--cluster=kubernetes needs --volume"),
            std::string::npos);
  a.volume = "host_path=/data,mount_path=/data";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  a.job_name = "My_Job";
  EXPECT_NE(Error(a, JobCommand::kTrain).find("--job_name=My_Job: on Kubernetes it names pods"),
            std::string::npos);
  a.job_name = "my-job";
  a.master_addr = "10.0.0.1:7000";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--master_addr: on Kubernetes the master binds its pod's address");
  a.master_addr.clear();
  a.envs = "A=1,2B=x";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--envs=A=1,2B=x: '2B=x' is not NAME=VALUE");
  a.envs = "A=1";
  a.image_pull_policy = "Sometimes";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--image_pull_policy=Sometimes: expected Always, IfNotPresent or Never");
  a.image_pull_policy = "Never";
  a.master_resource_limit = "memory=1Gi";
  auto spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const proto::KubernetesSpec& k8s = spec->cluster().kubernetes();
  EXPECT_EQ(k8s.image(), "zoo:1");
  EXPECT_EQ(k8s.master_resources().limits().at("memory"), "1Gi");
  EXPECT_EQ(k8s.env_names(0), "A");
  EXPECT_EQ(k8s.volumes(0).mount_path(), "/data");

  // Every path the pods use must be on a volume.
  proto::JobSpec s = *spec;
  s.set_job_dir("/data/jobs/j1");
  s.set_output("/data/models/m1");
  s.mutable_tasks()->clear_training_data();
  s.mutable_tasks()->add_training_data("/data/train/*.recordio");
  EXPECT_TRUE(CheckPodPaths(s).ok());
  s.set_output("/home/me/model");
  EXPECT_NE(std::string(CheckPodPaths(s).message())
                .find("--output=/home/me/model: the job's pods would not see it"),
            std::string::npos);
  s.set_output("/database");  // not under /data
  EXPECT_FALSE(CheckPodPaths(s).ok());
}

TEST(JobSettingsTest, CombinationsAreChecked) {
  JobArgs a = TrainArgs();
  a.use_async = true;
  a.grads_to_wait = 2;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--grads_to_wait=2 makes synchronous steps, but --use_async=true: drop one of them");
  a = TrainArgs();
  a.partition = "gpu";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--partition needs --cluster=slurm");
  a.cluster = "slurm";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  a.cluster = "yarn";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--cluster=yarn: expected local, slurm, kubernetes, external");
  a = TrainArgs();
  a.master_addr = "host";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--master_addr=host: expected HOST:PORT (port 0: any free one)");
  a.master_addr = "10.0.0.1:0";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  a = TrainArgs();
  a.validation_data.clear();
  a.evaluation_steps = 5;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--evaluation_steps=5 needs --validation_data to evaluate on");
  a.validation_data = "v";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");

  JobArgs e;
  e.validation_data = "v";
  EXPECT_NE(Error(e, JobCommand::kEvaluate).find("name the model's parameters once"),
            std::string::npos);
  e.checkpoint_dir_for_init = "ckpt";
  EXPECT_EQ(Error(e, JobCommand::kEvaluate),
            "--model_zoo is required with --checkpoint_dir_for_init");
  e.trained_model = "model";
  EXPECT_NE(Error(e, JobCommand::kEvaluate).find("name the model's parameters once"),
            std::string::npos);
}

TEST(JobSettingsTest, TheDistributionStrategyIsCheckedAndRecorded) {
  JobArgs a = TrainArgs();
  a.distribution_strategy = "Horovod";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--distribution_strategy=Horovod: expected ParameterServerStrategy, "
            "AllreduceStrategy or Local");
  a.distribution_strategy = "AllreduceStrategy";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "OK");
  a.num_ps_pods = 2;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--num_ps_pods=2 with --distribution_strategy=AllreduceStrategy: the workers hold the "
            "model, without parameter servers (models with Embedding layers need "
            "ParameterServerStrategy)");
  a.num_ps_pods.reset();
  a.use_async = true;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--use_async with --distribution_strategy=AllreduceStrategy: its steps are "
            "synchronous, one minibatch of every worker each");
  a.use_async = false;
  a.distribution_strategy = "Local";
  a.num_workers = 3;
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--num_workers=3 with --distribution_strategy=Local: Local trains in one worker "
            "(AllreduceStrategy trains in several)");
  a.num_workers = 1;
  StatusOr<proto::JobSpec> local = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->strategy(), proto::LOCAL_STRATEGY);
  EXPECT_EQ(local->ps().num_ps(), 0);

  a = TrainArgs();
  a.distribution_strategy = "AllreduceStrategy";
  a.num_workers = 4;
  StatusOr<proto::JobSpec> allreduce = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(allreduce.ok()) << allreduce.status();
  EXPECT_EQ(allreduce->strategy(), proto::ALLREDUCE_STRATEGY);
  EXPECT_EQ(allreduce->ps().num_ps(), 0);
  // The default strategy keeps one server unless told otherwise.
  StatusOr<proto::JobSpec> ps = JobSpecOf(TrainArgs(), JobCommand::kTrain);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->strategy(), proto::PARAMETER_SERVER_STRATEGY);
  EXPECT_EQ(ps->ps().num_ps(), 1);
}

TEST(JobSettingsTest, TheUpdateRuleIsDecidedOnce) {
  JobArgs a = TrainArgs();
  a.sync_version_tolerance = 2;
  a.max_staleness = 5;
  auto spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps().update().mode(), proto::UpdateRule::SYNC_EVERY_WORKER);
  EXPECT_EQ(spec->ps().update().max_version_lag(), 2);

  a.grads_to_wait = 3;
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps().update().mode(), proto::UpdateRule::SYNC_FIXED);
  EXPECT_EQ(spec->ps().update().grads_to_wait(), 3);

  // The spelling of asynchronous training before --use_async.
  a.grads_to_wait = 0;
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps().update().mode(), proto::UpdateRule::ASYNC);
  EXPECT_EQ(spec->ps().update().max_version_lag(), 5);

  a.grads_to_wait.reset();
  a.use_async = true;
  a.lr_staleness_modulation = true;
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps().update().mode(), proto::UpdateRule::ASYNC);
  EXPECT_TRUE(spec->ps().update().lr_staleness_modulation());
}

TEST(JobSettingsTest, PriorityPicksTheWorkersPartitionOnSlurm) {
  JobArgs a = TrainArgs();
  a.priority = "low";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--priority needs --cluster=slurm (on Kubernetes, --worker_pod_priority names a "
            "priority class)");
  a.priority.clear();
  a.priority_partitions = "high=urgent";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--priority_partitions needs --cluster=slurm");

  a = TrainArgs();
  a.cluster = "slurm";
  a.partition = "system";
  auto spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cluster().partition(), "system");
  EXPECT_EQ(spec->cluster().worker_partition(), "");  // the workers go to --partition
  a.priority = "low";
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cluster().partition(), "system");
  EXPECT_EQ(spec->cluster().worker_partition(), "low");
  a.priority = "high";
  a.priority_partitions = "low=scavenge,high=urgent";
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cluster().worker_partition(), "urgent");

  a.priority = "medium";
  EXPECT_EQ(Error(a, JobCommand::kTrain), "--priority=medium: expected high or low");
  a.priority = "high";
  a.priority_partitions = "low=scavenge";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--priority=high: --priority_partitions=low=scavenge names no partition for high");
  a.priority_partitions = "high=a,high=b";
  EXPECT_EQ(Error(a, JobCommand::kTrain),
            "--priority_partitions=high=a,high=b: high is given twice");
  for (const char* bad : {"high", "high=", "urgent=x", "high=a,,low=b"}) {
    a.priority_partitions = bad;
    EXPECT_NE(Error(a, JobCommand::kTrain).find("is not high=PARTITION or low=PARTITION"),
              std::string::npos)
        << bad;
  }
}

TEST(JobSettingsTest, EachPartOfTheSpecHoldsItsSettings) {
  JobArgs a = TrainArgs();
  a.seed = 42;
  a.num_workers = 3;
  a.num_threads = 2;
  a.min_workers = 2;
  a.num_ps_pods = 2;
  a.checkpoint_steps = 10;
  a.checkpoint_dir = "ckpt";
  a.max_master_restarts = 5;
  a.cluster = "external";
  auto spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(spec->type(), proto::JOB_TRAINING);
  EXPECT_EQ(spec->seed(), 42u);
  ASSERT_EQ(spec->tasks().training_data_size(), 2);
  EXPECT_EQ(spec->tasks().training_data(0), cwd + "/data/train");
  EXPECT_EQ(spec->tasks().training_data(1), "/abs/more");
  EXPECT_EQ(spec->tasks().minibatch_size(), 64);
  EXPECT_EQ(spec->tasks().shuffle_seed(), job_seeds::TaskOrder(42));
  EXPECT_EQ(spec->ps().num_ps(), 2);
  EXPECT_EQ(spec->ps().checkpoint_steps(), 10);
  EXPECT_EQ(spec->ps().checkpoint_dir(), cwd + "/ckpt");
  EXPECT_EQ(spec->workers().num_workers(), 3);
  EXPECT_EQ(spec->workers().threads(), 2);
  EXPECT_EQ(spec->workers().min_workers(), 2);
  EXPECT_EQ(spec->fault_tolerance().max_master_restarts(), 5);
  EXPECT_EQ(spec->fault_tolerance().worker_lease_ms(), 5000);
  EXPECT_EQ(spec->cluster().kind(), "external");
  EXPECT_TRUE(spec->output().empty());
  // By default every worker on the clusters that start them at once, the
  // first where they may pend.
  a.min_workers = 0;
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workers().min_workers(), 3);
  a.cluster = "slurm";
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workers().min_workers(), 1);
  a.cluster = "external";

  a.shuffle_seed = 7;
  a.num_threads = 0;
  spec = JobSpecOf(a, JobCommand::kTrain);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tasks().shuffle_seed(), 7u);
  EXPECT_GE(spec->workers().threads(), 1);

  // Prediction has no parameter servers and reads only its own data.
  JobArgs p;
  p.trained_model = "model";
  p.prediction_data = "p1,p2";
  p.validation_data = "ignored";
  p.output = "out.csv";
  spec = JobSpecOf(p, JobCommand::kPredict);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->type(), proto::JOB_PREDICTION);
  EXPECT_FALSE(spec->has_ps());
  EXPECT_EQ(spec->tasks().prediction_data_size(), 2);
  EXPECT_EQ(spec->tasks().validation_data_size(), 0);
  EXPECT_EQ(spec->output(), cwd + "/out.csv");
}

}  // namespace
}  // namespace elasticdl::client
