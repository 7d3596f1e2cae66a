// The `kubernetes` cluster backend: every process of the job is a pod (see
// pod_manifests.h for their shape). The client's backend creates the
// master pod and its service; the master's creates parameter-server pods
// with services and worker pods, all owned by the master pod.
//
// Exits: a watch on the job's pods (label selector), resumed from the last
// resource version it saw; when the server says that version is too old
// (410 Gone) the backend lists the pods again and reports every watched pod
// that ended or vanished meanwhile. A pod that reached phase Succeeded or
// Failed, or was deleted, has ended: a clean exit when its container exited
// with code 0 (a worker deleted or preempted by the cluster gets SIGTERM,
// finishes its minibatch and leaves: the SIGTERM path of every backend).
// While the API server cannot be reached the pods count as running.
//
// Signals: SIGTERM deletes the pod gracefully (the kubelet sends SIGTERM,
// then SIGKILL after the grace period); SIGKILL deletes it with a grace
// period of 0.
#ifndef ELASTICDL_CLUSTER_KUBERNETES_KUBERNETES_BACKEND_H_
#define ELASTICDL_CLUSTER_KUBERNETES_KUBERNETES_BACKEND_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cluster/cluster_backend.h"
#include "cluster/kubernetes/kube_client.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::cluster {

struct KubernetesBackendOptions {
  proto::KubernetesSpec spec;
  std::string job_name;
  // On storage every pod mounts at the same path (a --volume).
  std::string job_dir;
  // host:port of the master (the master's own backend); empty for the
  // client's, which starts the master.
  std::string master_address;
  // How long a watch request lasts before the backend renews it.
  int watch_timeout_s = 300;
  // Wait between attempts when the API server cannot be reached.
  std::chrono::milliseconds retry{1000};
};

class KubernetesBackend : public ClusterBackend {
 public:
  // The master's backend also looks up its own pod (the owner of the pods
  // it creates). An error when the API cannot be reached or refuses us.
  static StatusOr<std::unique_ptr<KubernetesBackend>> Create(KubernetesBackendOptions options,
                                                             std::unique_ptr<KubeClient> client,
                                                             ExitCallback on_exit);
  // Stops watching; the pods go on (a master the kubelet restarts in its
  // pod adopts them; a new master pod starts its own, since the old one's
  // go with it).
  ~KubernetesBackend() override;

  std::string Describe(const ProcessHandle& handle) const override;
  // The master pod and its service (the client's backend). A finished
  // master pod of an earlier run of the job is replaced; a running one is
  // an error (another job of that name is running).
  StatusOr<ProcessHandle> StartMaster() override;
  StatusOr<ProcessHandle> StartPs(PsId ps, const PsLaunch& launch) override;
  StatusOr<ProcessHandle> StartWorker(WorkerId worker) override;
  // NOT_FOUND unless the pod is still running and owned by this master's pod.
  Status Adopt(const ProcessName& process, const ProcessHandle& handle) override;
  Status Signal(const ProcessName& process, int signal) override;
  // Deletes the pods this backend watches, with `grace` as their grace
  // period, and waits until they are gone. The client's leaves a finished
  // master pod in place, for its logs (deleting it removes the job's pods).
  void StopAll(std::chrono::milliseconds grace) override;

 private:
  struct Pod {
    ProcessName process;
    std::string name;
  };
  KubernetesBackend(KubernetesBackendOptions options, std::unique_ptr<KubeClient> client,
                    ExitCallback on_exit);

  std::string PodsPath() const;
  std::string ServicesPath() const;
  // The label selector of the pods this backend watches.
  std::string WatchedSelector() const;
  // Creates `object` under `collection`; when its name is taken by an
  // object that may go (a finished pod, one of an earlier master), deletes
  // that one first.
  StatusOr<nlohmann::json> CreateReplacing(const std::string& collection,
                                           const nlohmann::json& object);
  StatusOr<ProcessHandle> StartPod(const ProcessName& process,
                                   const std::vector<std::string>& args);
  Status DeletePod(const std::string& name, int grace_seconds);
  // Watches a created pod; reports it at once if it already ended.
  void Track(const std::string& uid, Pod pod);

  void WatchLoop();
  // Lists the job's pods; reports the watched ones that ended or are gone.
  StatusOr<std::string> Relist();
  // A pod's state as an event showed it.
  void Observe(const nlohmann::json& pod, bool deleted);
  void Report(const std::vector<ProcessExit>& exits);

  const KubernetesBackendOptions options_;
  const std::unique_ptr<KubeClient> client_;
  const ExitCallback on_exit_;
  // The master pod's reference (the master's backend), else null.
  nlohmann::json owner_;
  std::string owner_uid_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Pod> pods_;  // watched, by uid
  // Pods seen ending before they were watched (a crash right after
  // creation), by uid.
  std::map<std::string, ProcessExit> early_exits_;
  bool stopping_ = false;
  std::thread watcher_;
};

// How a pod that ended ended, from its status: "exit code 1 (Error)",
// "killed by SIGKILL", "evicted: The node was low on resource: memory".
ProcessExit PodExit(const nlohmann::json& pod, bool deleted);
// Whether a pod has ended: phase Succeeded or Failed, or its elasticdl
// container ended for good (sidecars may keep the pod Running).
bool PodFinished(const nlohmann::json& pod);
// Why a pod that has not ended never will run its container
// ("ImagePullBackOff: ...", a master crash-looping in place); empty when
// nothing says so. Such a pod counts as ended (not cleanly) and is deleted.
std::string CannotRun(const nlohmann::json& pod);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_KUBERNETES_KUBERNETES_BACKEND_H_
