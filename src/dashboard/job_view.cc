#include "dashboard/job_view.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "common/strings.h"
#include "job/worker_seconds.h"
#include "rpc/histogram_codec.h"

namespace elasticdl::dashboard {

using nlohmann::json;

namespace {

// Events that make the timeline; the others (a task handed out or finished
// as planned, a worker registering) would drown it.
bool OnTimeline(const std::string& event, const json& e) {
  if (event == "task_dispatched") return e.value("redispatch", false);
  return event != "task_done" && event != "worker_registered";
}

const char* JobTypeName(proto::JobType type) {
  switch (type) {
    case proto::JOB_TRAINING:
      return "training";
    case proto::JOB_EVALUATION:
      return "evaluation";
    case proto::JOB_PREDICTION:
      return "prediction";
    default:
      return "unknown";
  }
}

// A label value of the text format: backslash, double quote and newline
// escaped.
std::string LabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A sample value of the text format.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(v));
  }
  return json(v).dump();
}

// Writes families of the text format: one HELP and TYPE line per family,
// then its samples.
class MetricsText {
 public:
  explicit MetricsText(const std::string& job) : job_(LabelValue(job)) {}

  void Family(const std::string& name, const std::string& type, const std::string& help) {
    text_ += StrCat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // A sample with the job and role labels, then `labels` ("k=\"v\",...").
  void Sample(const std::string& name, double value, const std::string& labels = "",
              const std::string& role = "master") {
    text_ += StrCat(name, "{job=\"", job_, "\",role=\"", role, "\"", labels.empty() ? "" : ",",
                    labels, "} ", Number(value), "\n");
  }
  void One(const std::string& name, const std::string& type, const std::string& help,
           double value) {
    Family(name, type, help);
    Sample(name, value);
  }
  // The samples of histogram `name` (its family written already): the
  // cumulative buckets, the sum and the count.
  void HistogramSamples(const std::string& name, const Histogram& h, const std::string& labels,
                        const std::string& role) {
    const std::string more = labels.empty() ? "" : StrCat(labels, ",");
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      Sample(name + "_bucket", static_cast<double>(cumulative),
             StrCat(more, "le=\"", Number(h.bounds[i]), "\""), role);
    }
    Sample(name + "_bucket", static_cast<double>(h.count), StrCat(more, "le=\"+Inf\""), role);
    Sample(name + "_sum", h.sum, labels, role);
    Sample(name + "_count", static_cast<double>(h.count), labels, role);
  }
  std::string Take() { return std::move(text_); }

 private:
  const std::string job_;
  std::string text_;
};

double NumberOr(const json& j, const char* key, double otherwise = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : otherwise;
}

// The integer at `key`; `otherwise` when there is none. A value that is not
// an integer T holds (1e94 for a pid) is a type error, as nlohmann's own for
// a field of another type, so the event is skipped (LogTail): converting it
// would be undefined.
template <typename T>
T IntegerOr(const json& j, const char* key, T otherwise) {
  auto it = j.find(key);
  if (it == j.end()) return otherwise;
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return static_cast<T>(it->get<uint64_t>());
  }
  if (it->is_number_integer() && !it->is_number_unsigned()) {
    const int64_t v = it->get<int64_t>();
    if (v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
        v <= static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return static_cast<T>(v);
    }
  }
  throw json::type_error::create(
      302, StrCat("'", key, "' must be an integer within its field's range, not ", it->dump()),
      &*it);
}

// The parameter servers' figures, from their last reports.
void ServerMetrics(const std::map<int, proto::PsStatsResponse>& ps_stats, MetricsText* m) {
  auto each_server = [&](const std::string& name, auto value) {
    for (const auto& [id, stats] : ps_stats) {
      m->Sample(name, static_cast<double>(value(stats)), StrCat("ps=\"", id, "\""), "ps");
    }
  };
  auto each_table = [&](const std::string& name, auto value, const std::string& more = "") {
    for (const auto& [id, stats] : ps_stats) {
      for (const proto::EmbeddingTableStats& t : stats.tables()) {
        m->Sample(name, static_cast<double>(value(t)),
                  StrCat("ps=\"", id, "\",table=\"", LabelValue(t.name()), "\"", more), "ps");
      }
    }
  };
  using Stats = proto::PsStatsResponse;
  using Table = proto::EmbeddingTableStats;
  m->Family("elasticdl_ps_model_version", "gauge", "The model version a parameter server holds.");
  each_server("elasticdl_ps_model_version", [](const Stats& s) { return s.version(); });
  m->Family("elasticdl_ps_dense_bytes", "gauge",
            "Bytes of a parameter server's dense parameters and buffers.");
  each_server("elasticdl_ps_dense_bytes", [](const Stats& s) { return s.dense_bytes(); });
  m->Family("elasticdl_ps_embedding_rows", "gauge", "Rows of an embedding table a server holds.");
  each_table("elasticdl_ps_embedding_rows", [](const Table& t) { return t.rows(); });
  m->Family("elasticdl_ps_embedding_bytes", "gauge",
            "Bytes of an embedding table on a server: rows, optimizer slots, per-row state and "
            "the index.");
  each_table("elasticdl_ps_embedding_bytes", [](const Table& t) { return t.bytes(); });
  m->Family("elasticdl_ps_embedding_rows_created_total", "counter",
            "Rows created (admitted) since the server started.");
  each_table("elasticdl_ps_embedding_rows_created_total",
             [](const Table& t) { return t.created(); });
  m->Family("elasticdl_ps_embedding_rows_evicted_total", "counter",
            "Rows evicted since the server started, by reason: age (not updated for long "
            "enough) or budget (beyond the server's row budget).");
  each_table(
      "elasticdl_ps_embedding_rows_evicted_total",
      [](const Table& t) { return t.evicted_by_age(); }, ",reason=\"age\"");
  each_table(
      "elasticdl_ps_embedding_rows_evicted_total",
      [](const Table& t) { return t.evicted_by_budget(); }, ",reason=\"budget\"");
  m->Family("elasticdl_ps_embedding_rows_awaiting_admission", "gauge",
            "Ids trained but not yet admitted as rows.");
  each_table("elasticdl_ps_embedding_rows_awaiting_admission",
             [](const Table& t) { return t.awaiting_admission(); });
  m->Family("elasticdl_ps_embedding_dropped_gradients_total", "counter",
            "Gradient rows of ids not admitted (dropped) since the server started.");
  each_table("elasticdl_ps_embedding_dropped_gradients_total",
             [](const Table& t) { return t.dropped_gradients(); });
  m->Family("elasticdl_ps_checkpoint_seconds", "histogram",
            "Seconds a parameter server took to write a checkpoint (encoding, writing, "
            "retention), since it started.");
  for (const auto& [id, stats] : ps_stats) {
    m->HistogramSamples("elasticdl_ps_checkpoint_seconds",
                        rpc::HistogramFromProto(stats.checkpoint_seconds()),
                        StrCat("ps=\"", id, "\""), "ps");
  }
  m->Family("elasticdl_ps_checkpoints_failed_total", "counter",
            "Checkpoints a parameter server failed to write.");
  each_server("elasticdl_ps_checkpoints_failed_total",
              [](const Stats& s) { return s.checkpoints_failed(); });
  m->Family("elasticdl_ps_checkpoints_skipped_total", "counter",
            "Checkpoints skipped because the previous one was still being written.");
  each_server("elasticdl_ps_checkpoints_skipped_total",
              [](const Stats& s) { return s.checkpoints_skipped(); });
}

}  // namespace

const std::vector<double>& TaskDurationBounds() {
  static const std::vector<double> bounds = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return bounds;
}

json LatencyHistogramToJson(const Histogram& h) {
  return {{"count", h.count}, {"sum", h.sum}, {"counts", h.counts}};
}

std::optional<Histogram> LatencyHistogramFromJson(const json& j) {
  Histogram h;
  auto counts = j.find("counts");
  if (!j.is_object() || counts == j.end() || !counts->is_array() ||
      counts->size() != h.counts.size()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < h.counts.size(); ++i) {
    if (!(*counts)[i].is_number_integer()) return std::nullopt;
    h.counts[i] = (*counts)[i].get<int64_t>();
  }
  h.count = static_cast<int64_t>(NumberOr(j, "count"));
  h.sum = NumberOr(j, "sum");
  return h;
}

json StatusToJson(const proto::GetJobStatusResponse& s) {
  json metrics = json::object();
  for (const auto& [name, value] : s.eval_metrics()) metrics[name] = value;
  json worker_seconds = {{"held", s.worker_seconds().held()}};
  for (const auto& [part, seconds] : job::WorkerSecondsParts(s.worker_seconds())) {
    worker_seconds[part] = seconds;
  }
  return {{"type", JobTypeName(s.type())},
          {"epoch", s.epoch()},
          {"num_epochs", s.num_epochs()},
          {"records_done", s.records_done()},
          {"records_total", s.records_total()},
          {"model_version", s.model_version()},
          {"recent_loss", s.recent_loss()},
          {"records_per_second", s.records_per_second()},
          {"workers_alive", s.workers_alive()},
          {"workers_target", s.workers_target()},
          {"worker_losses", s.worker_losses()},
          {"ps_relaunches", s.ps_relaunches()},
          {"master_restarts", s.master_restarts()},
          {"training_seconds", s.training_seconds()},
          {"finished", s.finished()},
          {"failed", s.failed()},
          {"message", s.message()},
          {"eval_model_version", s.eval_model_version()},
          {"eval_metrics", std::move(metrics)},
          {"goodput", job::Goodput(s.worker_seconds())},
          {"worker_seconds", std::move(worker_seconds)}};
}

JobView::JobView(JobViewOptions options, StatusSource status)
    : options_(std::move(options)),
      status_(std::move(status)),
      task_seconds_(TaskDurationBounds()) {}

void JobView::Apply(const json& e) {
  if (!e.is_object()) return;
  // The integer fields first: an event with one that is not an integer of
  // its field's range is refused (IntegerOr throws) before anything changes.
  for (const char* key : {"worker", "ps", "pid"}) IntegerOr(e, key, 0);
  for (const char* key : {"task", "model_version"}) IntegerOr<int64_t>(e, key, 0);
  const std::string event = e.value("event", "");
  const double t = NumberOr(e, "t");
  std::lock_guard<std::mutex> lock(mu_);
  if (first_t_ == 0 || t < first_t_) first_t_ = t;
  last_t_ = std::max(last_t_, t);
  auto worker = [&]() -> Process& { return workers_[IntegerOr(e, "worker", -1)]; };
  auto ps = [&]() -> Process& { return ps_[IntegerOr(e, "ps", -1)]; };
  if (event == "master_started") {
    ++master_starts_;
    host_ = e.value("host", host_);
    finished_t_ = 0;
  } else if (event == "worker_started" || event == "worker_joined") {
    Process& p = worker();
    p.state = "starting";
    p.pid = IntegerOr(e, "pid", 0);
    p.host = e.value("host", host_);
    p.relaunch = e.value("relaunch", false);
    p.started = t;
    if (p.relaunch) ++worker_relaunches_;
  } else if (event == "worker_registered") {
    if (worker().state == "starting" || worker().state.empty()) worker().state = "running";
  } else if (event == "worker_leaving") {
    worker().state = "leaving";
  } else if (event == "worker_left" || event == "worker_lost") {
    Process& p = worker();
    p.state = event == "worker_left" ? "left" : "lost";
    p.how = e.value("how", "");
    p.task = -1;
    if (event == "worker_lost") ++worker_losses_;
  } else if (event == "ps_started") {
    Process& p = ps();
    p.state = "starting";
    p.pid = IntegerOr(e, "pid", 0);
    p.host = host_;
    if (e.value("relaunch", false)) ++p.restarts;
    p.started = t;
  } else if (event == "ps_registered") {
    Process& p = ps();
    p.state = "running";
    p.address = e.value("address", "");
    p.host = p.address.substr(0, p.address.rfind(':'));
  } else if (event == "ps_lost") {
    Process& p = ps();
    p.state = "lost";
    p.how = e.value("how", "");
    ++ps_losses_;
  } else if (event == "task_dispatched") {
    ++dispatched_;
    if (e.value("redispatch", false)) ++redispatched_;
    Process& p = worker();
    p.task = IntegerOr<int64_t>(e, "task", -1);
    if (p.state == "starting" || p.state.empty()) p.state = "running";
    dispatched_at_[p.task] = t;
  } else if (event == "task_done" || event == "task_stopped") {
    const int64_t task = IntegerOr<int64_t>(e, "task", -1);
    Process& p = worker();
    if (p.task == task) p.task = -1;
    if (event == "task_stopped") {
      ++stopped_;
    } else if (!e.value("error", "").empty()) {
      ++failed_;
    } else {
      ++done_;
      ++p.tasks_done;
      if (auto it = dispatched_at_.find(task); it != dispatched_at_.end()) {
        task_seconds_.Observe(std::max(0.0, t - it->second));
      }
      if (e.contains("loss") && e["loss"].is_number()) {
        if (loss_.size() >= options_.max_points) {
          loss_.erase(loss_.begin(), loss_.begin() + static_cast<std::ptrdiff_t>(loss_.size() / 2));
          loss_dropped_ += options_.max_points / 2;
        }
        loss_.push_back({t, IntegerOr<int64_t>(e, "model_version", 0), e["loss"].get<double>()});
      }
    }
    dispatched_at_.erase(task);
    if (auto rpc = e.find("rpc_seconds"); rpc != e.end() && rpc->is_object()) {
      for (const auto& [call, value] : rpc->items()) {
        if (std::optional<Histogram> h = LatencyHistogramFromJson(value)) {
          rpc_seconds_[call].Merge(*h);
        }
      }
    }
  } else if (event == "nonfinite") {
    ++nonfinite_;
  } else if (event == "evaluation") {
    evaluations_.push_back({{"t", t},
                            {"version", IntegerOr<int64_t>(e, "model_version", 0)},
                            {"metrics", e.value("metrics", json::object())}});
  } else if (event == "job_finished") {
    finished_t_ = t;
    // The master stops every process of a job that ended.
    for (auto* processes : {&workers_, &ps_}) {
      for (auto& [id, p] : *processes) {
        if (p.state == "starting" || p.state == "running" || p.state == "leaving") {
          p.state = "ended";
          p.task = -1;
        }
      }
    }
  }
  if (OnTimeline(event, e)) {
    if (timeline_.size() >= options_.max_events) {
      timeline_.erase(timeline_.begin(),
                      timeline_.begin() + static_cast<std::ptrdiff_t>(timeline_.size() / 2));
      timeline_dropped_ += options_.max_events / 2;
    }
    timeline_.push_back(e);
  }
}

void JobView::SetServerStats(int ps, const proto::PsStatsResponse& stats) {
  std::lock_guard<std::mutex> lock(mu_);
  ps_stats_[ps] = stats;
}

json JobView::ProcessJson(int id, const Process& p) {
  json j = {{"id", id},
            {"state", p.state},
            {"pid", p.pid},
            {"host", p.host},
            {"tasks_done", p.tasks_done},
            {"restarts", p.restarts},
            {"relaunch", p.relaunch},
            {"started", p.started},
            {"how", p.how}};
  if (p.task >= 0) j["task"] = p.task;
  if (!p.address.empty()) j["address"] = p.address;
  return j;
}

json JobView::SummaryLocked(const json& status, double now) const {
  const bool finished = status.value("finished", false) || finished_t_ > 0;
  const double end = finished_t_ > 0 ? finished_t_ : now;
  const double elapsed = first_t_ > 0 ? std::max(0.0, end - first_t_) : 0;
  const double done = NumberOr(status, "records_done");
  const double total = NumberOr(status, "records_total");
  const double rate = NumberOr(status, "records_per_second");
  json summary = {{"state", status.value("failed", false) ? "failed"
                            : finished                    ? "finished"
                                                          : "running"},
                  {"elapsed_seconds", elapsed},
                  {"updated", last_t_}};
  if (!finished && rate > 0 && total > done) summary["remaining_seconds"] = (total - done) / rate;
  return summary;
}

json JobView::Job(double now) const {
  json status = status_ ? status_() : json::object();
  if (!status.is_object()) status = json::object();
  std::lock_guard<std::mutex> lock(mu_);
  json tasks = {
      {"dispatched", dispatched_}, {"redispatched", redispatched_}, {"done", done_},
      {"failed", failed_},         {"stopped", stopped_},           {"nonfinite", nonfinite_}};
  if (auto live = status.find("tasks"); live != status.end() && live->is_object()) {
    tasks.update(*live);
  } else {
    // The log alone: tasks handed out and not yet back.
    int64_t doing = 0;
    for (const auto& [id, w] : workers_) doing += w.task >= 0 ? 1 : 0;
    tasks["doing"] = doing;
  }
  const json leases = status.value("leases", json::object());
  json workers = json::array();
  for (const auto& [id, w] : workers_) {
    json j = ProcessJson(id, w);
    if (auto it = leases.find(std::to_string(id)); it != leases.end()) {
      j["heartbeat_ms"] = *it;
    }
    workers.push_back(std::move(j));
  }
  json servers = json::array();
  for (const auto& [id, p] : ps_) {
    json j = ProcessJson(id, p);
    if (auto it = ps_stats_.find(id); it != ps_stats_.end()) {
      const proto::PsStatsResponse& stats = it->second;
      int64_t rows = 0, bytes = stats.dense_bytes();
      for (const proto::EmbeddingTableStats& t : stats.tables()) {
        rows += t.rows();
        bytes += t.bytes();
      }
      j["version"] = stats.version();
      j["rows"] = rows;
      j["bytes"] = bytes;
      j["checkpoints"] = stats.checkpoint_seconds().count();
    }
    servers.push_back(std::move(j));
  }
  json summary = SummaryLocked(status, now);
  status.erase("tasks");
  status.erase("leases");
  return {{"job", options_.job_name},      {"status", std::move(status)},
          {"summary", std::move(summary)}, {"tasks", std::move(tasks)},
          {"workers", std::move(workers)}, {"ps", std::move(servers)}};
}

json JobView::Curves(size_t since) const {
  std::lock_guard<std::mutex> lock(mu_);
  json loss = json::array();
  const size_t first = since > loss_dropped_ ? since - loss_dropped_ : 0;
  for (size_t i = first; i < loss_.size(); ++i) {
    loss.push_back({loss_[i].t, loss_[i].version, loss_[i].loss});
  }
  return {{"loss", std::move(loss)},
          {"next", loss_dropped_ + loss_.size()},
          {"evaluations", evaluations_}};
}

json JobView::Events(size_t since) const {
  std::lock_guard<std::mutex> lock(mu_);
  json events = json::array();
  const size_t first = since > timeline_dropped_ ? since - timeline_dropped_ : 0;
  for (size_t i = first; i < timeline_.size(); ++i) events.push_back(timeline_[i]);
  return {{"events", std::move(events)}, {"next", timeline_dropped_ + timeline_.size()}};
}

std::string JobView::Metrics(double now) const {
  const json job = Job(now);
  const json& status = job["status"];
  const json& tasks = job["tasks"];
  MetricsText m(options_.job_name);
  m.One("elasticdl_up", "gauge", "Whether the job is running (1) or has ended (0).",
        job["summary"]["state"] == "running" ? 1 : 0);
  m.One("elasticdl_records_done", "gauge",
        "Records processed (trained, evaluated or predicted); a parameter server's restore may "
        "lower it.",
        NumberOr(status, "records_done"));
  m.One("elasticdl_records_planned", "gauge", "Records the whole job processes.",
        NumberOr(status, "records_total"));
  m.One("elasticdl_records_per_second", "gauge", "Recent throughput in records per second.",
        NumberOr(status, "records_per_second"));
  m.One("elasticdl_model_version", "gauge", "The model version on the parameter servers.",
        NumberOr(status, "model_version"));
  m.One("elasticdl_epoch", "gauge", "The epoch being trained (0-based).",
        NumberOr(status, "epoch"));
  m.One("elasticdl_training_loss", "gauge", "Mean loss of the most recent training task.",
        NumberOr(status, "recent_loss", std::nan("")));
  m.Family("elasticdl_evaluation_metric", "gauge",
           "The latest evaluation's metrics, by metric name.");
  const json metrics = status.value("eval_metrics", json::object());
  for (const auto& [name, value] : metrics.items()) {
    if (value.is_number()) {
      m.Sample("elasticdl_evaluation_metric", value.get<double>(),
               StrCat("metric=\"", LabelValue(name), "\""));
    }
  }
  m.One("elasticdl_goodput", "gauge",
        "Share of the workers' time spent on minibatches that were applied (trained / held).",
        NumberOr(status, "goodput"));
  m.Family("elasticdl_worker_seconds", "gauge",
           "The workers' time since each started, summed over the job's workers: all of it "
           "(held), and by what it went to.");
  const json time = status.value("worker_seconds", json::object());
  for (const auto& [part, seconds] : time.items()) {
    if (seconds.is_number()) {
      m.Sample("elasticdl_worker_seconds", seconds.get<double>(),
               StrCat("part=\"", LabelValue(part), "\""));
    }
  }
  m.Family("elasticdl_tasks", "gauge", "Tasks by state: todo and doing now, the others so far.");
  for (const char* state : {"todo", "doing", "done", "failed", "stopped", "redispatched"}) {
    if (tasks.contains(state)) {
      m.Sample("elasticdl_tasks", tasks[state].get<double>(), StrCat("state=\"", state, "\""));
    }
  }
  int alive = 0;
  for (const auto& w : job["workers"]) alive += w["state"] == "running" ? 1 : 0;
  m.One("elasticdl_workers_alive", "gauge", "Workers registered and not lost or gone.",
        status.contains("workers_alive") ? NumberOr(status, "workers_alive") : alive);
  m.One("elasticdl_workers_target", "gauge", "Workers the job asks for.",
        NumberOr(status, "workers_target"));
  int ps_up = 0;
  for (const auto& p : job["ps"]) ps_up += p["state"] == "running" ? 1 : 0;
  m.One("elasticdl_ps_alive", "gauge", "Parameter servers registered and serving.", ps_up);
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.One("elasticdl_worker_losses_total", "counter", "Workers lost (killed, crashed, silent).",
          static_cast<double>(worker_losses_));
    m.One("elasticdl_worker_relaunches_total", "counter", "Workers started to replace lost ones.",
          static_cast<double>(worker_relaunches_));
    m.One("elasticdl_ps_losses_total", "counter", "Parameter servers lost.",
          static_cast<double>(ps_losses_));
    m.One("elasticdl_master_starts_total", "counter",
          "Masters started for this job (more than one: it resumed from its journal).",
          static_cast<double>(master_starts_));
    m.One("elasticdl_tasks_dispatched_total", "counter", "Tasks handed out to workers.",
          static_cast<double>(dispatched_));
    m.One("elasticdl_nonfinite_minibatches_total", "counter",
          "Minibatches whose loss or gradients were not finite.", static_cast<double>(nonfinite_));
    m.Family("elasticdl_task_duration_seconds", "histogram",
             "Seconds from handing a task out to its report, for finished tasks.");
    m.HistogramSamples("elasticdl_task_duration_seconds", task_seconds_, "", "master");
    m.Family("elasticdl_worker_rpc_seconds", "histogram",
             "Seconds the workers' calls to the parameter servers took (a call to several "
             "servers counts once), by call: pull (dense values, waiting for a synchronous "
             "step included), pull_rows (embedding rows), push.");
    for (const auto& [call, h] : rpc_seconds_) {
      m.HistogramSamples("elasticdl_worker_rpc_seconds", h,
                         StrCat("rpc=\"", LabelValue(call), "\""), "worker");
    }
    ServerMetrics(ps_stats_, &m);
  }
  return m.Take();
}

}  // namespace elasticdl::dashboard
