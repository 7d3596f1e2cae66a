#include "master/observer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl::master {

namespace fs = std::filesystem;

namespace {

constexpr char kTensorBoardDir[] = "tensorboard";
constexpr auto kThroughputEvery = std::chrono::seconds(5);

}  // namespace

Observer::Observer(const ObserverOptions& options, EventLog* events, JobState* state)
    : options_(options),
      events_(events),
      state_(state),
      view_({options.job_name}, [state] { return state->LiveStatus(); }) {}

StatusOr<std::unique_ptr<Observer>> Observer::Start(const ObserverOptions& options,
                                                    EventLog* events, JobState* state) {
  std::unique_ptr<Observer> observer(new Observer(options, events, state));
  EDL_ASSIGN_OR_RETURN(observer->tensorboard_,
                       dashboard::EventFile::Create(StrCat(options.job_dir, "/", kTensorBoardDir)));
  Observer* self = observer.get();
  events->Follow([self](const nlohmann::json& e, bool replayed) { self->OnEvent(e, replayed); });
  dashboard::ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.token = options.credentials.token;
  server_options.tls_certificate = options.credentials.certificate;
  server_options.tls_private_key = options.credentials.private_key;
  server_options.web_dir = options.web_dir;
  EDL_ASSIGN_OR_RETURN(observer->server_, dashboard::Server::Start(server_options, &self->view_));
  EDL_RETURN_IF_ERROR(
      WriteFileAtomically(DashboardUrlFile(options.job_dir), observer->server_->url()));
  observer->poller_ = std::thread([self] { self->PollServers(); });
  return observer;
}

Observer::~Observer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (server_) server_->Stop();
  events_->Follow(nullptr);
}

void Observer::PollServers() {
  std::vector<std::string> addresses;
  std::unique_ptr<rpc::ParameterServers> client;
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, options_.ps_stats_every, [this] { return stop_; })) {
    lock.unlock();
    // A relaunched server listens elsewhere: connect anew when the
    // addresses change. One that does not answer keeps its last figures.
    std::vector<std::string> now = state_->ps_addresses();
    if (std::find(now.begin(), now.end(), "") != now.end()) {
      lock.lock();  // a server has not registered yet
      continue;
    }
    if (now != addresses || !client) {
      addresses = std::move(now);
      client = options_.connect_ps(addresses, options_.ps_stats_timeout);
    }
    for (int i = 0; i < client->num_shards(); ++i) {
      proto::PsStatsResponse stats;
      if (client->Stats(PsId(i), &stats).ok()) view_.SetServerStats(i, stats);
    }
    lock.lock();
  }
}

void Observer::OnEvent(const nlohmann::json& e, bool replayed) {
  view_.Apply(e);
  // An earlier master wrote the replayed points into its own file.
  if (replayed || !tensorboard_) return;
  const std::string event = e.value("event", "");
  const double t = e.value("t", 0.0);
  if (event == "task_done" && e.contains("loss") && e["loss"].is_number()) {
    tensorboard_->AddScalar("loss", e.value("model_version", int64_t{0}), e["loss"].get<double>(),
                            t);
    if (e.contains("learning_rate") && e["learning_rate"].is_number()) {
      tensorboard_->AddScalar("learning_rate", e.value("model_version", int64_t{0}),
                              e["learning_rate"].get<double>(), t);
    }
  } else if (event == "evaluation") {
    const int64_t version = e.value("model_version", int64_t{0});
    const nlohmann::json metrics = e.value("metrics", nlohmann::json::object());
    for (const auto& [name, value] : metrics.items()) {
      if (value.is_number())
        tensorboard_->AddScalar("eval/" + name, version, value.get<double>(), t);
    }
  }
}

void Observer::Tick() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_throughput_ < kThroughputEvery) return;
  last_throughput_ = now;
  proto::GetJobStatusResponse status;
  state_->GetStatus(&status);
  if (status.records_per_second() > 0) {
    tensorboard_->AddScalar("records_per_second", status.model_version(),
                            status.records_per_second());
  }
}

Status Observer::CopyEventFiles(const std::string& output_dir) const {
  const std::string dir = StrCat(options_.job_dir, "/", kTensorBoardDir);
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const fs::path to = fs::path(output_dir) / it->path().filename();
    std::error_code copy_ec;
    fs::copy_file(it->path(), to, fs::copy_options::overwrite_existing, copy_ec);
    if (copy_ec) {
      return absl::InternalError(
          StrCat("copying ", it->path().string(), " to ", to.string(), ": ", copy_ec.message()));
    }
  }
  if (ec) return absl::InternalError(StrCat(dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace elasticdl::master
