#include "experiment/experiment_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "experiment/experiment_journal.h"
#include "experiment/experiment_state.h"

namespace elasticdl::experiment {
namespace {

class ExperimentConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/experiment_config_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  StatusOr<ExperimentConfig> Load(const std::string& text) {
    const std::string path = dir_ + "/exp.yaml";
    std::ofstream(path) << text;
    return LoadExperimentConfig(path);
  }

  // The message of loading `text`, which must fail.
  std::string Error(const std::string& text) {
    StatusOr<ExperimentConfig> c = Load(text);
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : std::string(c.status().message());
  }

  std::string dir_;
};

const char* kGood = R"(
model_zoo: zoo
trial: mnist.mnist_trial.MnistTrial
data:
  training_data: data/train
  validation_data: data/test,data/more
hyperparameters:
  learning_rate: {type: log, minval: -4, maxval: -2}
  channels: {type: int, minval: 8, maxval: 32}
  dropout: {type: double, minval: 0.0, maxval: 0.5}
  optimizer: {type: categorical, vals: [adam, sgd, "1"]}
  units: 64
  tag: {type: const, val: "x"}
searcher:
  name: asha
  metric: accuracy
  max_trials: 16
  max_length: {epochs: 16}
  max_concurrent_trials: 2
resources:
  max_workers: 4
job:
  minibatch_size: 32
  use_async: true
seed: 9
)";

TEST_F(ExperimentConfigTest, ReadsEverySection) {
  ExperimentConfig c = Load(kGood).value();
  EXPECT_EQ(c.name, "exp");
  EXPECT_EQ(c.model_zoo, dir_ + "/zoo");
  EXPECT_EQ(c.trial, "mnist.mnist_trial.MnistTrial");
  EXPECT_EQ(c.training_data, dir_ + "/data/train");
  EXPECT_EQ(c.validation_data, dir_ + "/data/test," + dir_ + "/data/more");
  ASSERT_EQ(c.hyperparameters.hparams().size(), 6u);
  const Hyperparameter& opt = c.hyperparameters.hparams()[3];
  EXPECT_EQ(opt.type, HparamType::kCategorical);
  ASSERT_EQ(opt.vals.size(), 3u);
  EXPECT_EQ(std::get<std::string>(opt.vals[2]), "1");  // quoted: a string
  EXPECT_EQ(std::get<int64_t>(c.hyperparameters.hparams()[4].value), 64);
  EXPECT_EQ(c.searcher.kind, SearcherKind::kAsha);
  EXPECT_EQ(c.searcher.max_trials, 16);
  EXPECT_EQ(c.searcher.max_length.epochs, 16);
  EXPECT_EQ(c.max_workers, 4);
  EXPECT_EQ(c.seed, 9u);
  JobArgs args = BaseJobArgs(c).value();
  EXPECT_EQ(args.minibatch_size, 32);
  EXPECT_TRUE(args.use_async);
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST_F(ExperimentConfigTest, ErrorsNameTheKey) {
  EXPECT_NE(Error(Replace(kGood, "name: asha", "name: hyperband"))
                .find("searcher.name: 'hyperband' is not one of grid, random, asha"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "maxval: 0.5", "maxval: -0.5"))
                .find("hyperparameters.dropout: empty range: minval 0 > maxval -0.5"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "vals: [adam, sgd, \"1\"]", "vals: []"))
                .find("hyperparameters.optimizer.vals: empty range"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "{type: int,", "{type: integer,"))
                .find("hyperparameters.channels.type: 'integer' is not one of"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "seed: 9", "sead: 9")).find("sead: unknown key"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "minibatch_size: 32", "minibatch: 32"))
                .find("job.minibatch: not a setting of `elasticdl train`"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "minibatch_size: 32", "num_workers: 2"))
                .find("job.num_workers: set by the experiment"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "max_workers: 4", "max_workers: 1"))
                .find("resources.max_workers: 1 workers cannot run 2 concurrent trials"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kGood, "max_length: {epochs: 16}", "max_length: {batches: 16}"))
                .find("searcher.max_length.batches: unknown key"),
            std::string::npos);
  // A line number where the YAML itself is broken.
  EXPECT_NE(Error("model_zoo: [a\n").find("exp.yaml:"), std::string::npos);
}

TEST(ExperimentJournalTest, ACutLastLineIsDropped) {
  char tmpl[] = "/tmp/experiment_journal_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    ExperimentJournal j = ExperimentJournal::Open(dir).value();
    ASSERT_TRUE(j.Append("started", {{"config", "x"}}).ok());
    ASSERT_TRUE(j.Append("rung_started", {{"trial", 0}, {"rung", 0}}).ok());
  }
  { std::ofstream(ExperimentJournalPath(dir), std::ios::app) << "{\"event\": \"rung_fin"; }
  std::vector<nlohmann::json> events = ReadExperimentJournal(dir).value();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["event"], "rung_started");
  // The cut line is gone from the file: appending goes on cleanly.
  {
    ExperimentJournal j = ExperimentJournal::Open(dir).value();
    ASSERT_TRUE(j.Append("stopped").ok());
  }
  EXPECT_EQ(ReadExperimentJournal(dir).value().size(), 3u);
  std::system(("rm -rf " + dir).c_str());
}

TEST_F(ExperimentConfigTest, StateReplaysTheJournal) {
  ExperimentConfig c = Load(Replace(kGood, "max_trials: 16", "max_trials: 2")).value();
  c.searcher.num_rungs = 2;
  c.searcher.divisor = 2;
  ExperimentState live = ExperimentState::Create(c).value();
  std::vector<nlohmann::json> events = {{{"event", "started"}}};
  auto start = [&](const RungRun& r) {
    nlohmann::json e = {{"event", "rung_started"}, {"trial", r.trial}, {"rung", r.rung}};
    events.push_back(e);
    ASSERT_TRUE(live.Apply(e, true).ok());
  };
  auto finish = [&](const RungRun& r, double metric) {
    nlohmann::json e = {{"event", "rung_finished"}, {"trial", r.trial},
                        {"rung", r.rung},           {"ok", true},
                        {"metric", metric},         {"records", 100}};
    events.push_back(e);
    ASSERT_TRUE(live.Apply(e, true).ok());
  };
  ASSERT_TRUE(live.Apply(events[0], true).ok());
  start(*live.Next());
  start(*live.Next());
  finish({0, 0}, 0.3);
  finish({1, 0}, 0.6);
  const std::optional<RungRun> promoted = live.Next();
  ASSERT_TRUE(promoted.has_value());
  EXPECT_EQ(promoted->trial, 1);
  EXPECT_EQ(promoted->rung, 1);
  start(*promoted);

  ExperimentState replayed = ExperimentState::Create(c).value();
  for (const nlohmann::json& e : events) ASSERT_TRUE(replayed.Apply(e, false).ok()) << e;
  ASSERT_EQ(replayed.Unfinished().size(), 1u);
  EXPECT_TRUE(replayed.Unfinished()[0] == (RungRun{1, 1}));
  EXPECT_EQ(replayed.trials().at(0).state, TrialState::kPaused);
  EXPECT_EQ(replayed.trials().at(1).records, 100);
  // What the searcher does next is the same as the live one.
  EXPECT_EQ(replayed.Next().has_value(), live.Next().has_value());
  // A journal the searcher disagrees with is refused.
  ExperimentState other = ExperimentState::Create(c).value();
  Status s = other.Apply({{"event", "rung_started"}, {"trial", 1}, {"rung", 0}}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string csv = TrialsCsv(replayed, "accuracy");
  EXPECT_NE(csv.find("trial,state,rung,channels,dropout,learning_rate,optimizer,tag,units,records,"
                     "seconds,accuracy,message"),
            std::string::npos)
      << csv;
}

}  // namespace
}  // namespace elasticdl::experiment
