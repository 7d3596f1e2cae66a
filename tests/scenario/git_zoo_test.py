"""Model zoos from Git URLs: --model_zoo=git://...#main, http://...#v1.

Real servers on 127.0.0.1: `git daemon`, and `git http-backend` behind an HTTP
server of this file (CGI by hand); one more HTTP server refuses everything
with 403. The repository holds model_zoo/mnist/mnist_functional_api.cc.

The test has a cache directory of its own (ELASTICDL_CACHE_DIR: fetched
commits under git/, built zoos under zoo/), because it deletes the fetched
commits.

Environment:
  ELASTICDL_BIN        the binary (default: build/bin/elasticdl of this checkout)
"""
import http.server
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import corpus

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("ELASTICDL_BIN",
                                     os.path.join(REPO, "build", "bin", "elasticdl")))
MODEL_FILE = os.path.join(REPO, "model_zoo", "mnist", "mnist_functional_api.cc")
FUNCTIONAL = "mnist.mnist_functional_api.custom_model"
TRAIN_RECORDS = 1000
PREDICT_RECORDS = 200
# A job may have to build the zoo first: about 100 s on two busy cores.
JOB_TIMEOUT = 600
FAST_FAILURE_SECONDS = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def git(*args, cwd=None):
    subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com",
                    "-c", "init.defaultBranch=main", *args],
                   cwd=cwd, check=True, capture_output=True)


def git_output(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def read_chunked(rfile):
    body = b""
    while True:
        size = int(rfile.readline().split(b";")[0].strip(), 16)
        if size == 0:
            rfile.readline()
            return body
        body += rfile.read(size)
        rfile.readline()


def http_backend_handler(project_root):
    """A request handler that runs `git http-backend` as a CGI script."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.cgi()

        def do_POST(self):
            self.cgi()

        def cgi(self):
            path, _, query = self.path.partition("?")
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = read_chunked(self.rfile)
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = dict(os.environ, GIT_PROJECT_ROOT=project_root, GIT_HTTP_EXPORT_ALL="1",
                       PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                       CONTENT_TYPE=self.headers.get("Content-Type", ""),
                       CONTENT_LENGTH=str(len(body)), REMOTE_ADDR="127.0.0.1",
                       GATEWAY_INTERFACE="CGI/1.1", SERVER_PROTOCOL="HTTP/1.0")
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run(["git", "http-backend"], input=body, env=env,
                                 capture_output=True).stdout
            end = out.find(b"\r\n\r\n")
            head, payload = ((out[:end], out[end + 4:]) if end >= 0
                             else out.partition(b"\n\n")[::2])
            status, headers = 200, []
            for line in head.decode().splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    return Handler


class RefusingHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class GitZooTest(unittest.TestCase):
    """Ordered by name: test_1 trains the model that test_5 predicts with."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="elasticdl-git-zoo-test-")
        tmp = cls._tmp.name
        cls.cache = os.path.join(tmp, "cache")
        cls.env = dict(os.environ, ELASTICDL_CACHE_DIR=cls.cache)
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        cls.train_file = os.path.join(data, "train.recordio")
        cls.predict_file = os.path.join(data, "predict.recordio")
        corpus.write_subset(cls.train_file, "train", 0, TRAIN_RECORDS)
        corpus.write_subset(cls.predict_file, "test", 0, PREDICT_RECORDS)

        # The user's working copy, pushed to a bare repository the servers share.
        cls.root = os.path.join(tmp, "srv")
        bare = os.path.join(cls.root, "models.git")
        git("init", "-q", "--bare", bare)
        cls.work = os.path.join(tmp, "work")
        os.makedirs(os.path.join(cls.work, "mnist"))
        shutil.copy(MODEL_FILE, os.path.join(cls.work, "mnist"))
        git("init", "-q", "-b", "main", cwd=cls.work)
        git("add", "-A", cwd=cls.work)
        git("commit", "-q", "-m", "mnist", cwd=cls.work)
        git("tag", "v1", cwd=cls.work)
        git("push", "-q", bare, "main", "v1", cwd=cls.work)
        cls.first = git_output("rev-parse", "HEAD", cwd=cls.work)

        cls.daemon_port = free_port()
        # git-daemon itself, not `git daemon`: that runs it as a child, which
        # would outlive a kill.
        cls.daemon = subprocess.Popen(
            [os.path.join(git_output("--exec-path"), "git-daemon"), "--reuseaddr", f"--base-path={cls.root}", "--export-all",
             f"--port={cls.daemon_port}", "--listen=127.0.0.1", cls.root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(cls.daemon_port)
        cls.git_url = f"git://127.0.0.1:{cls.daemon_port}/models.git"
        cls.http = serve(http_backend_handler(cls.root))
        cls.http_url = f"http://127.0.0.1:{cls.http.server_address[1]}/models.git"
        cls.refusing = serve(RefusingHandler)
        cls.model = os.path.join(tmp, "model")
        cls.predictions = None

    @classmethod
    def tearDownClass(cls):
        cls.daemon.kill()
        cls.daemon.wait()
        cls.http.shutdown()
        cls.refusing.shutdown()
        cls._tmp.cleanup()

    # -- helpers -------------------------------------------------------------

    def run_elasticdl(self, *args, timeout=JOB_TIMEOUT):
        start = time.monotonic()
        done = subprocess.run([BIN, *args, "--no_progress"], capture_output=True, text=True,
                              env=self.env, timeout=timeout)
        done.elapsed = time.monotonic() - start
        done.describe = (f"elasticdl {' '.join(args)}\nexit {done.returncode} after "
                         f"{done.elapsed:.1f} s\n--- stdout\n{done.stdout}--- stderr\n"
                         f"{done.stderr}")
        return done

    def job_dir(self, name):
        return os.path.join(self._tmp.name, "jobs", name)

    def train(self, model_zoo, name, *flags):
        return self.run_elasticdl(
            "train", f"--model_zoo={model_zoo}", f"--model_def={FUNCTIONAL}",
            f"--training_data={self.train_file}", "--num_epochs=1", "--num_workers=1",
            "--num_ps_pods=1", "--minibatch_size=64", "--num_minibatches_per_task=4",
            "--num_threads=1", f"--job_dir={self.job_dir(name)}", *flags)

    def predict(self, name):
        output = os.path.join(self._tmp.name, name + ".csv")
        done = self.run_elasticdl("predict", f"--trained_model={self.model}",
                                  f"--prediction_data={self.predict_file}",
                                  f"--output={output}", f"--job_dir={self.job_dir(name)}")
        self.assertSucceeded(done)
        with open(output) as f:
            return done, f.read()

    def assertSucceeded(self, done):
        self.assertEqual(done.returncode, 0, done.describe)
        self.assertNotIn("error:", done.stderr, done.describe)

    def assertFailedWith(self, done, *fragments):
        self.assertEqual(done.returncode, 1, done.describe)
        self.assertLess(done.elapsed, FAST_FAILURE_SECONDS, done.describe)
        errors = [l for l in done.stderr.splitlines() if l.startswith("error:")]
        self.assertEqual(len(errors), 1, done.describe)
        for fragment in fragments:
            self.assertIn(fragment, errors[0], done.describe)

    def assertNothingPartial(self):
        """The git cache holds published commits only: no fetch's leftovers."""
        git_cache = os.path.join(self.cache, "git")
        names = os.listdir(git_cache) if os.path.isdir(git_cache) else []
        for name in names:
            self.assertRegex(name, r"^[0-9a-f]{40}$", names)

    def record(self):
        with open(os.path.join(self.model, "trained_model.pbtxt")) as f:
            return f.read()

    # -- the cases -----------------------------------------------------------

    def test_1_train_from_git_then_predict_with_the_repository_moved_on_and_no_cache(self):
        url = self.git_url + "#main"
        done = self.train(url, "train-git", f"--output={self.model}")
        self.assertSucceeded(done)
        self.assertIn(f"model zoo {self.git_url} at {self.first}\n", done.stderr)
        record = self.record()
        self.assertIn(f'model_zoo: "{url}"', record)
        self.assertIn(f'zoo_commit: "{self.first}"', record)
        self.assertRegex(record, r'zoo_identity: "sha256:[0-9a-f]{64}"')
        with open(os.path.join(self.model, "zoo", "mnist", "mnist_functional_api.cc")) as f, \
                open(MODEL_FILE) as original:
            self.assertEqual(f.read(), original.read())
        before, predictions = self.predict("predict-before")
        self.assertIn(f"model zoo {self.git_url} at {self.first} (cached)\n", before.stderr)

        # main moves on; the user's copy and every fetched commit are gone (the zoo
        # built from them stays: the same sources, fetched again, reuse it).
        path = os.path.join(self.work, "mnist", "mnist_functional_api.cc")
        with open(path, "a") as f:
            f.write("\n// a later change\n")
        git("commit", "-q", "-am", "later", cwd=self.work)
        git("push", "-q", os.path.join(self.root, "models.git"), "main", cwd=self.work)
        shutil.rmtree(self.work)
        shutil.rmtree(os.path.join(self.cache, "git"))

        after, again = self.predict("predict-after")
        self.assertIn(f"model zoo {self.git_url} at {self.first}\n", after.stderr)
        self.assertNotIn("note:", after.stderr, after.describe)
        self.assertEqual(again, predictions)
        self.assertTrue(os.path.isdir(os.path.join(self.cache, "git", self.first)))
        type(self).predictions = predictions

    def test_2_train_over_http_at_a_tag(self):
        # The sources of v1 are those test_1 built: the built zoo is reused.
        done = self.train(self.http_url + "#v1", "train-http")
        self.assertSucceeded(done)
        self.assertIn(f"model zoo {self.http_url} at {self.first}\n", done.stderr)
        self.assertIn(f"trained {TRAIN_RECORDS} records", done.stdout, done.describe)

    def test_3_a_ref_that_does_not_exist(self):
        url = self.git_url + "#no-such-branch"
        done = self.train(url, "train-missing-ref")
        self.assertFailedWith(done, f"--model_zoo={url}", "'no-such-branch'", "branches: main",
                              "tags: v1")
        self.assertNothingPartial()

    def test_4_servers_that_refuse_or_are_not_there(self):
        refusing = f"http://127.0.0.1:{self.refusing.server_address[1]}/models.git"
        done = self.train(refusing, "train-403")
        self.assertFailedWith(done, f"--model_zoo={refusing}", "403")
        nobody = f"git://127.0.0.1:{free_port()}/models.git"
        done = self.train(nobody, "train-refused")
        self.assertFailedWith(done, f"--model_zoo={nobody}", "Connection refused")
        done = self.train("ftp://127.0.0.1/models.git", "train-ftp")
        self.assertFailedWith(done, "--model_zoo=ftp://127.0.0.1/models.git",
                              "scheme 'ftp' is not supported")
        self.assertNothingPartial()

    def test_5_predict_uses_the_trained_models_copy_when_the_server_is_gone(self):
        if self.predictions is None:
            self.skipTest("test_1 trained no model")
        self.daemon.kill()
        self.daemon.wait()
        shutil.rmtree(os.path.join(self.cache, "git"))
        done, predictions = self.predict("predict-offline")
        notes = [l for l in done.stderr.splitlines() if l.startswith("note:")]
        self.assertEqual(len(notes), 1, done.describe)
        self.assertRegex(notes[0], rf"^note: model zoo {re.escape(self.git_url)}#main at "
                         rf"{self.first} cannot be fetched \(.*\); using the copy in "
                         rf"{re.escape(self.model)}/zoo$")
        self.assertEqual(predictions, self.predictions)


if __name__ == "__main__":
    unittest.main()
