"""Scenario tests of `--cluster=kubernetes`.

No Kubernetes API server can run on this machine, so:
- the manifests `train --yaml` writes are checked against the real API's
  object model: Debian's python3-kubernetes decodes each into its V1Pod /
  V1Service classes, unknown fields refused (kube_objects.py);
- jobs run against fake_kube.FakeKubeApiServer (HTTPS, tokens and client
  certificates, resource versions, watches, 409, 410, 401, graceful and
  forced deletion, garbage collection by owner), which starts every pod as a
  local process from its spec. The client creates the master pod through
  the REST API, the master creates the parameter-server and worker pods, and
  the test deletes pods the way a cluster does while the job runs.

Exactness jobs train tests/zoo/exactness (see exactness.py): after the job
every row of the model must be exactly -epochs, whatever was lost on the way.
"""
import os
import shutil
import subprocess
import tempfile
import time

import corpus
import exactness
import job_test
import kube_objects
from chaos_test import newest_checkpoint
from exact_jobs import ExactJobCase
from fake_kube import FakeKubeApiServer

NAMESPACE = "elasticdl-test"
JOB_TIMEOUT = 300
EVENT_TIMEOUT = 90
IMAGE = "registry.example/elasticdl-zoo:1"


class KubernetesTest(ExactJobCase):
    EVENT_TIMEOUT = EVENT_TIMEOUT
    JOB_TIMEOUT = JOB_TIMEOUT
    # Long enough a job for three faults one after the other.
    SLEEP_MS = 200

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.api = FakeKubeApiServer(
            os.path.join(cls._tmp.name, "apiserver"), tls=True, token="pod-token",
            base_env={"PATH": f"{os.path.dirname(job_test.BIN)}:/usr/bin:/bin",
                      "HOME": cls._tmp.name, "LANG": "C.UTF-8"})
        cls.api.start()
        # The client authenticates with a client certificate, the pods with a token.
        cls.client_config = os.path.join(cls._tmp.name, "client-kubeconfig")
        cls.api.write_kubeconfig(cls.client_config, auth="cert", namespace=NAMESPACE)
        cls.pod_config = os.path.join(cls._tmp.name, "pod-kubeconfig")
        cls.api.write_kubeconfig(cls.pod_config, auth="token", namespace=NAMESPACE,
                                 inline=False)
        data = os.path.join(cls._tmp.name, "data")
        cls.mnist_train = os.path.join(data, "mnist-train.recordio")
        cls.mnist_validation = os.path.join(data, "mnist-validation.recordio")
        corpus.write_subset(cls.mnist_train, "train", 0, job_test.TRAIN_RECORDS)
        corpus.write_subset(cls.mnist_validation, "test", 0, job_test.VALIDATION_RECORDS)

    @classmethod
    def tearDownClass(cls):
        cls.api.stop()
        super().tearDownClass()

    def kubernetes_flags(self):
        return {"cluster": "kubernetes", "image_name": IMAGE,
                "volume": f"host_path={self._tmp.name},mount_path={self._tmp.name}",
                "envs": f"KUBECONFIG={self.pod_config},OMP_WAIT_POLICY=PASSIVE",
                "checkpoint_steps": 8}

    def start_on_kubernetes(self, name, **flags):
        flags = {**self.kubernetes_flags(), **flags}
        job_dir = os.path.join(self.dir, "job-" + name)
        output = os.path.join(self.dir, "model-" + name)
        self._job_dirs.append(job_dir)
        job = job_test.Job(self._args(job_dir, output, **flags), env={"KUBECONFIG":
                                                                      self.client_config})
        self._jobs.append(job)
        return job, job_dir, output, exactness.EventLog(job_dir)

    def _cleanup(self):
        for pod in self.api.pods(NAMESPACE):
            self.api.delete("Pod", NAMESPACE, pod["metadata"]["name"], grace_seconds=0)
        super()._cleanup()

    def assertNothingLeft(self, job_dir):
        """As on every backend, once the pods the job's end deleted are gone: a pod
        the garbage collector deleted with its master keeps running until its
        container leaves or its grace period (30 s) ends, as under a kubelet."""
        name = os.path.basename(job_dir)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and any(
                p["metadata"].get("deletionTimestamp") and
                p["metadata"]["labels"].get("elasticdl-job-name") == name
                for p in self.api.pods(NAMESPACE)):
            time.sleep(0.2)
        super().assertNothingLeft(job_dir)

    def describe(self, job, log):
        pods = [(p["metadata"]["name"], p.get("status", {}).get("phase"))
                for p in self.api.pods(NAMESPACE)]
        logs = []
        log_dir = os.path.join(self.api.work_dir, "logs")
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            with open(os.path.join(log_dir, name), errors="replace") as f:
                logs.append(f"--- {name}\n" + "".join(f.readlines()[-15:]))
        return f"{super().describe(job, log)}\npods: {pods}\n" + "\n".join(logs)

    def wait_pod(self, job, log, name, what, predicate=lambda pod: True):
        return self.until(job, log, lambda: next(
            (p for p in self.api.pods(NAMESPACE) if p["metadata"]["name"] == name and
             predicate(p)), None), what)

    # -- manifests -------------------------------------------------------------

    def test_yaml_manifests_decode_into_the_api_classes(self):
        spec_file = os.path.join(self.dir, "cluster_spec.yaml")
        with open(spec_file, "w") as f:
            f.write("pod:\n  spec:\n    serviceAccountName: elasticdl\n"
                    "    nodeSelector: {pool: training}\n"
                    "    tolerations: [{key: dedicated, value: ml, effect: NoSchedule}]\n"
                    "service:\n  metadata:\n    labels: {team: search}\n")
        manifest = os.path.join(self.dir, "job.yaml")
        job_dir = os.path.join(self.dir, "job-yaml")
        requests_before = len(self.api.requests)
        job = job_test.Job(self._args(
            job_dir, os.path.join(self.dir, "model-yaml"), cluster="kubernetes",
            image_name=IMAGE, namespace="ml-jobs", yaml=manifest,
            volume=f"claim_name=shared,mount_path={self._tmp.name};"
                   "host_path=/etc/ssl/certs,mount_path=/etc/ssl/certs,read_only=true",
            master_resource_request="cpu=1,memory=1024Mi",
            master_resource_limit="cpu=2,memory=2048Mi",
            ps_resource_request="cpu=1,memory=2048Mi", worker_resource_request="cpu=2,gpu=1",
            worker_resource_limit="cpu=4,memory=8Gi", image_pull_policy="IfNotPresent",
            restart_policy="OnFailure", envs="A=1,B=two words", cluster_spec=spec_file,
            worker_pod_priority="low"), env={"KUBECONFIG": self.client_config})
        self.assertEqual(job.wait(120), 0, job.describe())
        self.assertIn(f"kubectl apply -f {manifest}", job.stdout)
        # Nothing was submitted, though the kubeconfig names the fake.
        self.assertEqual(self.api.requests[requests_before:], [])
        objects = kube_objects.load_manifests(manifest)
        for obj in objects:
            kube_objects.check_object(obj)
        service, pod = objects
        name = "elasticdl-job-yaml-master"
        self.assertEqual((service["kind"], pod["kind"]), ("Service", "Pod"))
        self.assertEqual(pod["metadata"]["name"], name)
        self.assertEqual(pod["metadata"]["namespace"], "ml-jobs")
        self.assertEqual(pod["metadata"]["labels"], {
            "app": "elasticdl", "elasticdl-job-name": "job-yaml",
            "elasticdl-replica-type": "master", "elasticdl-replica-index": "0"})
        self.assertEqual(service["spec"]["selector"], pod["metadata"]["labels"])
        self.assertEqual(service["metadata"]["labels"]["team"], "search")
        spec = pod["spec"]
        self.assertEqual(spec["restartPolicy"], "OnFailure")
        self.assertEqual(spec["serviceAccountName"], "elasticdl")
        self.assertEqual(spec["nodeSelector"], {"pool": "training"})
        container = spec["containers"][0]
        self.assertEqual(container["image"], IMAGE)
        self.assertEqual(container["imagePullPolicy"], "IfNotPresent")
        self.assertEqual(container["command"], ["elasticdl"])
        self.assertEqual(container["args"][:2], ["master", f"--job_dir={job_dir}"])
        self.assertEqual(container["resources"], {"requests": {"cpu": "1", "memory": "1024Mi"},
                                                  "limits": {"cpu": "2", "memory": "2048Mi"}})
        env = {e["name"]: e.get("value") for e in container["env"]}
        self.assertEqual((env["A"], env["B"]), ("1", "two words"))
        self.assertEqual(spec["volumes"][0]["persistentVolumeClaim"], {"claimName": "shared"})
        self.assertEqual(container["volumeMounts"][1],
                         {"name": "volume-1", "mountPath": "/etc/ssl/certs", "readOnly": True})
        # The job's spec holds what the master needs for the other pods.
        with open(os.path.join(job_dir, "job.pbtxt")) as f:
            spec_text = f.read()
        self.assertIn('worker_priority_class: "low"', spec_text)
        self.assertIn('value: "nvidia.com/gpu"', spec_text.replace('key: "nvidia.com/gpu"',
                                                                 'value: "nvidia.com/gpu"'))

    def test_kubectl_applies_the_yaml_and_the_job_runs(self):
        """`train --yaml` then `kubectl apply -f`: kubectl creates the master's service
        and pod, and the master runs the job."""
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            self.skipTest("kubectl is not installed")
        manifest = os.path.join(self.dir, "applied.yaml")
        job_dir = os.path.join(self.dir, "job-applied")
        output = os.path.join(self.dir, "model-applied")
        self._job_dirs.append(job_dir)
        flags = {**self.kubernetes_flags(), "yaml": manifest, "num_epochs": 1,
                 "params": exactness.model_params(self.TRAIN_RECORDS, 0)}
        written = job_test.Job(self._args(job_dir, output, **flags),
                               env={"KUBECONFIG": self.client_config})
        self.assertEqual(written.wait(120), 0, written.describe())
        # The fake serves no OpenAPI document for kubectl's own validation; it
        # decodes every object strictly itself.
        applied = subprocess.run(
            [kubectl, f"--kubeconfig={self.client_config}", "apply", "--validate=false",
             "-f", manifest], capture_output=True, text=True, timeout=60)
        self.assertEqual(applied.returncode, 0, applied.stderr)
        self.assertIn("pod/elasticdl-job-applied-master created", applied.stdout)
        master = self.api.wait_for(lambda: next(
            (p for p in self.api.pods(NAMESPACE)
             if p["metadata"]["name"] == "elasticdl-job-applied-master" and
             p["status"].get("phase") in ("Succeeded", "Failed")), None), timeout=120)
        self.assertIsNotNone(master, self.api.pods(NAMESPACE))
        with open(self.api.log_path(NAMESPACE, "elasticdl-job-applied-master")) as f:
            master_log = f.read()
        self.assertEqual(master["status"]["phase"], "Succeeded", master_log)
        self.assertEqual(exactness.check_rows(output, self.TRAIN_RECORDS, 1), "", master_log)
        # The master ran its parameter server and workers as pods.
        for pod in ("ps-0", "worker-0", "worker-1"):
            self.assertTrue(os.path.exists(self.api.log_path(
                NAMESPACE, f"elasticdl-job-applied-{pod}")), pod)

    def test_rbac_example_decodes(self):
        for obj in kube_objects.load_manifests(
                os.path.join(job_test.REPO, "docs", "kubernetes", "elasticdl-rbac.yaml")):
            kube_objects.check_object(obj)

    def test_bad_flags_and_configurations(self):
        job_dir = os.path.join(self.dir, "job-bad")

        def args(**flags):
            flags = {**self.kubernetes_flags(), **flags}
            return self._args(flags.pop("job_dir", job_dir), None, **flags)

        def run(argv, env=None):
            r = subprocess.run([job_test.BIN, *argv], capture_output=True, text=True,
                               timeout=120,
                               env=dict(os.environ, ELASTICDL_CACHE_DIR=job_test.CACHE_DIR,
                                        **(env or {"KUBECONFIG": self.client_config})))
            return r.returncode, r.stderr

        outside = os.path.join(tempfile.gettempdir(), f"elasticdl-k8s-{os.getpid()}")
        self.addCleanup(shutil.rmtree, outside, True)
        cases = [
            ({"restart_policy": "Always"}, "--restart_policy=Always: expected Never or OnFailure"),
            ({"image_name": None}, "--cluster=kubernetes needs --image_name"),
            ({"job_dir": outside},
             "the job's pods would not see it"),
            ({"worker_resource_request": "cpu=many"}, "'cpu=many' is not NAME=QUANTITY"),
            ({"volume": "mount_path=/x"}, "needs one of host_path=/PATH or claim_name=NAME"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                code, err = run(args(**flags))
                self.assertNotEqual(code, 0, err)
                self.assertIn(message, err)
        self.assertIn("--yaml needs --cluster=kubernetes",
                      run(["train", "--yaml=x.yaml", "--model_zoo=z", "--model_def=m",
                           "--training_data=d"])[1])
        # Kubeconfigs that cannot work: the error names the file and what is wrong,
        # and no pod is created.
        broken = os.path.join(self.dir, "broken-kubeconfig")
        with open(broken, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: gone\n")
        wrong_token = os.path.join(self.dir, "wrong-token-kubeconfig")
        self.api.write_kubeconfig(wrong_token, auth="token", namespace=NAMESPACE)
        with open(wrong_token) as f:
            text = f.read().replace("pod-token", "stolen-token")
        with open(wrong_token, "w") as f:
            f.write(text)
        no_ca = os.path.join(self.dir, "no-ca-kubeconfig")
        with open(self.client_config) as f:
            text = f.read()
        with open(no_ca, "w") as f:
            f.write("\n".join(line for line in text.splitlines()
                              if "certificate-authority" not in line) + "\n")
        for config, message in [
                (broken, f"kubeconfig {broken}: no context 'gone'"),
                (wrong_token, "HTTP 401: Unauthorized"),
                (no_ca, "does not verify against the system's certificate authorities")]:
            with self.subTest(config=os.path.basename(config)):
                code, err = run(args(), env={"KUBECONFIG": config})
                self.assertNotEqual(code, 0, err)
                self.assertIn(message, err)
        self.assertEqual(self.api.pods(NAMESPACE), [])

    def test_zoo_image_context_without_a_builder(self):
        """`zoo build` writes the build context; with no docker, podman or buildah on
        PATH (as on this machine) it says so and where the context is."""
        context = os.path.join(self.dir, "context")
        r = subprocess.run(
            [job_test.BIN, "zoo", "build", f"--model_zoo={exactness.MODEL_ZOO}",
             f"--image={IMAGE}", "--base_image=elasticdl:base", f"--context_dir={context}"],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, ELASTICDL_CACHE_DIR=job_test.CACHE_DIR, PATH="/usr/bin:/bin"))
        if any(os.access(os.path.join(d, b), os.X_OK) for d in ("/usr/bin", "/bin")
               for b in ("docker", "podman", "buildah")):
            self.skipTest("a container builder is installed")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no container builder on PATH: install docker, podman or buildah", r.stderr)
        self.assertIn(f"the build context is ready in {context}", r.stderr)
        with open(os.path.join(context, "Dockerfile")) as f:
            dockerfile = f.read()
        self.assertIn("FROM elasticdl:base\n", dockerfile)
        self.assertIn("COPY model_zoo /model_zoo\n", dockerfile)
        self.assertTrue(os.path.exists(os.path.join(context, "model_zoo", "exactness",
                                                    "exactness.cc")))
        # The library lands where a job submitted from here names it.
        job_dir = os.path.join(self.dir, "job-yaml-zoo")
        job = job_test.Job(self._args(job_dir, None, yaml=os.path.join(self.dir, "zoo.yaml"),
                                      **self.kubernetes_flags()))
        self.assertEqual(job.wait(120), 0, job.describe())
        with open(os.path.join(job_dir, "job.pbtxt")) as f:
            library = next(line.split('"')[1] for line in f if "zoo_library:" in line)
        self.assertIn(f"COPY zoo_library/{os.path.basename(library)} {library}\n", dockerfile)

    # -- jobs ------------------------------------------------------------------

    def test_exact_job_survives_deleted_worker_ps_and_master_pods(self):
        """Three epochs of the exactness model with 2 parameter servers and 3 workers,
        scaled to 4 with `job scale`: a worker pod deleted (SIGTERM: it hands its task back), a parameter server's
        pod deleted (the master relaunches it from its checkpoint), the watch's
        history compacted (410: the backends list the pods again), and the master
        pod force-deleted (its pods go with it; the client starts a new master,
        which resumes from its journal and the checkpoints)."""
        epochs = 3
        job, job_dir, output, log = self.start_on_kubernetes(
            "exact", num_epochs=epochs, num_workers=3, num_ps_pods=2,
            worker_pod_priority="elasticdl-preemptible")
        name = os.path.basename(job_dir)
        master = f"elasticdl-{name}-master"
        self.until(job, log, lambda: log.training_done() >= 2, "two finished training tasks")
        pods = {p["metadata"]["name"]: p for p in self.api.pods(NAMESPACE)}
        self.assertEqual(sorted(pods), sorted(
            [master, f"elasticdl-{name}-ps-0", f"elasticdl-{name}-ps-1",
             f"elasticdl-{name}-worker-0", f"elasticdl-{name}-worker-1",
             f"elasticdl-{name}-worker-2"]), self.describe(job, log))
        master_uid = pods[master]["metadata"]["uid"]
        for pod in pods.values():
            if pod["metadata"]["name"] != master:
                self.assertEqual(pod["metadata"]["ownerReferences"][0]["uid"], master_uid)
            if "-worker-" in pod["metadata"]["name"]:
                self.assertEqual(pod["spec"]["priorityClassName"], "elasticdl-preemptible")

        # `job scale` as on every backend: a fourth worker pod.
        scaled = subprocess.run([job_test.BIN, "job", "scale", job_dir, "--num_workers=4"],
                                capture_output=True, text=True)
        self.assertEqual(scaled.returncode, 0, scaled.stderr + self.describe(job, log))
        self.until(job, log, lambda: len(log.of("worker_registered")) >= 4,
                   "four workers registered")
        self.wait_pod(job, log, f"elasticdl-{name}-worker-3", "a fourth worker pod")
        for service in (master, f"elasticdl-{name}-ps-0", f"elasticdl-{name}-ps-1"):
            self.assertIsNotNone(self.api.get("Service", NAMESPACE, service), service)

        # A worker pod deleted, as a drain or a preemption does: SIGTERM.
        self.api.delete("Pod", NAMESPACE, f"elasticdl-{name}-worker-1")
        self.wait_event(job, log, lambda e: e.get("event") == "worker_left" and
                        e.get("worker") == 1, "worker 1 left")
        self.wait_event(job, log, lambda e: e.get("event") == "worker_started" and
                        e.get("worker", 0) >= 4, "a worker started in its place")

        # A parameter server's pod deleted; the watch's history compacted and the
        # watches cut, so that the backends resume from an expired version.
        self.until(job, log, lambda: newest_checkpoint(job_dir, 1, 2) > 0,
                   "a checkpoint of parameter server 1")
        # Another namespace changes, the history is compacted past every version
        # the backends have seen, and their watches are cut: each resumes, gets 410
        # Gone and lists its pods again.
        self.api.registry.create("Service", "elsewhere", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "unrelated"},
            "spec": {"ports": [{"port": 80}]}})
        compacted_at = len(self.api.requests)
        self.api.compact()
        self.api.close_watches()
        for selector in ("%3Dmaster", "%21%3Dmaster"):  # the client's, the master's
            relisted = self.api.wait_for(lambda: any(
                method == "GET" and "watch" not in path and
                path.endswith("elasticdl-replica-type" + selector)
                for method, path, _ in self.api.requests[compacted_at:]), timeout=30)
            self.assertTrue(relisted, f"no list of replica-type{selector} after the 410:\n" +
                            "\n".join(p for _, p, _ in self.api.requests[compacted_at:]))
        self.api.delete("Pod", NAMESPACE, f"elasticdl-{name}-ps-1")
        self.wait_event(job, log, lambda e: e.get("event") == "ps_lost" and e.get("ps") == 1,
                        "ps_lost of parameter server 1")
        relaunched = self.wait_event(job, log, lambda e: e.get("event") == "ps_started" and
                                     e.get("ps") == 1 and e.get("relaunch"),
                                     "parameter server 1 relaunched")

        # The master pod force-deleted (a lost node): everything it owned goes.
        done = log.training_done()
        self.until(job, log, lambda: any(e["t"] >= relaunched["t"] for e in log.of("task_done")),
                   "a task finished after the relaunch")
        self.api.delete("Pod", NAMESPACE, master, grace_seconds=0)
        resumed = self.wait_event(job, log, lambda e: e.get("event") == "master_started" and
                                  e.get("resumed"), "the master restarted and resumed")
        new_master = self.wait_pod(job, log, master, "a new master pod",
                                   lambda p: p["metadata"]["uid"] != master_uid)
        self.until(job, log, lambda: any(e["t"] >= resumed["t"] for e in log.of("task_done")),
                   "a task finished after the master resumed")
        self.assertGreaterEqual(log.training_done(), done)
        self.assertExact(job, job_dir, output, log, epochs)
        # Watches resume from the version they reached.
        self.assertTrue(any("watch=true" in p and "resourceVersion=&" not in p and
                            "resourceVersion=" in p for _, p, _ in self.api.requests))
        # The finished job's pods: the new master's (kept for its logs) and its
        # processes', all ended cleanly.
        for pod in self.api.pods(NAMESPACE):
            self.assertEqual(pod["status"]["phase"], "Succeeded", pod["metadata"]["name"])
            if pod["metadata"]["name"] != master:
                self.assertEqual(pod["metadata"]["ownerReferences"][0]["uid"],
                                 new_master["metadata"]["uid"])

    def test_main_job(self):
        """The README's main job (the seed's Fashion-MNIST model, 2 workers, 1 parameter
        server) on Kubernetes, surviving a deleted worker pod, a deleted parameter-server
        pod and a force-deleted master pod; every record of both epochs trained once."""
        epochs = 2
        job_dir = os.path.join(self.dir, "job-main")
        output = os.path.join(self.dir, "model-main")
        self._job_dirs.append(job_dir)
        flags = {**self.kubernetes_flags(), "checkpoint_steps": 10}
        job = job_test.Job([
            "train", f"--model_zoo={job_test.MODEL_ZOO}", f"--model_def={job_test.FUNCTIONAL}",
            f"--training_data={self.mnist_train}", f"--validation_data={self.mnist_validation}",
            "--dataset_fn=standardized_dataset_fn", "--optimizer=adam_optimizer",
            f"--num_epochs={epochs}", "--num_workers=2", "--num_ps_pods=1",
            "--minibatch_size=64", "--num_threads=1", f"--job_dir={job_dir}",
            f"--output={output}", "--no_progress",
            *[f"--{k}={v}" for k, v in flags.items()]], env={"KUBECONFIG": self.client_config})
        self._jobs.append(job)
        log = exactness.EventLog(job_dir)
        master = "elasticdl-job-main-master"
        # A Kubernetes job's client compiles the whole zoo (its pods load the library the
        # zoo's image holds): nine files, up to 5 minutes on two loaded cores when no
        # other test has.
        self.until(job, log, lambda: log.training_done() >= 2, "two finished training tasks",
                   timeout=540)
        self.api.delete("Pod", NAMESPACE, "elasticdl-job-main-worker-0")
        self.wait_event(job, log, lambda e: e.get("event") == "worker_left", "worker 0 left")
        self.until(job, log, lambda: newest_checkpoint(job_dir, 0, 1) > 0, "a checkpoint")
        self.api.delete("Pod", NAMESPACE, "elasticdl-job-main-ps-0")
        relaunched = self.wait_event(job, log, lambda e: e.get("event") == "ps_started" and
                                     e.get("relaunch"), "parameter server 0 relaunched")
        self.until(job, log, lambda: any(e["t"] >= relaunched["t"] for e in log.of("task_done")),
                   "a task finished after the relaunch")
        self.api.delete("Pod", NAMESPACE, master, grace_seconds=0)
        self.wait_event(job, log, lambda e: e.get("event") == "master_started" and
                        e.get("resumed"), "the master restarted and resumed")
        code = job.wait(JOB_TIMEOUT)
        self.assertEqual(code, 0, self.describe(job, log))
        found = job_test.ACCURACY.findall(job.stdout)
        self.assertEqual(len(found), 1, job.describe())
        self.assertGreater(float(found[0][0]), job_test.MIN_ACCURACY, job.describe())
        records, _ = job_test.TRAINED.findall(job.stdout)[0]
        self.assertEqual(int(records), job_test.TRAIN_RECORDS * epochs, job.describe())
        self.assertRegex(job.stderr, rf"\[client\] the master ended \(pod {master} .*\); "
                                     r"restarting it \(1 of 3\)")
        with open(os.path.join(output, "trained_model.pbtxt")) as f:
            self.assertIn(f'image: "{IMAGE}"', f.read())
        self.assertNothingLeft(job_dir)


if __name__ == "__main__":
    import unittest
    unittest.main()
