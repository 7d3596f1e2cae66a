"""Scenario tests for watching a job: the dashboard in headless Chromium, the
metrics page scraped by a real Prometheus server, TensorBoard's event file read
back by a reader of the test's own, and bad requests that must not touch the job.

The dashboard speaks HTTPS with the job's certificate (the test trusts the job's
CA from its credentials file); a person logs in through a one-time link the
client prints, programs send the job's token.

Needs Debian's chromium and prometheus, and puppeteer-core in web/node_modules
(scripts/setup.sh installs them all).
"""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

import crc32c

import credentials
import job_test
from job_test import Job

REPO = job_test.REPO
BROWSER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard_browser.js")
NODE_MODULES = os.path.join(REPO, "web", "node_modules")
# Kept as the test's output (screenshots): ELASTICDL_TEST_OUTPUT, else a temporary folder.
OUTPUT_DIR = os.environ.get("ELASTICDL_TEST_OUTPUT")

EVALUATION = re.compile(r"evaluation at model version (\d+): accuracy=([0-9.]+)")

# TensorFlow's event.proto and summary.proto, as much as a scalar file uses,
# in their own nesting: compiled by protoc for this test alone.
EVENT_PROTO = """
syntax = "proto3";
package tbcheck;
message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    oneof value { float simple_value = 2; bytes obsolete_old_style_histogram = 3; }
  }
  repeated Value value = 1;
}
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what { string file_version = 3; bytes graph_def = 4; Summary summary = 5; }
}
"""


def masked_crc(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_tfrecords(path):
    """The records of a TFRecord file, both CRCs of each checked."""
    with open(path, "rb") as f:
        data = f.read()
    records, pos = [], 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked_crc(header) != length_crc:
            raise ValueError(f"{path}: bad length CRC at {pos}")
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked_crc(body) != body_crc:
            raise ValueError(f"{path}: bad data CRC at {pos}")
        records.append(body)
        pos += 16 + length
    return records


def event_module(directory):
    with open(os.path.join(directory, "tbcheck.proto"), "w") as f:
        f.write(EVENT_PROTO)
    subprocess.run(["protoc", f"--python_out={directory}", f"-I{directory}", "tbcheck.proto"],
                   check=True)
    sys.path.insert(0, directory)
    try:
        import tbcheck_pb2
    finally:
        sys.path.remove(directory)
    return tbcheck_pb2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DashboardTest(job_test.JobTestCase):

    def output_path(self, name):
        directory = OUTPUT_DIR or self.dir
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, name)

    def wait_for_file(self, job, path, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    return f.read()
            if job.proc.poll() is not None:
                job.wait(10)
                self.fail(f"the job ended before {path} appeared\n{job.describe()}")
            time.sleep(0.2)
        self.fail(f"no {path} after {timeout} s")

    def trust(self, job_dir):
        """Requests to https:// URLs from now on trust the job's CA (and only it); the
        job's credentials."""
        job = credentials.read(os.path.join(job_dir, "credentials"))
        self.tls = ssl.create_default_context(cadata=job.ca_certificate.decode())
        # The certificate names the job (credentials.SERVER_NAME), not this host.
        self.tls.check_hostname = False
        return job

    def request(self, base, path, method="GET", headers=None):
        """(status, body) of one request to the dashboard at `base` (https://host:port)."""
        u = urllib.parse.urlsplit(base)
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=10, context=self.tls)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request(method, path, headers=headers or {})
            res = conn.getresponse()
            return res.status, res.read().decode(errors="replace")
        finally:
            conn.close()

    def browser(self, url, screenshot, mode):
        proc = subprocess.Popen(
            ["node", BROWSER_SCRIPT, url, screenshot, mode], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES))
        self.addCleanup(proc.stdout.close)
        return proc

    def check_bad_requests(self, base, token):
        bearer = {"Authorization": f"Bearer {token}"}
        self.assertEqual(self.request(base, "/")[0], 401)
        self.assertEqual(self.request(base, "/api/job")[0], 401)
        self.assertEqual(self.request(base, "/metrics", headers={"Authorization": "Bearer x"})[0],
                         401)
        # The token is no login; nor is a made-up code.
        self.assertEqual(self.request(base, "/?token=" + token)[0], 401)
        self.assertEqual(self.request(base, "/?login=" + "0" * 64)[0], 401)
        # Plain HTTP to the dashboard's port is not served.
        u = urllib.parse.urlsplit(base)
        plain = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            plain.request("GET", "/api/job", headers=bearer)
            self.assertNotEqual(plain.getresponse().status, 200)
        except (http.client.HTTPException, OSError):
            pass  # the TLS server dropped it
        finally:
            plain.close()
        for path in ["/nope", "/api/nope", "/static/../token", "/static/%2e%2e%2ftoken",
                     "/static/..%2f..%2fjob.pbtxt", "/../job.pbtxt", "/static/"]:
            status, body = self.request(base, path, headers=bearer)
            self.assertEqual(status, 404, path)
            self.assertNotIn(token, body, path)
        self.assertEqual(self.request(base, "/api/job", "POST", bearer)[0], 405)
        self.assertEqual(self.request(base, "/api/events?since=x", headers=bearer)[0], 400)
        # A header far over the server's limit, and a flood of short ones: refused
        # as too large (431) once the connection's buffer is full, whatever follows.
        u = urllib.parse.urlsplit(base)
        flood = "".join(f"X-{i}: a\r\n" for i in range(200000))
        for extra in [f"X-Huge: {'h' * 100000}\r\n", flood]:
            with self.tls.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=10),
                                      server_hostname=credentials.SERVER_NAME) as s:
                try:
                    s.sendall(f"GET /api/job HTTP/1.1\r\nHost: x\r\n"
                              f"Authorization: Bearer {token}\r\n{extra}\r\n".encode())
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass  # the server answered and closed before the rest arrived
                answer = s.recv(4096)
            self.assertTrue(answer.startswith(b"HTTP/1.1 431 "), answer[:200])
        # Still serving.
        self.assertEqual(self.request(base, "/api/job", headers=bearer)[0], 200)

    def start_prometheus(self, base, job):
        """A Prometheus server scraping the dashboard's /metrics every second over
        HTTPS, trusting the job's CA and sending its token; its port."""
        u = urllib.parse.urlsplit(base)
        prom_dir = os.path.join(self.dir, "prometheus")
        os.makedirs(prom_dir)
        ca_file = os.path.join(prom_dir, "job-ca.pem")
        with open(ca_file, "wb") as f:
            f.write(job.ca_certificate)
        config = os.path.join(prom_dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: elasticdl
    honor_labels: true
    scheme: https
    tls_config:
      ca_file: {ca_file}
      server_name: {credentials.SERVER_NAME}
    authorization:
      type: Bearer
      credentials: {job.token}
    static_configs:
      - targets: ["{u.hostname}:{u.port}"]
""")
        port = free_port()
        prom = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={prom_dir}/data",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (prom.terminate(), prom.wait(30)))
        return port

    def query_prometheus(self, port, expression):
        """The result of an instant query (a list of series), [] if Prometheus cannot answer."""
        query = urllib.parse.quote(expression)
        try:
            status, body = self.request(f"http://127.0.0.1:{port}", f"/api/v1/query?query={query}")
        except OSError:
            return []
        return json.loads(body)["data"]["result"] if status == 200 else []

    def check_prometheus(self, port, job_name):
        """What Prometheus scraped while the job ran (the job has ended: the newest
        sample of each series within the last minutes)."""
        def last(metric, labels=""):
            selector = f'{metric}{{job="{job_name}"{labels}}}'
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                result = self.query_prometheus(port, f"last_over_time({selector}[10m])")
                if result:
                    return result
                time.sleep(1)
            self.fail(f"Prometheus never scraped {selector}")

        workers = last("elasticdl_workers_target")
        self.assertEqual(workers[0]["value"][1], "2")
        self.assertEqual(workers[0]["metric"]["role"], "master")
        # The workers' pushes, timed: one per minibatch of the 3 epochs at least.
        pushes = last("elasticdl_worker_rpc_seconds_count", ',rpc="push"')
        self.assertEqual(pushes[0]["metric"]["role"], "worker")
        self.assertGreater(float(pushes[0]["value"][1]), 0)
        # The parameter server's checkpoints (every 20 versions) and its bytes.
        checkpoints = last("elasticdl_ps_checkpoint_seconds_count", ',ps="0"')
        self.assertEqual(checkpoints[0]["metric"]["role"], "ps")
        self.assertGreaterEqual(float(checkpoints[0]["value"][1]), 1)
        dense = last("elasticdl_ps_dense_bytes", ',ps="0"')
        self.assertGreater(float(dense[0]["value"][1]), 100000)  # the CNN's parameters

    def test_watch_a_job_in_a_browser_prometheus_and_tensorboard(self):
        job_dir = self.job_dir("watched")
        output = self.path("model")
        # Long enough that the checks below find it running on a fast machine: on two
        # busy cores the browser has seen the kill and the replacement 9 s after the
        # start, the job ends after 25 s. Evaluations every 50 versions: four of them
        # (about 160 versions in all) for the charts and the event file.
        epochs = 5
        job = Job(self.train_args(job_dir, num_epochs=epochs, output=output, evaluation_steps=50,
                                  checkpoint_steps=20, worker_lease_ms=3000))
        self._jobs.append(job)
        base = self.wait_for_file(job, os.path.join(job_dir, "dashboard.url")).strip()
        self.assertTrue(base.startswith("https://"), base)
        secrets = self.trust(job_dir)
        token = secrets.token
        # The link the client printed: good for one login.
        url = self.wait_for_login_link(job)
        self.assertTrue(url.startswith(base + "/?login="), url)
        prometheus = self.start_prometheus(base, secrets)

        live = self.browser(url, self.output_path("dashboard-live.png"), "live")
        lines = []
        try:
            # The curve gains points; then a worker is killed.
            for line in live.stdout:
                lines.append(line.strip())
                if line.startswith("curve"):
                    break
            self.assertTrue(lines and lines[-1].startswith("curve"), f"{lines}\n{job.describe()}")
            # While the job runs: bad requests are refused and change nothing; the
            # metrics page is in Prometheus's format.
            self.check_bad_requests(base, token)
            job_name = self.check_metrics_page(base, token)
            workers = [pid for pid, argv in job_test.job_processes(job_dir).items()
                       if len(argv) > 1 and argv[1] == "worker"]
            self.assertTrue(workers, job.describe())
            os.kill(workers[0], signal.SIGKILL)
            lines += [line.strip() for line in live.stdout]
            self.assertEqual(live.wait(120), 0, f"{lines}\n{job.describe()}")
        finally:
            if live.poll() is None:
                live.kill()
        self.assertIn("status 200", lines)
        self.assertIn("lost", lines)
        self.assertIn("replaced", lines)
        self.assertIn("wrong-login 401", lines)
        self.assertFalse([line for line in lines if line.startswith("blocked")], lines)
        # The browser used the link: it opens nothing now. `job status` makes another.
        self.assertEqual(self.request(base, url[len(base):])[0], 401)
        status = subprocess.run([job_test.BIN, "job", "status", job_dir], capture_output=True,
                                text=True, timeout=60)
        again = re.search(r"^dashboard: (\S+)$", status.stdout, re.M)
        self.assertTrue(again, status.stdout + status.stderr)
        self.assertNotEqual(again.group(1), url)
        self.assertEqual(self.request(base, again.group(1)[len(base):])[0], 303)

        self.assertEqual(job.wait(job_test.JOB_TIMEOUT), 0, job.describe())
        # Nothing the client printed or logged carries the job's token.
        self.assertNotIn(token, job.stdout + job.stderr)
        logs = os.path.join(job_dir, "logs")
        for name in os.listdir(logs) if os.path.isdir(logs) else []:
            with open(os.path.join(logs, name), errors="replace") as f:
                self.assertNotIn(token, f.read(), name)
        # Every record of every epoch trained once, the killed worker's task included.
        self.assertEqual(self.trained(job)[0], job_test.TRAIN_RECORDS * epochs, job.describe())
        self.check_prometheus(prometheus, job_name)
        self.check_event_files(job, job_dir, output)
        self.check_dashboard_after_the_job(job_dir, token)

    def wait_for_login_link(self, job, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"dashboard: (https://\S+/\?login=\w+)", job.stderr)
            if found:
                return found.group(1)
            if job.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.fail(f"no login link printed\n{job.describe()}")

    def check_metrics_page(self, base, token):
        """/metrics passes `promtool check metrics`; the job's name."""
        bearer = {"Authorization": f"Bearer {token}"}
        status, body = self.request(base, "/api/job", headers=bearer)
        self.assertEqual(status, 200, body)
        status, metrics = self.request(base, "/metrics", headers=bearer)
        self.assertEqual(status, 200)
        check = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + metrics)
        self.assertIn("# TYPE elasticdl_worker_rpc_seconds histogram", metrics)
        return json.loads(body)["job"]

    def check_event_files(self, job, job_dir, output):
        """The TensorBoard file holds every loss point of the event log and every
        evaluation the job printed; the trained model's directory has a copy."""
        files = sorted(f for f in os.listdir(os.path.join(job_dir, "tensorboard"))
                       if f.startswith("events.out.tfevents."))
        self.assertEqual(len(files), 1)
        self.assertIn(files[0], os.listdir(output))
        pb = event_module(tempfile.mkdtemp(dir=self.dir))
        events = []
        for record in read_tfrecords(os.path.join(job_dir, "tensorboard", files[0])):
            e = pb.Event()
            e.ParseFromString(record)
            events.append(e)
        self.assertEqual(events[0].file_version, "brain.Event:2")
        scalars = {}
        for e in events[1:]:
            for v in e.summary.value:
                scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
        logged = job_test.logged_events(job_dir)
        losses = [(e["model_version"], e["loss"]) for e in logged
                  if e["event"] == "task_done" and "loss" in e]
        self.assertGreater(len(losses), 10)
        self.assertEqual([s for s, _ in scalars["loss"]], [v for v, _ in losses])
        for (_, got), (_, want) in zip(scalars["loss"], losses):
            self.assertAlmostEqual(got, want, places=5)
        printed = [(int(v), float(a)) for v, a in EVALUATION.findall(job.stderr)]
        self.assertGreaterEqual(len(printed), 2, job.stderr)
        self.assertEqual([s for s, _ in scalars["eval/accuracy"]], [v for v, _ in printed])
        for (_, got), (_, want) in zip(scalars["eval/accuracy"], printed):
            self.assertAlmostEqual(got, want, places=5)
        self.assertIn("records_per_second", scalars)

    def check_dashboard_after_the_job(self, job_dir, token):
        """`elasticdl dashboard JOB_DIR` serves the finished job's page from its files."""
        server = subprocess.Popen([job_test.BIN, "dashboard", job_dir], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.addCleanup(server.stderr.close)
        self.addCleanup(server.stdout.close)
        try:
            line = server.stdout.readline()
            if not line.startswith("dashboard: https://"):
                server.kill()
                self.fail(line + server.stderr.read())
            url = line.split(" ", 1)[1].strip()
            self.assertIn("/?login=", url)
            self.assertNotIn(token, url)
            base = url.split("/?", 1)[0]
            status, body = self.request(base, "/api/job",
                                        headers={"Authorization": f"Bearer {token}"})
            self.assertEqual(status, 200)
            job = json.loads(body)
            self.assertEqual(job["summary"]["state"], "finished")
            self.assertTrue(any(w["state"] == "lost" for w in job["workers"]), job["workers"])
            self.assertEqual(self.request(base, "/api/job")[0], 401)
            ended = self.browser(url, self.output_path("dashboard-ended.png"), "ended")
            out, _ = ended.communicate(timeout=120)
            self.assertEqual(ended.returncode, 0, out)
            self.assertIn("wrong-login 401", out)
            self.assertNotIn("blocked", out)
            found = re.search(r"^ended (\d+) (\d+)$", out, re.M)
            self.assertTrue(found, out)
            self.assertGreater(int(found.group(1)), 10)
            self.assertGreaterEqual(int(found.group(2)), 2)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        self.assertEqual(server.returncode, 0, server.stderr.read())


if __name__ == "__main__":
    unittest.main()
