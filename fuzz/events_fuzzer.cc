// Fuzzes the replay of a job's event log (events.jsonl) into the dashboard's
// view (dashboard/job_view.h), as a restarted master and `elasticdl
// dashboard` replay it (dashboard::LogTail): every line is one JSON event, of
// any type and shape.
//
// Input: an event log file. LogTail applies each line that parses as an
// object (skipping one whose fields have the wrong types); the view then
// answers every query (the job, curves, events, metrics) without throwing,
// with JSON that serializes strictly.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "dashboard/job_view.h"
#include "dashboard/log_tail.h"
#include "fuzz_check.h"
#include "seed_mode.h"
#include "temp_file.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  return WriteSeed(dir, "job",
                   R"({"t":1.0,"event":"master_started","resumed":false,"job":"j","seed":7}
{"t":1.1,"event":"ps_started","ps":0,"pid":12,"backend_id":"","relaunch":false}
{"t":1.2,"event":"ps_registered","ps":0,"address":"127.0.0.1:1","restored":false,"version":0,"reopened":0}
{"t":1.3,"event":"worker_started","worker":0,"pid":13,"relaunch":false}
{"t":1.4,"event":"task_dispatched","task":0,"worker":0,"type":"training","records":64,"epoch":0}
{"t":1.5,"event":"task_done","task":0,"worker":0,"records":64,"loss":0.7,"model_version":3}
{"t":1.6,"event":"evaluation","model_version":3,"metrics":{"accuracy":0.5}}
{"t":1.7,"event":"worker_lost","worker":0,"how":"lease expired","requeued":1}
{"t":"x","event":7}
{"t":1.8,"event":"job_finished","ok":true}
)");
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  dashboard::JobViewOptions options;
  options.job_name = "fuzz";
  options.max_events = 64;
  options.max_points = 64;
  dashboard::JobView view(options, nullptr);
  const std::string path = fuzz::WriteTempFile("events_fuzzer", ".jsonl", data, size);
  dashboard::LogTail(path).Poll([&view](const nlohmann::json& event) { view.Apply(event); });
  // Answers are JSON the page reads: dump() throws on invalid UTF-8 unless
  // the view replaced it.
  for (const nlohmann::json& answer : {view.Job(2.0), view.Curves(0), view.Events(0)}) {
    (void)answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  }
  (void)view.Metrics(2.0);
  return 0;
}
