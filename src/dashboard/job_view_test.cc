#include "dashboard/job_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "dashboard/log_tail.h"
#include "testing/temp_dir.h"

namespace elasticdl::dashboard {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The events of a short job: two workers, one killed and replaced, one
// parameter server, three training tasks and an evaluation.
std::vector<json> Log() {
  return {
      {{"t", 100.0}, {"event", "master_started"}, {"host", "node1"}, {"pid", 10}},
      {{"t", 100.1}, {"event", "ps_started"}, {"ps", 0}, {"pid", 11}, {"relaunch", false}},
      {{"t", 100.5}, {"event", "ps_registered"}, {"ps", 0}, {"address", "node1:5000"}},
      {{"t", 100.2}, {"event", "worker_started"}, {"worker", 0}, {"pid", 12}},
      {{"t", 100.2}, {"event", "worker_started"}, {"worker", 1}, {"pid", 13}},
      {{"t", 101.0}, {"event", "worker_registered"}, {"worker", 0}},
      {{"t", 101.0}, {"event", "worker_registered"}, {"worker", 1}},
      {{"t", 101.1}, {"event", "task_dispatched"}, {"task", 0}, {"worker", 0}},
      {{"t", 101.1}, {"event", "task_dispatched"}, {"task", 1}, {"worker", 1}},
      {{"t", 101.4},
       {"event", "task_done"},
       {"task", 0},
       {"worker", 0},
       {"error", ""},
       {"loss", 2.5},
       {"model_version", 4}},
      {{"t", 101.5}, {"event", "worker_lost"}, {"worker", 1}, {"how", "killed by SIGKILL"}},
      {{"t", 101.6}, {"event", "worker_started"}, {"worker", 2}, {"pid", 14}, {"relaunch", true}},
      {{"t", 101.7},
       {"event", "task_dispatched"},
       {"task", 1},
       {"worker", 0},
       {"redispatch", true}},
      {{"t", 103.0},
       {"event", "task_done"},
       {"task", 1},
       {"worker", 0},
       {"error", ""},
       {"loss", 1.5},
       {"model_version", 8}},
      {{"t", 103.5},
       {"event", "evaluation"},
       {"model_version", 8},
       {"metrics", {{"accuracy", 0.75}}}},
  };
}

TEST(JobViewTest, FoldsTheLogIntoProcessesTasksCurvesAndATimeline) {
  JobView view({"job-a"}, nullptr);
  for (const json& e : Log()) view.Apply(e);
  json job = view.Job(104.0);
  EXPECT_EQ(job["job"], "job-a");
  EXPECT_EQ(job["summary"]["state"], "running");
  EXPECT_DOUBLE_EQ(job["summary"]["elapsed_seconds"].get<double>(), 4.0);
  ASSERT_EQ(job["workers"].size(), 3u);
  EXPECT_EQ(job["workers"][0]["state"], "running");
  EXPECT_EQ(job["workers"][0]["tasks_done"], 2);
  EXPECT_EQ(job["workers"][0]["host"], "node1");
  EXPECT_EQ(job["workers"][1]["state"], "lost");
  EXPECT_EQ(job["workers"][1]["how"], "killed by SIGKILL");
  EXPECT_EQ(job["workers"][2]["state"], "starting");
  EXPECT_EQ(job["workers"][2]["relaunch"], true);
  ASSERT_EQ(job["ps"].size(), 1u);
  EXPECT_EQ(job["ps"][0]["address"], "node1:5000");
  EXPECT_EQ(job["tasks"]["done"], 2);
  EXPECT_EQ(job["tasks"]["redispatched"], 1);
  EXPECT_EQ(job["tasks"]["doing"], 0);

  json curves = view.Curves(0);
  ASSERT_EQ(curves["loss"].size(), 2u);
  EXPECT_EQ(curves["loss"][1], json({103.0, 8, 1.5}));
  EXPECT_EQ(curves["next"], 2);
  EXPECT_EQ(view.Curves(1)["loss"].size(), 1u);
  EXPECT_EQ(view.Curves(2)["loss"].size(), 0u);
  ASSERT_EQ(curves["evaluations"].size(), 1u);
  EXPECT_EQ(curves["evaluations"][0]["metrics"]["accuracy"], 0.75);

  // Not every task: the timeline keeps what people look for.
  json events = view.Events(0);
  std::vector<std::string> names;
  for (const json& e : events["events"]) names.push_back(e["event"]);
  EXPECT_THAT(names, ::testing::Contains("worker_lost"));
  EXPECT_THAT(names, ::testing::Contains("evaluation"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("task_done")));
  EXPECT_EQ(std::count(names.begin(), names.end(), "task_dispatched"), 1);
  EXPECT_EQ(view.Events(events["next"].get<size_t>())["events"].size(), 0u);
}

TEST(JobViewTest, LiveStatusAddsTaskQueuesAndHeartbeats) {
  JobView view({"job-b"}, [] {
    json status = {{"records_done", 300},
                   {"records_total", 1000},
                   {"records_per_second", 100.0},
                   {"finished", false},
                   {"workers_alive", 2}};
    status["tasks"] = {{"todo", 7}, {"doing", 2}};
    status["leases"] = {{"0", 120}};
    return status;
  });
  for (const json& e : Log()) view.Apply(e);
  json job = view.Job(104.0);
  EXPECT_EQ(job["tasks"]["todo"], 7);
  EXPECT_EQ(job["tasks"]["doing"], 2);
  EXPECT_EQ(job["workers"][0]["heartbeat_ms"], 120);
  EXPECT_FALSE(job["workers"][1].contains("heartbeat_ms"));
  EXPECT_DOUBLE_EQ(job["summary"]["remaining_seconds"].get<double>(), 7.0);
  EXPECT_FALSE(job["status"].contains("tasks"));
}

TEST(JobViewTest, AFinishedJobStopsTheClock) {
  JobView view({"job-c"}, [] { return json{{"finished", true}, {"failed", true}}; });
  for (const json& e : Log()) view.Apply(e);
  view.Apply({{"t", 110.0}, {"event", "job_finished"}, {"failed", true}});
  json job = view.Job(500.0);
  EXPECT_EQ(job["summary"]["state"], "failed");
  EXPECT_DOUBLE_EQ(job["summary"]["elapsed_seconds"].get<double>(), 10.0);
  EXPECT_FALSE(job["summary"].contains("remaining_seconds"));
  // Its processes ended with it; the lost one stays lost.
  EXPECT_EQ(job["workers"][0]["state"], "ended");
  EXPECT_EQ(job["workers"][1]["state"], "lost");
  EXPECT_EQ(job["ps"][0]["state"], "ended");
}

TEST(JobViewTest, OldPointsAndEventsAreDroppedButCountsStayRight) {
  JobViewOptions options{"job-d", /*max_events=*/4, /*max_points=*/4};
  JobView view(options, nullptr);
  for (int i = 0; i < 10; ++i) {
    view.Apply({{"t", 100.0 + i},
                {"event", "task_done"},
                {"task", i},
                {"worker", 0},
                {"error", ""},
                {"loss", 1.0 / (i + 1)},
                {"model_version", i}});
    view.Apply({{"t", 100.0 + i}, {"event", "scaled"}, {"workers_target", i}});
  }
  json curves = view.Curves(0);
  EXPECT_EQ(curves["next"], 10);
  EXPECT_LE(curves["loss"].size(), 4u);
  EXPECT_EQ(curves["loss"].back()[1], 9);
  // A client that saw 8 points gets the last 2.
  EXPECT_EQ(view.Curves(8)["loss"].size(), 2u);
  json events = view.Events(0);
  EXPECT_EQ(events["next"], 10);
  EXPECT_EQ(view.Events(9)["events"].size(), 1u);
  EXPECT_EQ(view.Job(0)["tasks"]["done"], 10);
}

TEST(JobViewTest, MetricsAreInTheTextFormat) {
  JobView view({"job \"e\""}, [] {
    return json{{"records_done", 300},
                {"records_total", 1000},
                {"finished", false},
                {"eval_metrics", {{"accuracy", 0.5}}},
                {"tasks", {{"todo", 7}, {"doing", 2}}}};
  });
  for (const json& e : Log()) view.Apply(e);
  const std::string text = view.Metrics(104.0);
  EXPECT_THAT(text,
              HasSubstr("# TYPE elasticdl_records_done gauge\n"
                        "elasticdl_records_done{job=\"job \\\"e\\\"\",role=\"master\"} 300\n"));
  EXPECT_THAT(
      text, HasSubstr("elasticdl_tasks{job=\"job \\\"e\\\"\",role=\"master\",state=\"todo\"} 7\n"));
  EXPECT_THAT(
      text, HasSubstr("elasticdl_worker_losses_total{job=\"job \\\"e\\\"\",role=\"master\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_evaluation_metric{job=\"job \\\"e\\\"\",role=\"master\","
                              "metric=\"accuracy\"} 0.5\n"));
  // Two finished tasks, at 0.3 s and 1.3 s.
  EXPECT_THAT(text, HasSubstr("elasticdl_task_duration_seconds_bucket{job=\"job \\\"e\\\"\","
                              "role=\"master\",le=\"0.5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_task_duration_seconds_bucket{job=\"job \\\"e\\\"\","
                              "role=\"master\",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_task_duration_seconds_count{job=\"job \\\"e\\\"\","
                              "role=\"master\"} 2\n"));
}

TEST(JobViewTest, GoodputAndTheWorkersTimeByPart) {
  proto::GetJobStatusResponse status;
  status.mutable_worker_seconds()->set_held(40);
  status.mutable_worker_seconds()->set_startup(2);
  status.mutable_worker_seconds()->set_trained(30);
  status.mutable_worker_seconds()->set_step_wait(4);
  const json j = StatusToJson(status);
  EXPECT_DOUBLE_EQ(j["goodput"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["worker_seconds"]["between_tasks"].get<double>(), 4);
  JobView view({"j"}, [&j] { return j; });
  const std::string text = view.Metrics(104.0);
  EXPECT_THAT(text, HasSubstr("elasticdl_goodput{job=\"j\",role=\"master\"} 0.75\n"));
  EXPECT_THAT(text,
              HasSubstr("elasticdl_worker_seconds{job=\"j\",role=\"master\",part=\"held\"} 40\n"));
  EXPECT_THAT(text,
              HasSubstr("elasticdl_worker_seconds{job=\"j\",role=\"master\",part=\"step_wait\"} "
                        "4\n"));
}

TEST(JobViewTest, WorkersCallLatenciesAddUpAcrossTasks) {
  JobView view({"j"}, nullptr);
  Histogram pull;
  pull.Observe(0.0004);
  pull.Observe(0.02);
  Histogram push;
  push.Observe(0.3);
  view.Apply({{"t", 1.0},
              {"event", "task_done"},
              {"task", 0},
              {"worker", 0},
              {"error", ""},
              {"rpc_seconds",
               {{"pull", LatencyHistogramToJson(pull)}, {"push", LatencyHistogramToJson(push)}}}});
  view.Apply({{"t", 2.0},
              {"event", "task_stopped"},
              {"task", 1},
              {"worker", 1},
              {"rpc_seconds",
               {{"pull", LatencyHistogramToJson(pull)},
                // Not of the dashboard's buckets: left out.
                {"push", {{"count", 1}, {"sum", 1.0}, {"counts", {1}}}}}}});
  const std::string text = view.Metrics(3.0);
  EXPECT_THAT(text, HasSubstr("# TYPE elasticdl_worker_rpc_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_worker_rpc_seconds_bucket{job=\"j\",role=\"worker\","
                              "rpc=\"pull\",le=\"0.001\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_worker_rpc_seconds_bucket{job=\"j\",role=\"worker\","
                              "rpc=\"pull\",le=\"0.025\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_worker_rpc_seconds_count{job=\"j\",role=\"worker\","
                              "rpc=\"pull\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_worker_rpc_seconds_count{job=\"j\",role=\"worker\","
                              "rpc=\"push\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_worker_rpc_seconds_sum{job=\"j\",role=\"worker\","
                              "rpc=\"push\"} 0.3\n"));
}

TEST(JobViewTest, ServersFiguresAreLabelledByServerAndTable) {
  JobView view({"j"}, nullptr);
  for (const json& e : Log()) view.Apply(e);
  proto::PsStatsResponse stats;
  stats.set_version(8);
  stats.set_dense_bytes(4000);
  proto::EmbeddingTableStats* table = stats.add_tables();
  table->set_name("users");
  table->set_rows(120);
  table->set_bytes(24000);
  table->set_evicted_by_budget(5);
  Histogram checkpoints;
  checkpoints.Observe(0.004);
  checkpoints.Observe(0.2);
  stats.mutable_checkpoint_seconds()->mutable_bounds()->Add(checkpoints.bounds.begin(),
                                                            checkpoints.bounds.end());
  stats.mutable_checkpoint_seconds()->mutable_counts()->Add(checkpoints.counts.begin(),
                                                            checkpoints.counts.end());
  stats.mutable_checkpoint_seconds()->set_count(2);
  stats.mutable_checkpoint_seconds()->set_sum(0.204);
  view.SetServerStats(0, stats);

  const json ps = view.Job(104.0)["ps"][0];
  EXPECT_EQ(ps["rows"], 120);
  EXPECT_EQ(ps["bytes"], 28000);
  EXPECT_EQ(ps["checkpoints"], 2);
  const std::string text = view.Metrics(104.0);
  EXPECT_THAT(text, HasSubstr("elasticdl_ps_embedding_rows{job=\"j\",role=\"ps\",ps=\"0\","
                              "table=\"users\"} 120\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_ps_embedding_rows_evicted_total{job=\"j\",role=\"ps\","
                              "ps=\"0\",table=\"users\",reason=\"budget\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_ps_dense_bytes{job=\"j\",role=\"ps\",ps=\"0\"} 4000\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_ps_checkpoint_seconds_bucket{job=\"j\",role=\"ps\","
                              "ps=\"0\",le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("elasticdl_ps_checkpoint_seconds_count{job=\"j\",role=\"ps\","
                              "ps=\"0\"} 2\n"));
}

TEST(JobViewTest, LatencyHistogramsRoundTripThroughJson) {
  Histogram h;
  h.Observe(0.003);
  h.Observe(42);
  std::optional<Histogram> back = LatencyHistogramFromJson(LatencyHistogramToJson(h));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->counts, h.counts);
  EXPECT_EQ(back->count, 2);
  EXPECT_DOUBLE_EQ(back->sum, 42.003);
  EXPECT_FALSE(LatencyHistogramFromJson(json{{"count", 1}, {"counts", {1, 2}}}).has_value());
  EXPECT_FALSE(LatencyHistogramFromJson(json::array()).has_value());
  json wrong = LatencyHistogramToJson(h);
  wrong["counts"][0] = "x";
  EXPECT_FALSE(LatencyHistogramFromJson(wrong).has_value());
}

TEST(LogTailTest, EventsWithFieldsOfTheWrongTypeAreSkippedNotFatal) {
  testing::TempDir dir;
  const std::string path = dir.File("events.jsonl");
  std::ofstream(path) << R"({"t": 1, "event": "worker_started", "worker": "zero", "pid": 12})"
                      << "\n"
                      << R"({"t": "x", "event": "master_started", "host": 7})"
                      << "\n"
                      << "not json\n"
                      << R"({"t": 2, "event": "worker_started", "worker": 1, "pid": 13})"
                      << "\n";
  JobView view({"j"}, nullptr);
  LogTail tail(path);
  tail.Poll([&view](const json& e) { view.Apply(e); });
  const json job = view.Job(3.0);
  ASSERT_EQ(job["workers"].size(), 1u) << job.dump();
  EXPECT_EQ(job["workers"][0]["pid"], 13);
}

TEST(LogTailTest, NumbersTooLargeForTheirFieldsAreSkippedNotConverted) {
  // Found by fuzz/events_fuzzer.cc: a pid of 1.2e94 was converted to int.
  testing::TempDir dir;
  const std::string path = dir.File("events.jsonl");
  std::ofstream(path) << R"({"t": 1, "event": "ps_started", "ps": 0, "pid": 1.2e94})"
                      << "\n"
                      << R"({"t": 1, "event": "worker_started", "worker": 1e300, "pid": 3})"
                      << "\n"
                      << R"({"t": 1, "event": "worker_started", "worker": 9223372036854775808})"
                      << "\n"
                      << R"({"t": 1, "event": "task_dispatched", "worker": 1, "task": 1.5})"
                      << "\n"
                      << R"({"t": 2, "event": "worker_started", "worker": 1, "pid": 13})"
                      << "\n";
  JobView view({"j"}, nullptr);
  LogTail(path).Poll([&view](const json& e) { view.Apply(e); });
  const json job = view.Job(3.0);
  EXPECT_EQ(job["ps"].size(), 0u) << job.dump();
  ASSERT_EQ(job["workers"].size(), 1u) << job.dump();
  EXPECT_EQ(job["workers"][0]["pid"], 13);
  EXPECT_EQ(job["tasks"]["dispatched"], 0);
}

}  // namespace
}  // namespace elasticdl::dashboard
