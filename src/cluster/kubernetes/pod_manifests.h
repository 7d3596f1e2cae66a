// The pods and services of a job on Kubernetes, as API objects (JSON): what
// the client submits for the master, what the master submits for parameter
// servers and workers, and what `--yaml` writes.
//
// Every object is labelled app=elasticdl, elasticdl-job-name=<job>,
// elasticdl-replica-type=master|ps|worker and elasticdl-replica-index=<id>;
// parameter servers, workers and their services are owned by the master pod
// (metadata.ownerReferences), so that deleting the master removes the job.
// A container learns its pod's name, namespace and IP from the downward
// API (ELASTICDL_POD_NAME, ELASTICDL_POD_NAMESPACE, ELASTICDL_POD_IP) and
// binds its pod IP.
#ifndef ELASTICDL_CLUSTER_KUBERNETES_POD_MANIFESTS_H_
#define ELASTICDL_CLUSTER_KUBERNETES_POD_MANIFESTS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_backend.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

// The ports the master and parameter servers listen on in their pods.
inline constexpr int kMasterPort = 50001;
inline constexpr int kPsPort = 2222;

// "elasticdl-<job>-master", "elasticdl-<job>-ps-0", "elasticdl-<job>-worker-3".
std::string PodName(const std::string& job_name, const ProcessName& process);

// The label selector of a job's pods ("app=elasticdl,elasticdl-job-name=<job>").
std::string JobSelector(const std::string& job_name);

// The process a pod runs, from its labels' "elasticdl-replica-type" and
// "elasticdl-replica-index": nullopt when they are not those of a pod of a
// job.
std::optional<ProcessName> ProcessOfLabels(const nlohmann::json& labels);

// An ownerReference to the pod `name` with `uid`.
nlohmann::json OwnerReference(const std::string& name, const std::string& uid);

// The pod of `process` running `elasticdl <args>`; `owner` is an
// OwnerReference or null. The --cluster_spec overlay is applied.
StatusOr<nlohmann::json> PodManifest(const proto::KubernetesSpec& spec, const std::string& job_name,
                                     const ProcessName& process,
                                     const std::vector<std::string>& args,
                                     const nlohmann::json& owner);

// The ClusterIP service in front of the pod of `process`, on `port`.
StatusOr<nlohmann::json> ServiceManifest(const proto::KubernetesSpec& spec,
                                         const std::string& job_name, const ProcessName& process,
                                         int port, const nlohmann::json& owner);

// The master pod's arguments: `elasticdl master` on `job_dir`, bound to
// the pod's IP.
std::vector<std::string> MasterPodArgs(const std::string& job_dir);

// `--yaml`: the master's service and pod as the client would create them
// (the service without an owner: kubectl cannot know the pod's uid).
StatusOr<std::string> MasterManifestsYaml(const proto::KubernetesSpec& spec,
                                          const std::string& job_name, const std::string& job_dir);

// Checks a --cluster_spec file (YAML: optional `pod` and `service`
// mappings, merge patches of every pod and service) and returns it as JSON
// text for KubernetesSpec.overlay_json.
StatusOr<std::string> ReadClusterSpecOverlay(const std::string& path);

// The objects as one YAML stream ("---" between documents) that kubectl
// applies.
std::string ManifestsYaml(const std::vector<nlohmann::json>& objects);

// "cpu=1,memory=4096Mi" -> {cpu: 1, memory: 4096Mi}; an error names `flag`.
StatusOr<std::map<std::string, std::string>> ParseResources(const std::string& text,
                                                            const std::string& flag);
// --volume: "host_path=/data,mount_path=/data[,read_only=true]" or
// "claim_name=pvc,mount_path=/data", several separated by ';'.
StatusOr<std::vector<proto::PodVolume>> ParseVolumes(const std::string& text);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_KUBERNETES_POD_MANIFESTS_H_
