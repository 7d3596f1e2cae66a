"""Tests of the fake Kubernetes API server (fake_kube.py) and of the object
checks (kube_objects.py), driven by the official client (python3-kubernetes):
the fake must answer what a real API server answers, or the scenario tests of
the Kubernetes backend would prove nothing.

Fast (a few seconds): pods are `sh -c` scripts.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

import fake_kube
import kube_objects

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "s3cret-token"
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp/fake-home"}
# Pod scripts that say "ready" once their trap is set: one that leaves at once,
# with status 0, on SIGTERM, and one that ignores SIGTERM.
POLITE = "trap 'echo bye; exit 0' TERM; echo ready; sleep 30 & wait"
STUBBORN = "trap '' TERM; echo ready; sleep 30"


def pod_manifest(name, script, labels=None, **spec):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "main", "image": "debian:12",
                                     "command": ["sh", "-c", script]}], **spec}}


def owned_by(manifest, owner):
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": owner.metadata.name,
         "uid": owner.metadata.uid, "controller": True, "blockOwnerDeletion": True}]
    return manifest


def terminated(pod):
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


def poll(condition, timeout=10.0):
    """Polls `condition` until it returns a true value (for files and
    processes, which the fake does not signal); returns that value."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {condition}")
        time.sleep(0.02)
    return value


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def close(api):
    """Closes a client's connections (ApiClient.close() leaves its pool's)."""
    api.api_client.close()
    api.api_client.rest_client.pool_manager.clear()


def api_error(call, *args, **kwargs):
    """The ApiException a call raises, with its body decoded as `status_body`."""
    try:
        call(*args, **kwargs)
    except ApiException as e:
        e.status_body = json.loads(e.body) if e.body else None
        return e
    raise AssertionError(f"{call.__name__} did not fail")


class FakeKubeTest(unittest.TestCase):
    """Against one HTTPS server that accepts a token and its client certificate;
    every test works in a namespace of its own."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="fake-kube-test-")
        cls.fake = fake_kube.FakeKubeApiServer(cls.dir.name, tls=True, token=TOKEN,
                                               base_env=BASE_ENV, restart_backoff_seconds=0.2)
        cls.fake.start()
        cls.api = cls.core_api("token")

    @classmethod
    def tearDownClass(cls):
        close(cls.api)
        cls.fake.stop()
        cls.dir.cleanup()

    @classmethod
    def core_api(cls, auth, inline=True):
        """A CoreV1Api from a kubeconfig the fake wrote (loaded into a
        configuration of its own: tests share no global one)."""
        path = os.path.join(cls.dir.name, f"kubeconfig-{auth}-{inline}")
        cls.fake.write_kubeconfig(path, auth, inline=inline)
        configuration = client.Configuration()
        config.load_kube_config(config_file=path, client_configuration=configuration)
        return client.CoreV1Api(client.ApiClient(configuration))

    def setUp(self):
        self.ns = self._testMethodName.replace("_", "-")

    def other_api(self, auth, inline=True):
        api = self.core_api(auth, inline)
        self.addCleanup(close, api)
        return api

    def create(self, manifest):
        return self.api.create_namespaced_pod(self.ns, manifest)

    def pod(self, name):
        return self.fake.get("Pod", self.ns, name)

    def wait_phase(self, name, *phases):
        def phase():
            return ((self.pod(name) or {}).get("status") or {}).get("phase")
        self.assertTrue(self.fake.wait_for(lambda: phase() in phases),
                        f"{name} never reached {phases}: {self.pod(name)}")
        return self.pod(name)

    def start(self, name, script):
        """Creates a pod running `script` and waits until it says "ready"; its
        resource version at creation."""
        created = self.create(pod_manifest(name, script))
        poll(lambda: "ready" in read(self.fake.log_path(self.ns, name)))
        return created.metadata.resource_version

    def wait_gone(self, name):
        self.assertTrue(self.fake.wait_for(lambda: self.pod(name) is None), self.pod(name))

    def events_until_deleted(self, name, since, timeout=10):
        """(type, object) of a pod's watch events from `since` until it is deleted."""
        events, w = [], watch.Watch()
        for event in w.stream(self.api.list_namespaced_pod, self.ns, resource_version=since,
                              field_selector=f"metadata.name={name}", timeout_seconds=timeout):
            events.append((event["type"], event["raw_object"]))
            if event["type"] == "DELETED":
                w.stop()
        self.assertEqual(events[-1][0], "DELETED", events)
        return events

    def final_state(self, name, since):
        """The pod as its DELETED event carries it."""
        return self.events_until_deleted(name, since)[-1][1]

    # ---- authentication

    def test_token_over_tls(self):
        self.assertEqual(self.api.list_namespaced_pod(self.ns).items, [])
        self.assertIn(("GET", f"/api/v1/namespaces/{self.ns}/pods", 200), self.fake.requests)

    def test_client_certificate_inline_and_as_files(self):
        for inline in (True, False):
            api = self.other_api("cert", inline=inline)
            self.assertEqual(api.list_namespaced_service(self.ns).kind, "ServiceList")

    def test_no_credentials_is_401(self):
        error = api_error(self.other_api("none").list_namespaced_pod, self.ns)
        self.assertEqual(error.status, 401)
        self.assertEqual(error.status_body, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401})

    # ---- pods as processes

    def test_pod_runs_with_field_refs_and_expansion(self):
        manifest = pod_manifest("envy", 'echo "cmd=$(MY_IP)"; echo "greeting=$GREETING"; '
                                        'echo "host=$HOSTNAME home=$HOME"; '
                                        'echo "api=$KUBERNETES_SERVICE_PORT"; sleep 30')
        manifest["spec"]["containers"][0]["env"] = [
            {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "GREETING", "value": "at $(MY_IP) $$(MY_IP) $(NOPE) $(LATER)"},
            {"name": "LATER", "value": "late"}]
        created = self.create(manifest)
        self.assertEqual(created.status.phase, "Pending")
        ip = created.status.pod_ip
        self.assertRegex(ip, r"^127\.0\.\d+\.\d+$")
        pod = self.wait_phase("envy", "Running")
        status = pod["status"]["containerStatuses"][0]
        self.assertEqual((status["name"], status["ready"], status["restartCount"]),
                         ("main", True, 0))
        self.assertIn("running", status["state"])
        self.assertEqual(pod["spec"]["nodeName"], "fake-node")
        self.assertIsNotNone(self.fake.pid_of(self.ns, "envy"))
        log_path = self.fake.log_path(self.ns, "envy")
        log = poll(lambda: "api=" in read(log_path) and read(log_path))
        self.assertEqual(log.splitlines(), [
            f"cmd={ip}",
            f"greeting=at {ip} $(MY_IP) $(NOPE) $(LATER)",
            "host=envy home=/tmp/fake-home",
            f"api={self.fake.port}"])

    def test_duplicate_name_is_409(self):
        self.create(pod_manifest("twin", "sleep 30"))
        error = api_error(self.create, pod_manifest("twin", "sleep 30"))
        self.assertEqual(
            (error.status, error.status_body["reason"], error.status_body["message"]),
            (409, "AlreadyExists", 'pods "twin" already exists'))

    def test_exit_with_restart_policy_never_fails(self):
        self.create(pod_manifest("quitter", "exit 3", restartPolicy="Never"))
        pod = self.wait_phase("quitter", "Succeeded", "Failed")
        self.assertEqual((pod["status"]["phase"], terminated(pod)["exitCode"],
                          terminated(pod)["reason"]), ("Failed", 3, "Error"))

    def test_exit_with_restart_policy_on_failure_restarts(self):
        self.create(pod_manifest("phoenix", "sleep 0.1; exit 1", restartPolicy="OnFailure"))

        def status():
            return self.pod("phoenix")["status"]["containerStatuses"][0]
        self.assertTrue(self.fake.wait_for(lambda: status()["restartCount"] >= 2))
        self.assertEqual(status()["lastState"]["terminated"]["exitCode"], 1)

    def test_missing_executable_is_a_start_error(self):
        manifest = pod_manifest("lost", "", restartPolicy="Never")
        manifest["spec"]["containers"][0]["command"] = ["no-such-program"]
        self.create(manifest)
        state = terminated(self.wait_phase("lost", "Failed"))
        self.assertEqual((state["exitCode"], state["reason"]), (128, "StartError"))
        self.assertIn('exec: "no-such-program": executable file not found in $PATH',
                      state["message"])

    # ---- lists and watches

    def test_list_with_selectors(self):
        for name, labels in (("a1", {"app": "a", "tier": "x"}), ("a2", {"app": "a"}),
                             ("b1", {"app": "b"}), ("n1", {})):
            self.create(pod_manifest(name, "sleep 30", labels))
        for name in ("a1", "a2", "b1", "n1"):
            # Running: the lists below see them as they stay.
            self.wait_phase(name, "Running")

        def names(**selectors):
            found = self.api.list_namespaced_pod(self.ns, **selectors)
            return sorted(p.metadata.name for p in found.items)
        self.assertEqual(names(label_selector="app=a"), ["a1", "a2"])
        self.assertEqual(names(label_selector="app==a,tier=x"), ["a1"])
        self.assertEqual(names(label_selector="app!=a"), ["b1", "n1"])
        self.assertEqual(names(label_selector="app"), ["a1", "a2", "b1"])
        self.assertEqual(names(label_selector="!app"), ["n1"])
        self.assertEqual(names(field_selector="metadata.name=b1"), ["b1"])
        # A list carries the store's resource version when it was made. Other tests'
        # pods share the server and may change meanwhile (a "sleep 30" ends), so that
        # version lies between the store's before the call and after it.
        before = int(self.fake.resource_version)
        raw = json.loads(self.api.list_namespaced_pod(self.ns, _preload_content=False).data)
        after = int(self.fake.resource_version)
        self.assertEqual(raw["kind"], "PodList")
        self.assertGreaterEqual(int(raw["metadata"]["resourceVersion"]), before)
        self.assertLessEqual(int(raw["metadata"]["resourceVersion"]), after)
        self.assertNotIn("kind", raw["items"][0])  # as in the real server's lists

    def test_watch_from_a_resource_version(self):
        created = self.create(pod_manifest("watched", "sleep 30"))
        self.wait_phase("watched", "Running")
        self.api.delete_namespaced_pod("watched", self.ns, grace_period_seconds=0)
        events = self.events_until_deleted("watched", created.metadata.resource_version)
        self.assertEqual([t for t, _ in events], ["MODIFIED"] * (len(events) - 1) + ["DELETED"])
        versions = [int(o["metadata"]["resourceVersion"]) for _, o in events]
        self.assertEqual(versions, sorted(versions))
        self.assertGreater(versions[0], int(created.metadata.resource_version))

    def test_watch_without_version_starts_with_added(self):
        self.create(pod_manifest("existing", "sleep 30"))
        stream = watch.Watch().stream(self.api.list_namespaced_pod, self.ns, timeout_seconds=2)
        first = next(stream)
        stream.close()
        self.assertEqual((first["type"], first["object"].metadata.name), ("ADDED", "existing"))

    def test_watch_from_a_compacted_version_is_410(self):
        since = self.create(pod_manifest("old", "sleep 30")).metadata.resource_version
        self.wait_phase("old", "Running")
        self.fake.compact()
        # On the wire: 200, then one ERROR event carrying a 410 Expired Status.
        response = self.api.list_namespaced_pod(self.ns, watch=True, resource_version=since,
                                                _preload_content=False)
        self.assertEqual(response.status, 200)
        lines = response.data.decode().splitlines()
        self.assertEqual(len(lines), 1)
        event = json.loads(lines[0])
        self.assertEqual((event["type"], event["object"]["code"], event["object"]["reason"]),
                         ("ERROR", 410, "Expired"))
        self.assertRegex(event["object"]["message"], r"^too old resource version: \d+ \(\d+\)$")
        # The client library turns that event into an ApiException 410.
        with self.assertRaises(ApiException) as raised:
            list(watch.Watch().stream(self.api.list_namespaced_pod, self.ns,
                                      resource_version=since, timeout_seconds=2))
        self.assertEqual(raised.exception.status, 410)

    def test_close_watches_ends_the_streams(self):
        stream = watch.Watch().stream(self.api.list_namespaced_pod, self.ns, timeout_seconds=30)
        thread = threading.Thread(target=list, args=(stream,))
        thread.start()
        self.assertTrue(self.fake.wait_for(lambda: any(
            "watch=True" in path and self.ns in path for _, path, _ in self.fake.requests)))
        self.fake.close_watches()
        thread.join(5)
        self.assertFalse(thread.is_alive())

    # ---- deletion

    def test_graceful_delete_sends_sigterm(self):
        since = self.start("polite", POLITE)
        deleted = self.api.delete_namespaced_pod("polite", self.ns)
        self.assertIsNotNone(deleted.metadata.deletion_timestamp)
        self.assertEqual(deleted.metadata.deletion_grace_period_seconds, 30)
        final = self.final_state("polite", since)
        self.assertEqual((final["status"]["phase"], terminated(final)["exitCode"],
                          terminated(final)["reason"]), ("Succeeded", 0, "Completed"))
        self.assertIn("bye", read(self.fake.log_path(self.ns, "polite")))

    def test_sigkill_after_the_grace_period(self):
        since = self.start("stubborn", STUBBORN)
        start = time.monotonic()
        self.api.delete_namespaced_pod("stubborn", self.ns, grace_period_seconds=1)
        final = self.final_state("stubborn", since)
        self.assertGreaterEqual(time.monotonic() - start, 1)
        self.assertEqual((terminated(final)["exitCode"], terminated(final)["signal"]),
                         (137, signal.SIGKILL))

    def test_force_delete_kills_at_once(self):
        since = self.start("doomed", STUBBORN)
        pid = self.fake.pid_of(self.ns, "doomed")
        self.api.delete_namespaced_pod("doomed", self.ns,
                                       body=client.V1DeleteOptions(grace_period_seconds=0))
        self.assertEqual(api_error(self.api.read_namespaced_pod, "doomed", self.ns).status, 404)
        self.assertRaises(ProcessLookupError, os.kill, pid, 0)
        final = self.final_state("doomed", since)
        self.assertEqual((final["status"]["phase"], terminated(final)["exitCode"],
                          terminated(final)["signal"]), ("Failed", 137, 9))

    def test_deleting_a_finished_pod_removes_it_at_once(self):
        self.create(pod_manifest("done", "true", restartPolicy="Never"))
        self.wait_phase("done", "Succeeded")
        self.api.delete_namespaced_pod("done", self.ns)
        self.assertIsNone(self.pod("done"))

    def test_delete_missing_is_404(self):
        error = api_error(self.api.delete_namespaced_pod, "ghost", self.ns)
        self.assertEqual((error.status, error.status_body["message"]),
                         (404, 'pods "ghost" not found'))

    def test_delete_precondition_is_409(self):
        self.create(pod_manifest("guarded", "sleep 30"))
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other"))
        error = api_error(self.api.delete_namespaced_pod, "guarded", self.ns, body=options)
        self.assertEqual((error.status, error.status_body["reason"]), (409, "Conflict"))
        self.assertIn("Precondition failed: UID in precondition: other",
                      error.status_body["message"])

    # ---- garbage collection

    def test_owned_pod_is_collected_with_its_owner(self):
        owner = self.create(pod_manifest("owner", "sleep 30"))
        self.create(owned_by(pod_manifest("dependent", POLITE), owner))
        self.wait_phase("dependent", "Running")
        self.api.delete_namespaced_pod("owner", self.ns, grace_period_seconds=0)
        self.wait_gone("dependent")

    def test_foreground_deletion_waits_for_dependents(self):
        owner = self.create(pod_manifest("boss", "sleep 30"))
        self.create(owned_by(pod_manifest("worker", "trap 'sleep 0.3; exit 0' TERM; "
                                                    "echo ready; sleep 30 & wait"), owner))
        poll(lambda: "ready" in read(self.fake.log_path(self.ns, "worker")))
        deleted = self.api.delete_namespaced_pod("boss", self.ns, grace_period_seconds=0,
                                                 propagation_policy="Foreground")
        self.assertEqual(deleted.metadata.finalizers, ["foregroundDeletion"])
        self.assertIsNotNone(self.pod("boss"))  # until the worker is gone
        self.wait_gone("boss")
        self.assertIsNone(self.pod("worker"))

    def test_pod_with_a_missing_owner_is_collected(self):
        orphan = pod_manifest("orphan", "sleep 30")
        orphan["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "gone",
             "uid": "00000000-0000-0000-0000-000000000000"}]
        self.create(orphan)
        self.wait_gone("orphan")

    def test_orphan_propagation_keeps_dependents(self):
        owner = self.create(pod_manifest("parent", "sleep 30"))
        self.create(owned_by(pod_manifest("child", "sleep 30"), owner))
        self.fake.delete("Pod", self.ns, "parent", grace_seconds=0, propagation="Orphan")
        self.assertIsNone(self.pod("parent"))
        time.sleep(0.2)  # time for the garbage collector to do the wrong thing
        self.assertEqual(self.pod("child")["metadata"]["ownerReferences"], [])

    # ---- validation

    def test_unknown_field_is_refused(self):
        manifest = pod_manifest("sloppy", "sleep 30")
        manifest["spec"]["containers"][0]["bogus"] = 1
        error = api_error(self.create, manifest)
        self.assertEqual((error.status, error.status_body["reason"]), (400, "BadRequest"))
        self.assertIn("unknown field 'bogus' in V1Container", error.status_body["message"])

    def test_invalid_pods_are_422(self):
        no_image = pod_manifest("plain", "sleep 30")
        del no_image["spec"]["containers"][0]["image"]
        error = api_error(self.create, no_image)
        self.assertEqual(
            (error.status, error.status_body["reason"], error.status_body["message"]),
            (422, "Invalid", 'Pod "plain" is invalid: spec.containers[0].image: Required value'))
        no_name = pod_manifest("anonymous", "sleep 30")
        del no_name["spec"]["containers"][0]["name"]
        self.assertIn("spec.containers[0].name",
                      api_error(self.create, no_name).status_body["message"])
        self.assertIn("RFC 1123 subdomain", api_error(
            self.create, pod_manifest("Bad_Name", "sleep 30")).status_body["message"])

    def test_what_the_fake_cannot_run_is_422(self):
        two = pod_manifest("two", "sleep 30")
        two["spec"]["containers"].append({"name": "side", "image": "x", "command": ["true"]})
        volume = pod_manifest("volume", "sleep 30", volumes=[{"name": "v", "emptyDir": {}}])
        moved = pod_manifest("moved", "sleep 30",
                             volumes=[{"name": "v", "hostPath": {"path": "/tmp"}}])
        moved["spec"]["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/data"}]
        for manifest in (two, volume, moved):
            error = api_error(self.create, manifest)
            self.assertEqual(error.status, 422)
            self.assertIn("a limitation of the fake API server", error.status_body["message"])

    def test_services(self):
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                   "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}}
        created = self.api.create_namespaced_service(self.ns, service)
        self.assertRegex(created.spec.cluster_ip, r"^10\.96\.\d+\.\d+$")
        self.assertEqual(created.spec.ports[0].target_port, 80)
        service["metadata"]["name"], service["spec"]["clusterIP"] = "headless", "None"
        headless = self.api.create_namespaced_service(self.ns, service)
        self.assertEqual(headless.spec.cluster_ip, "None")
        service["metadata"]["name"] = "1svc"
        error = api_error(self.api.create_namespaced_service, self.ns, service)
        self.assertEqual(error.status, 422)
        self.api.delete_namespaced_service("svc", self.ns)
        self.assertEqual(api_error(self.api.read_namespaced_service, "svc", self.ns).status, 404)


class PlainHttpTest(unittest.TestCase):
    """Raw requests to a plain-HTTP server that accepts anyone."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="fake-kube-http-")
        cls.fake = fake_kube.FakeKubeApiServer(cls.dir.name, base_env=BASE_ENV).start()

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()
        cls.dir.cleanup()

    def request(self, method, path, body=None, port=None):
        connection = http.client.HTTPConnection("127.0.0.1", port or self.fake.port, timeout=10)
        try:
            connection.request(method, path, body=body,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def test_discovery(self):
        self.assertEqual(self.request("GET", "/api")[1]["versions"], ["v1"])
        resources = self.request("GET", "/api/v1")[1]["resources"]
        self.assertEqual([r["name"] for r in resources], ["pods", "services"])
        self.assertEqual(self.request("GET", "/version")[1]["major"], "1")

    def test_errors_are_statuses(self):
        for method, path, body, code, reason in (
                ("POST", "/api/v1/namespaces/x/pods", "{not json", 400, "BadRequest"),
                ("GET", "/api/v1/namespaces/x/widgets", None, 404, "NotFound"),
                ("PUT", "/api/v1/namespaces/x/pods/p", "{}", 405, "MethodNotAllowed"),
                ("GET", "/api/v1/pods?labelSelector=a+in+(b)", None, 400, "BadRequest")):
            status, data = self.request(method, path, body)
            self.assertEqual((status, data["kind"], data["reason"], data["code"]),
                             (code, "Status", reason, code), (method, path))

    def test_namespace_mismatch_is_400(self):
        pod = pod_manifest("p", "sleep 1")
        pod["metadata"]["namespace"] = "other"
        status, data = self.request("POST", "/api/v1/namespaces/x/pods", json.dumps(pod))
        self.assertEqual((status, data["reason"]), (400, "BadRequest"))

    def test_command_line(self):
        port_file = os.path.join(self.dir.name, "port")
        server = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_kube.py"), "--port-file", port_file,
             "--work-dir", os.path.join(self.dir.name, "cli")], stdout=subprocess.DEVNULL)
        try:
            port = int(poll(lambda: read(port_file)))
            self.assertEqual(self.request("GET", "/version", port=port)[0], 200)
        finally:
            server.send_signal(signal.SIGTERM)
            self.assertEqual(server.wait(10), 0)


class KubeObjectsTest(unittest.TestCase):

    def test_accepts_valid_objects(self):
        pod = pod_manifest("ok", "true")
        pod["spec"]["containers"][0].update(
            ports=[{"containerPort": 8080}], resources={"limits": {"cpu": 1, "memory": "1Gi"}})
        self.assertEqual(kube_objects.check_object(pod).spec.containers[0].name, "main")
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"ports": [{"port": 80, "targetPort": "http"}]}}
        kube_objects.check_object(service)

    def test_refuses_an_unknown_nested_field(self):
        pod = pod_manifest("bad", "true")
        pod["spec"]["containers"][0]["bogus"] = True
        with self.assertRaisesRegex(
                kube_objects.DecodeError,
                r"^spec\.containers\[0\]: unknown field 'bogus' in V1Container$"):
            kube_objects.check_object(pod)

    def test_refuses_wrong_types_and_missing_required_fields(self):
        pod = pod_manifest("bad", "true")
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": "80"}]
        with self.assertRaisesRegex(kube_objects.DecodeError,
                                    r"containerPort: expected an integer"):
            kube_objects.check_object(pod)
        del pod["spec"]["containers"][0]["name"]
        pod["spec"]["containers"][0]["ports"] = []
        with self.assertRaisesRegex(kube_objects.InvalidError,
                                    r"^spec\.containers\[0\]\.name: missing required field"):
            kube_objects.check_object(pod)

    def test_manifest_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n---\n"
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\n"
                    "rules: [{apiGroups: [''], resources: [pods], verbs: [get], colour: red}]\n")
            f.flush()
            self.assertEqual(len(kube_objects.load_manifests(f.name)), 2)
            with self.assertRaisesRegex(ValueError,
                                        r"document 2: rules\[0\]: unknown field 'colour'"):
                kube_objects.check_manifest_file(f.name)


if __name__ == "__main__":
    unittest.main()
