// The shape of a job's pods and services, the flags that fill them in, and
// how a pod's status reads as a process exit.
#include "cluster/kubernetes/pod_manifests.h"

#include <gtest/gtest.h>

#include "cluster/kubernetes/kubernetes_backend.h"
#include "common/file.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

using nlohmann::json;

proto::KubernetesSpec Spec() {
  proto::KubernetesSpec spec;
  spec.set_namespace_("jobs");
  spec.set_image("registry.example/zoo:1");
  spec.set_image_pull_policy("IfNotPresent");
  spec.set_restart_policy("OnFailure");
  (*spec.mutable_worker_resources()->mutable_requests())["cpu"] = "2";
  (*spec.mutable_worker_resources()->mutable_limits())["nvidia.com/gpu"] = "1";
  proto::PodVolume* v = spec.add_volumes();
  v->set_claim_name("shared");
  v->set_mount_path("/data");
  spec.add_env_names("A");
  spec.add_env_values("1");
  spec.set_worker_priority_class("low");
  return spec;
}

TEST(PodManifestsTest, WorkerPodOwnedByTheMaster) {
  auto pod =
      PodManifest(Spec(), "j1", ProcessName::Worker(WorkerId(3)), {"worker", "--worker_id=3"},
                  OwnerReference("elasticdl-j1-master", "uid-1"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ((*pod)["metadata"]["name"], "elasticdl-j1-worker-3");
  EXPECT_EQ((*pod)["metadata"]["namespace"], "jobs");
  EXPECT_EQ((*pod)["metadata"]["labels"]["elasticdl-replica-index"], "3");
  EXPECT_EQ((*pod)["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  const json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Never");  // the master relaunches workers
  EXPECT_EQ(spec["priorityClassName"], "low");
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/zoo:1");
  EXPECT_EQ(c["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(c["command"], json::array({"elasticdl"}));
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "2");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/data");
  EXPECT_EQ(spec["volumes"][0]["persistentVolumeClaim"]["claimName"], "shared");
  EXPECT_EQ(c["env"][2]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
  EXPECT_EQ(c["env"][3], json({{"name", "A"}, {"value", "1"}}));
  EXPECT_EQ(ProcessOfLabels((*pod)["metadata"]["labels"]), ProcessName::Worker(WorkerId(3)));
  EXPECT_EQ(ProcessOfLabels(json::object()), std::nullopt);
}

TEST(PodManifestsTest, MasterPodKeepsItsRestartPolicyAndOverlayApplies) {
  proto::KubernetesSpec spec = Spec();
  spec.set_overlay_json(
      R"({"pod": {"spec": {"nodeSelector": {"pool": "cpu"}, "priorityClassName": null}},
          "service": {"metadata": {"labels": {"team": "a"}}}})");
  auto pod = PodManifest(spec, "j1", ProcessName::Master(), MasterPodArgs("/data/job"), json());
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"]["restartPolicy"], "OnFailure");
  EXPECT_EQ((*pod)["spec"]["nodeSelector"]["pool"], "cpu");
  EXPECT_FALSE((*pod)["metadata"].contains("ownerReferences"));
  EXPECT_EQ((*pod)["spec"]["containers"][0]["args"][2], "--host=$(ELASTICDL_POD_IP)");
  auto service = ServiceManifest(spec, "j1", ProcessName::Master(), kMasterPort, json());
  ASSERT_TRUE(service.ok());
  EXPECT_EQ((*service)["metadata"]["labels"]["team"], "a");
  EXPECT_EQ((*service)["spec"]["selector"]["elasticdl-replica-type"], "master");
  EXPECT_EQ((*service)["spec"]["ports"][0]["port"], kMasterPort);
}

TEST(PodManifestsTest, YamlKeepsStringsThatLookLikeNumbers) {
  std::string yaml = ManifestsYaml({json{{"a", "0"}, {"b", "true"}, {"c", 2}, {"d", "x y"}}});
  EXPECT_NE(yaml.find("a: \"0\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("b: \"true\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("c: 2"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.rfind("---\n", 0), 0u);
}

TEST(PodManifestsTest, FlagsParseOrSayWhatIsExpected) {
  auto r = ParseResources("cpu=500m, memory=4096Mi,gpu=1", "--worker_resource_request");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at("cpu"), "500m");
  EXPECT_EQ(r->at("nvidia.com/gpu"), "1");
  EXPECT_EQ(ParseResources("cpu=lots", "--ps_resource_limit").status().message(),
            "--ps_resource_limit=cpu=lots: 'cpu=lots' is not NAME=QUANTITY (e.g. "
            "cpu=500m,memory=4096Mi,gpu=1)");
  auto v = ParseVolumes("host_path=/a,mount_path=/a;claim_name=c,mount_path=/b,read_only=true");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 2u);
  EXPECT_TRUE((*v)[1].read_only());
  EXPECT_NE(std::string(ParseVolumes("mount_path=/a").status().message())
                .find("needs one of host_path=/PATH or claim_name=NAME"),
            std::string::npos);
  EXPECT_NE(std::string(ParseVolumes("host_path=/a,mount=/a").status().message())
                .find("'mount=/a': expected"),
            std::string::npos);
}

TEST(PodManifestsTest, ClusterSpecFile) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("ok.yaml"),
                                  "pod:\n  spec:\n    serviceAccountName: elasticdl\n"
                                  "    nodeSelector: {disk: \"1\"}\n")
                  .ok());
  auto overlay = ReadClusterSpecOverlay(dir.File("ok.yaml"));
  ASSERT_TRUE(overlay.ok()) << overlay.status();
  json parsed = json::parse(*overlay);
  EXPECT_EQ(parsed["pod"]["spec"]["nodeSelector"]["disk"], "1");
  ASSERT_TRUE(WriteFileAtomically(dir.File("bad.yaml"), "pods: {}\n").ok());
  EXPECT_NE(std::string(ReadClusterSpecOverlay(dir.File("bad.yaml")).status().message())
                .find("unknown key 'pods' (expected pod, service)"),
            std::string::npos);
}

TEST(PodManifestsTest, PodStatusAsAnExit) {
  json labels = {{"elasticdl-replica-type", "worker"}, {"elasticdl-replica-index", "2"}};
  json pod = {
      {"metadata", {{"name", "w2"}, {"labels", labels}}},
      {"status",
       {{"phase", "Failed"},
        {"containerStatuses",
         json::array({{{"state", {{"terminated", {{"exitCode", 137}, {"reason", "Error"}}}}}}})}}}};
  EXPECT_TRUE(PodFinished(pod));
  ProcessExit e = PodExit(pod, false);
  EXPECT_FALSE(e.ok);
  EXPECT_EQ(e.process, ProcessName::Worker(WorkerId(2)));
  EXPECT_EQ(e.description, "pod w2 exit code 137 (Error)");
  pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = 0;
  pod["status"]["reason"] = "Evicted";
  pod["status"]["message"] = "low on memory";
  e = PodExit(pod, true);
  EXPECT_TRUE(e.ok);
  EXPECT_EQ(e.description, "pod w2 deleted, exit code 0 (Error); Evicted: low on memory");
  EXPECT_FALSE(PodExit(json{{"metadata", {{"name", "p"}}}}, true).ok);
}

TEST(PodManifestsTest, PodsThatEndedOrNeverWillRun) {
  // A sidecar sorted first keeps the pod Running after the job's container ended.
  json pod = json::parse(R"({
    "metadata": {"name": "w0"}, "spec": {"restartPolicy": "Never"},
    "status": {"phase": "Running", "containerStatuses": [
      {"name": "istio-proxy", "state": {"running": {}}},
      {"name": "elasticdl", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})");
  EXPECT_TRUE(PodFinished(pod));
  EXPECT_TRUE(PodExit(pod, false).ok);
  pod["spec"]["restartPolicy"] = "OnFailure";
  pod["status"]["containerStatuses"][1]["state"]["terminated"]["exitCode"] = 3;
  EXPECT_FALSE(PodFinished(pod));  // the kubelet restarts it

  json pending = json::parse(R"({
    "metadata": {"name": "m"}, "status": {"phase": "Pending", "containerStatuses": [
      {"name": "elasticdl", "restartCount": 0, "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image \"zoo:1\""}}}]}})");
  EXPECT_FALSE(PodFinished(pending));
  EXPECT_EQ(CannotRun(pending), "ImagePullBackOff: Back-off pulling image \"zoo:1\"");
  EXPECT_EQ(PodExit(pending, false).description,
            "pod m cannot run: ImagePullBackOff: Back-off pulling image \"zoo:1\"");
  pending["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] = "CrashLoopBackOff";
  EXPECT_EQ(CannotRun(pending), "");  // not yet: the kubelet restarts it in place
  pending["status"]["containerStatuses"][0]["restartCount"] = 3;
  EXPECT_NE(CannotRun(pending), "");
  pending["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] = "ContainerCreating";
  EXPECT_EQ(CannotRun(pending), "");

  // Malformed answers read as absent fields, never as exceptions.
  json odd = json::parse(R"({"metadata": {"name": 5, "labels": {"elasticdl-replica-type": 1}},
                             "status": {"phase": 2, "containerStatuses": "x", "reason": []}})");
  EXPECT_FALSE(PodFinished(odd));
  EXPECT_EQ(CannotRun(odd), "");
  EXPECT_EQ(PodExit(odd, true).description, "pod  deleted, its container never ended");
  EXPECT_EQ(PodExit(json::array(), true).description, "pod  deleted, its container never ended");
}

}  // namespace
}  // namespace elasticdl::cluster
