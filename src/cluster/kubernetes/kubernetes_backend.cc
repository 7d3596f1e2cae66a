#include "cluster/kubernetes/kubernetes_backend.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "cluster/kubernetes/pod_manifests.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// How long an object that holds a name we need may take to go.
constexpr auto kReplaceDeadline = std::chrono::seconds(90);
// Pods that ended before they were watched, kept for Track().
constexpr size_t kMaxEarlyExits = 1024;

// Typed reads of API objects: a missing or mistyped field is absent, never
// an exception.
const json& At(const json& object, const json::json_pointer& at) {
  static const json kNull;
  return object.is_object() && object.contains(at) ? object[at] : kNull;
}
std::string StringAt(const json& object, const json::json_pointer& at) {
  const json& v = At(object, at);
  return v.is_string() ? v.get<std::string>() : "";
}
int64_t IntAt(const json& object, const json::json_pointer& at, int64_t absent) {
  const json& v = At(object, at);
  return v.is_number_integer() ? v.get<int64_t>() : absent;
}

std::string NameOf(const json& object) { return StringAt(object, "/metadata/name"_json_pointer); }
std::string UidOf(const json& object) { return StringAt(object, "/metadata/uid"_json_pointer); }
bool Terminating(const json& object) {
  return !At(object, "/metadata/deletionTimestamp"_json_pointer).is_null();
}

// The uid of the object's first owner, if any.
std::string OwnerUid(const json& object) {
  const json& refs = At(object, "/metadata/ownerReferences"_json_pointer);
  if (!refs.is_array()) return {};
  for (const json& ref : refs) {
    if (std::string uid = StringAt(ref, "/uid"_json_pointer); !uid.empty()) return uid;
  }
  return {};
}

// The status of the job's container ("elasticdl"; sidecars a cluster
// injects may sort before it), else the first.
const json& MainContainerStatus(const json& pod) {
  static const json kNull;
  const json& statuses = At(pod, "/status/containerStatuses"_json_pointer);
  if (!statuses.is_array() || statuses.empty()) return kNull;
  for (const json& status : statuses) {
    if (StringAt(status, "/name"_json_pointer) == "elasticdl") return status;
  }
  return statuses[0];
}

// Waiting reasons after which the container will not run without someone
// changing the pod or the cluster.
bool HopelessWait(const std::string& reason) {
  return reason == "ImagePullBackOff" || reason == "InvalidImageName" ||
         reason == "CreateContainerConfigError" || reason == "CreateContainerError" ||
         reason == "ErrImageNeverPull";
}

// Crash-looping restarts in place before a pod counts as lost.
constexpr int64_t kMaxRestartsInPlace = 3;

// What `f` returns, or DATA_LOSS when an answer of the API did not have
// the shape it should (nlohmann::json throws on some misuse of one).
template <typename F>
auto Guarded(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const json::exception& e) {
    return absl::DataLossError(StrCat("a malformed answer of the Kubernetes API: ", e.what()));
  }
}

}  // namespace

bool PodFinished(const json& pod) {
  const std::string phase = StringAt(pod, "/status/phase"_json_pointer);
  if (phase == "Succeeded" || phase == "Failed") return true;
  // Sidecars keep a pod Running after the job's container has ended.
  const json& terminated = At(MainContainerStatus(pod), "/state/terminated"_json_pointer);
  if (!terminated.is_object()) return false;
  const std::string restart = StringAt(pod, "/spec/restartPolicy"_json_pointer);
  return restart == "Never" ||
         (restart == "OnFailure" && IntAt(terminated, "/exitCode"_json_pointer, -1) == 0);
}

std::string CannotRun(const json& pod) {
  const json& container = MainContainerStatus(pod);
  const std::string reason = StringAt(container, "/state/waiting/reason"_json_pointer);
  const std::string message = StringAt(container, "/state/waiting/message"_json_pointer);
  if (HopelessWait(reason) ||
      (reason == "CrashLoopBackOff" &&
       IntAt(container, "/restartCount"_json_pointer, 0) >= kMaxRestartsInPlace)) {
    return message.empty() ? reason : StrCat(reason, ": ", message);
  }
  return {};
}

ProcessExit PodExit(const json& pod, bool deleted) {
  ProcessExit e;
  if (std::optional<ProcessName> process =
          ProcessOfLabels(At(pod, "/metadata/labels"_json_pointer))) {
    e.process = *process;
  }
  const json& container = MainContainerStatus(pod);
  const json* terminated = &At(container, "/state/terminated"_json_pointer);
  if (!terminated->is_object()) terminated = &At(container, "/lastState/terminated"_json_pointer);
  std::string how;
  if (terminated->is_object()) {
    const int64_t code = IntAt(*terminated, "/exitCode"_json_pointer, -1);
    const int64_t signal = IntAt(*terminated, "/signal"_json_pointer, 0);
    e.ok = code == 0;
    how = signal > 0 ? StrCat("killed by signal ", signal) : StrCat("exit code ", code);
    if (std::string reason = StringAt(*terminated, "/reason"_json_pointer); !reason.empty()) {
      how += StrCat(" (", reason, ")");
    }
  } else if (std::string why = CannotRun(pod); !why.empty()) {
    how = StrCat("cannot run: ", why);
  } else {
    how = deleted ? "its container never ended" : "its container never ran";
  }
  if (std::string reason = StringAt(pod, "/status/reason"_json_pointer); !reason.empty()) {
    how += StrCat("; ", reason, ": ", StringAt(pod, "/status/message"_json_pointer));
  }
  e.description = StrCat("pod ", NameOf(pod), deleted ? " deleted, " : " ", how);
  return e;
}

KubernetesBackend::KubernetesBackend(KubernetesBackendOptions options,
                                     std::unique_ptr<KubeClient> client, ExitCallback on_exit)
    : options_(std::move(options)), client_(std::move(client)), on_exit_(std::move(on_exit)) {}

StatusOr<std::unique_ptr<KubernetesBackend>> KubernetesBackend::Create(
    KubernetesBackendOptions options, std::unique_ptr<KubeClient> client, ExitCallback on_exit) {
  std::unique_ptr<KubernetesBackend> backend(
      new KubernetesBackend(std::move(options), std::move(client), std::move(on_exit)));
  if (!backend->options_.master_address.empty()) {
    // The master: the pods it creates belong to its own pod.
    const std::string name = PodName(backend->options_.job_name, ProcessName::Master());
    StatusOr<json> pod = backend->client_->Get(backend->PodsPath() + "/" + name);
    if (!pod.ok()) {
      return Status(pod.status().code(),
                    StrCat("the master's own pod ", name, ": ", pod.status().message()));
    }
    backend->owner_uid_ = UidOf(*pod);
    backend->owner_ = OwnerReference(name, backend->owner_uid_);
  }
  backend->watcher_ = std::thread([b = backend.get()] { b->WatchLoop(); });
  return backend;
}

KubernetesBackend::~KubernetesBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  client_->Cancel();
  changed_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::string KubernetesBackend::PodsPath() const {
  return StrCat("/api/v1/namespaces/", options_.spec.namespace_(), "/pods");
}

std::string KubernetesBackend::WatchedSelector() const {
  // The client watches the master; the master its parameter servers and
  // workers.
  return StrCat(JobSelector(options_.job_name), ",elasticdl-replica-type",
                options_.master_address.empty() ? "=" : "!=", "master");
}

std::string KubernetesBackend::ServicesPath() const {
  return StrCat("/api/v1/namespaces/", options_.spec.namespace_(), "/services");
}

std::string KubernetesBackend::Describe(const ProcessHandle& handle) const {
  return StrCat("pod ", handle.backend_id.substr(0, handle.backend_id.find('/')));
}

StatusOr<json> KubernetesBackend::CreateReplacing(const std::string& collection,
                                                  const json& object) {
  const std::string name = NameOf(object);
  const bool is_pod = object.value("kind", "") == "Pod";
  const std::string path = StrCat(collection, "/", name);
  const auto deadline = Clock::now() + kReplaceDeadline;
  while (true) {
    StatusOr<json> created = client_->Post(collection, object);
    if (created.ok() || !absl::IsAlreadyExists(created.status())) return created;
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(StrCat(path, " still exists ",
                                                std::chrono::seconds(kReplaceDeadline).count(),
                                                " s after it was deleted"));
    }
    StatusOr<json> existing = client_->Get(path);
    if (absl::IsNotFound(existing.status())) {
      std::this_thread::sleep_for(milliseconds(250));
      continue;
    }
    if (!existing.ok()) return existing.status();
    const std::string owner = OwnerUid(*existing);
    if (!is_pod && !owner_uid_.empty() && owner == owner_uid_) return existing;
    if (Terminating(*existing)) {
      std::this_thread::sleep_for(milliseconds(250));
      continue;
    }
    // A pod still running is another job's (or this master's own) unless
    // an earlier master of this job owned it.
    const bool earlier_masters = !owner.empty() && owner != owner_uid_;
    if (is_pod && !PodFinished(*existing) && !earlier_masters) {
      return absl::FailedPreconditionError(
          StrCat("pod ", name, " in namespace ", options_.spec.namespace_(),
                 " is running: is another job named '", options_.job_name,
                 "' running? (choose another --job_name, or delete it)"));
    }
    spdlog::info("replacing {} {} left by an earlier run", is_pod ? "pod" : "service", name);
    // A finished pod goes at once; a running one is ended by its kubelet.
    const int grace = is_pod && !PodFinished(*existing) ? 1 : 0;
    StatusOr<json> deleted =
        client_->Delete(path, {{"gracePeriodSeconds", grace}, {"propagationPolicy", "Background"}});
    if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
  }
}

StatusOr<ProcessHandle> KubernetesBackend::StartPod(const ProcessName& process,
                                                    const std::vector<std::string>& args) {
  const Role role = process.role();
  EDL_ASSIGN_OR_RETURN(json pod,
                       PodManifest(options_.spec, options_.job_name, process, args, owner_));
  EDL_ASSIGN_OR_RETURN(json created, CreateReplacing(PodsPath(), pod));
  const std::string name = NameOf(created);
  const std::string uid = UidOf(created);
  Track(uid, Pod{process, name});
  if (role != Role::kWorker) {
    const int port = role == Role::kMaster ? kMasterPort : kPsPort;
    EDL_ASSIGN_OR_RETURN(json service, ServiceManifest(options_.spec, options_.job_name, process,
                                                       port, OwnerReference(name, uid)));
    if (role == Role::kPs) service["metadata"]["ownerReferences"] = json::array({owner_});
    if (Status s = CreateReplacing(ServicesPath(), service).status(); !s.ok()) {
      DeletePod(name, 1).IgnoreError();
      return s;
    }
  }
  if (role != Role::kMaster) spdlog::info("{} started as pod {}", process.label(), name);
  ProcessHandle handle;
  handle.backend_id = StrCat(name, "/", uid);
  return handle;
}

StatusOr<ProcessHandle> KubernetesBackend::StartMaster() {
  return StartPod(ProcessName::Master(), MasterPodArgs(options_.job_dir));
}

StatusOr<ProcessHandle> KubernetesBackend::StartPs(PsId ps, const PsLaunch& launch) {
  std::vector<std::string> args = {"ps",
                                   "--job_dir=" + options_.job_dir,
                                   "--master=" + options_.master_address,
                                   StrCat("--ps_id=", ps.value()),
                                   "--host=$(ELASTICDL_POD_IP)",
                                   StrCat("--port=", kPsPort)};
  if (launch.restore) args.emplace_back("--restore");
  return StartPod(ProcessName::Ps(ps), args);
}

StatusOr<ProcessHandle> KubernetesBackend::StartWorker(WorkerId worker) {
  return StartPod(ProcessName::Worker(worker),
                  {"worker", "--job_dir=" + options_.job_dir, "--master=" + options_.master_address,
                   StrCat("--worker_id=", worker.value())});
}

Status KubernetesBackend::Adopt(const ProcessName& process, const ProcessHandle& handle) {
  const size_t slash = handle.backend_id.find('/');
  if (slash == std::string::npos) return absl::NotFoundError("no pod");
  const std::string name = handle.backend_id.substr(0, slash);
  const std::string uid = handle.backend_id.substr(slash + 1);
  EDL_ASSIGN_OR_RETURN(json pod, client_->Get(PodsPath() + "/" + name));
  if (UidOf(pod) != uid) return absl::NotFoundError(StrCat("pod ", name, " was replaced"));
  if (Terminating(pod) || PodFinished(pod)) {
    return absl::NotFoundError(StrCat("pod ", name, " has ended"));
  }
  if (OwnerUid(pod) != owner_uid_) {
    return absl::NotFoundError(StrCat("pod ", name, " belongs to an earlier master's pod"));
  }
  Track(uid, Pod{process, name});
  return absl::OkStatus();
}

Status KubernetesBackend::DeletePod(const std::string& name, int grace_seconds) {
  json options = {{"propagationPolicy", "Background"}};
  if (grace_seconds >= 0) options["gracePeriodSeconds"] = grace_seconds;
  StatusOr<json> deleted = client_->Delete(PodsPath() + "/" + name, options);
  if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
  return absl::OkStatus();
}

Status KubernetesBackend::Signal(const ProcessName& process, int signal) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [uid, pod] : pods_) {
      if (pod.process == process) name = pod.name;
    }
  }
  if (name.empty()) return absl::NotFoundError(StrCat(process.label(), ": no pod"));
  // SIGTERM: the pod's own grace period. SIGKILL: the shortest one that
  // still waits for the kubelet to end the container (0 would remove the
  // object while the process may run on).
  return DeletePod(name, signal == SIGKILL ? 1 : -1);
}

void KubernetesBackend::StopAll(milliseconds grace) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [uid, pod] : pods_) names.push_back(pod.name);
  }
  const int grace_s = static_cast<int>((grace.count() + 999) / 1000);
  for (const std::string& name : names) {
    Status s = DeletePod(name, grace_s);
    if (!s.ok()) spdlog::warn("deleting pod {}: {}", name, std::string(s.message()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!changed_.wait_for(lock, grace + std::chrono::seconds(30),
                         [this] { return pods_.empty(); })) {
    spdlog::warn("{} pod(s) of the job have not ended yet", pods_.size());
  }
}

void KubernetesBackend::Track(const std::string& uid, Pod pod) {
  std::vector<ProcessExit> exits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto early = early_exits_.find(uid);
    if (early != early_exits_.end()) {
      ProcessExit e = early->second;
      e.process = pod.process;
      exits.push_back(e);
      early_exits_.erase(early);
    } else {
      pods_.insert_or_assign(uid, std::move(pod));
    }
  }
  Report(exits);
}

void KubernetesBackend::Observe(const json& pod, bool deleted) {
  const bool hopeless = !deleted && !PodFinished(pod) && !CannotRun(pod).empty();
  if (!deleted && !PodFinished(pod) && !hopeless) return;
  const std::string uid = UidOf(pod);
  ProcessExit e = PodExit(pod, deleted);
  if (hopeless) e.ok = false;
  std::vector<ProcessExit> exits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_.find(uid);
    if (it != pods_.end()) {
      e.process = it->second.process;
      exits.push_back(e);
      pods_.erase(it);
    } else if (!uid.empty()) {
      if (early_exits_.size() >= kMaxEarlyExits) early_exits_.erase(early_exits_.begin());
      early_exits_.emplace(uid, e);
    }
  }
  Report(exits);
  // It would wait there for good; a relaunch is a new pod.
  if (hopeless && !exits.empty()) {
    Status s = DeletePod(NameOf(pod), 0);
    if (!s.ok()) spdlog::warn("deleting pod {}: {}", NameOf(pod), std::string(s.message()));
  }
}

void KubernetesBackend::Report(const std::vector<ProcessExit>& exits) {
  if (exits.empty()) return;
  for (const ProcessExit& e : exits) {
    if (on_exit_) on_exit_(e);
  }
  changed_.notify_all();
}

StatusOr<std::string> KubernetesBackend::Relist() {
  EDL_ASSIGN_OR_RETURN(
      json list, client_->Get(StrCat(PodsPath(), "?labelSelector=", UrlEncode(WatchedSelector()))));
  std::set<std::string> listed;
  const json& items = At(list, "/items"_json_pointer);
  for (const json& pod : items.is_array() ? items : json::array()) {
    listed.insert(UidOf(pod));
    Observe(pod, false);
  }
  // Watched pods the list lacks: created after it was taken, or gone.
  std::vector<std::pair<std::string, Pod>> missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [uid, pod] : pods_) {
      if (listed.count(uid) == 0) missing.emplace_back(uid, pod);
    }
  }
  for (const auto& [uid, pod] : missing) {
    StatusOr<json> now = client_->Get(PodsPath() + "/" + pod.name);
    if (now.ok() && UidOf(*now) == uid) {
      Observe(*now, false);
      continue;
    }
    if (!now.ok() && !absl::IsNotFound(now.status())) return now.status();
    json gone = {{"metadata", {{"name", pod.name}, {"uid", uid}}}};
    Observe(gone, /*deleted=*/true);
  }
  return StringAt(list, "/metadata/resourceVersion"_json_pointer);
}

void KubernetesBackend::WatchLoop() {
  std::string version;
  bool failing = false;
  auto wait_retry = [this] {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, options_.retry, [this] { return stopping_; });
  };
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (version.empty()) {
      StatusOr<std::string> listed = Guarded([this] { return Relist(); });
      if (!listed.ok()) {
        if (!failing)
          spdlog::warn("listing the job's pods: {}", std::string(listed.status().message()));
        failing = true;
        wait_retry();
        continue;
      }
      failing = false;
      version = *listed;
    }
    bool expired = false;
    bool failed = false;
    Status s = Guarded([&]() -> Status {
      return client_->Watch(
          StrCat(PodsPath(), "?watch=true&allowWatchBookmarks=true&labelSelector=",
                 UrlEncode(WatchedSelector()), "&resourceVersion=", version,
                 "&timeoutSeconds=", options_.watch_timeout_s),
          [&](const json& event) {
            const std::string type = StringAt(event, "/type"_json_pointer);
            const json& object = At(event, "/object"_json_pointer);
            if (type == "ERROR") {
              // 410 Gone: the version is older than the server keeps.
              expired = IntAt(object, "/code"_json_pointer, 0) == 410;
              failed = !expired;
              if (failed) spdlog::warn("watching the job's pods: {}", object.dump());
              version.clear();
              return false;
            }
            if (std::string v = StringAt(object, "/metadata/resourceVersion"_json_pointer);
                !v.empty()) {
              version = v;
            }
            if (type != "BOOKMARK") Observe(object, type == "DELETED");
            return true;
          });
    });
    if (absl::IsCancelled(s)) return;
    if (expired || absl::IsOutOfRange(s)) {
      spdlog::info("the pods' watch expired at resource version {}; listing them again",
                   version.empty() ? "?" : version);
      version.clear();
      continue;
    }
    if (!s.ok() || failed) {
      if (!failing && !s.ok()) {
        spdlog::warn("watching the job's pods: {}", std::string(s.message()));
      }
      failing = true;
      wait_retry();
      continue;
    }
    failing = false;
  }
}

}  // namespace elasticdl::cluster
