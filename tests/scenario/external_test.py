"""Scenario tests of `--cluster=external`: workers on other hosts join a job.

Hosts are network namespaces this test creates (and removes): one holds the
master and its parameter server, two others hold workers, each with an
address of its own on a bridge inside the master's namespace (10.211.0.0/24:
.1 the master's host, .2 and .3 the workers' hosts). Nothing in them can
reach 127.0.0.1 of another, so a worker that gets anywhere reached the
master through the address the job advertised. The job directory and data
are on this machine's filesystem, which all namespaces share, as a Slurm
cluster's hosts share their storage.

Workers are handed a copy of the job's credentials file (its certificate, key
and token); the job's servers refuse callers without them: plaintext, another
job's certificate, no token (a 900 MB request among them, refused before it is
read).

Needs root (ip netns). Exactness jobs train tests/zoo/exactness (see
exactness.py).
"""
import os
import shutil
import signal
import subprocess
import time
import unittest

import grpc

import credentials
import exactness
import job_test
from exact_jobs import ExactJobCase

TRAIN_RECORDS = ExactJobCase.TRAIN_RECORDS
VALIDATION_RECORDS = ExactJobCase.VALIDATION_RECORDS
JOB_TIMEOUT = 240

SUFFIX = str(os.getpid())
MASTER_NS, HOST_A, HOST_B = (f"edl-m-{SUFFIX}", f"edl-a-{SUFFIX}", f"edl-b-{SUFFIX}")
MASTER_IP, IP_A, IP_B = "10.211.0.1", "10.211.0.2", "10.211.0.3"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def netns(ns):
    return ["ip", "netns", "exec", ns]


# The exactness model as a Python model file (tests/zoo/exactness/python_exactness.py).
PYTHON_MODEL = "exactness.python_exactness.Exactness"


class ExternalTest(ExactJobCase):
    FLAGS = {"cluster": "external", "master_addr": f"{MASTER_IP}:0", "num_workers": 3,
             "worker_lease_ms": 2000}
    WARM_UP_FLAGS = {"cluster": "local", "master_addr": None, "worker_lease_ms": None}

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise AssertionError("external_test creates network namespaces: run it as root")
        cls._namespaces = []
        try:
            for ns in (MASTER_NS, HOST_A, HOST_B):
                ip("netns", "add", ns)
                cls._namespaces.append(ns)
                ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", MASTER_NS, "link", "add", "br0", "type", "bridge")
            ip("-n", MASTER_NS, "addr", "add", f"{MASTER_IP}/24", "dev", "br0")
            ip("-n", MASTER_NS, "link", "set", "br0", "up")
            for ns, addr, name in ((HOST_A, IP_A, "va"), (HOST_B, IP_B, "vb")):
                ip("-n", MASTER_NS, "link", "add", name + "-br", "type", "veth", "peer", "name",
                   name, "netns", ns)
                ip("-n", MASTER_NS, "link", "set", name + "-br", "master", "br0", "up")
                ip("-n", ns, "addr", "add", f"{addr}/24", "dev", name)
                ip("-n", ns, "link", "set", name, "up")
        except subprocess.CalledProcessError as e:
            cls.remove_namespaces()
            raise AssertionError(f"setting up namespaces: {e.cmd}: {e.stderr}") from e
        super().setUpClass()

    @classmethod
    def remove_namespaces(cls):
        for ns in cls._namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.remove_namespaces()
        super().tearDownClass()

    def start_master(self, name, **flags):
        return self.start(name, prefix=netns(MASTER_NS), **flags)

    def join(self, ns, address, credentials_file, *flags):
        worker = job_test.Job(["worker", f"--master={address}",
                               f"--credentials_file={credentials_file}", *flags], prefix=netns(ns))
        self._jobs.append(worker)
        return worker

    def describe(self, job, log, workers=()):
        return "\n".join([super().describe(job, log)] + [w.describe() for w in workers])

    def master_address(self, job, job_dir, log):
        path = os.path.join(job_dir, "master.addr")

        def read():
            try:
                with open(path) as f:
                    return f.read()
            except FileNotFoundError:
                return None
        return self.until(job, log, read, "the master's address")

    def test_workers_on_two_hosts_one_host_lost(self):
        self.two_hosts_one_lost("two-hosts")

    def test_python_model_on_two_hosts_one_host_lost(self):
        """The same with the Python exactness model: its workers import it on their hosts."""
        self.two_hosts_one_lost("py-two-hosts", model_def=PYTHON_MODEL)

    def test_allreduce_on_two_hosts_one_host_lost(self):
        """AllreduceStrategy across hosts: the workers' Gloo connections cross the network
        namespaces; host A's two workers die at once, the survivor goes on alone, and a
        worker joining later receives the model from it."""
        self.two_hosts_one_lost("ar-two-hosts", distribution_strategy="AllreduceStrategy",
                                num_ps_pods=None)

    def two_hosts_one_lost(self, name, **flags):
        job, job_dir, output, log = self.start_master(name, **flags)
        address = self.master_address(job, job_dir, log)
        self.assertTrue(address.startswith(MASTER_IP + ":"), address)
        # The workers' hosts are handed a copy of the job's credentials (0600, as
        # the worker takes only a file no other user may read).
        token = os.path.join(self.dir, f"{name}-credentials")
        shutil.copyfile(os.path.join(job_dir, "credentials"), token)
        os.chmod(token, 0o600)
        a = [self.join(HOST_A, address, token) for _ in range(2)]
        # Two joined: the job waits for the third before handing out tasks.
        self.until(job, log, lambda: len(log.of("worker_joined")) == 2, "two workers joined")
        time.sleep(1)
        log.poll()
        self.assertEqual(log.of("task_dispatched"), [], self.describe(job, log))
        b = self.join(HOST_B, address, token)
        joined = self.until(job, log, lambda: len(log.of("worker_joined")) == 3 and
                            log.of("worker_joined"), "three workers joined")
        hosts = {e["worker"]: e.get("pid") for e in joined}
        self.assertEqual(len(hosts), 3)
        self.until(job, log, lambda: log.training_done() >= 6, "training under way")
        # Host A is lost: both its workers die at once.
        lost_at = time.time()
        for w in a:
            w.proc.send_signal(signal.SIGKILL)
        def lost_since():
            lost = [e for e in log.of("worker_lost") if e["t"] >= lost_at]
            return lost if len(lost) >= 2 else None
        lost = self.until(job, log, lost_since, "host A's workers taken as lost")
        self.assertTrue(all(e.get("how") == "lease expired" for e in lost), lost)
        # A worker may join later, from the same host, once it is back.
        late = self.join(HOST_A, address, token)
        code = job.wait(JOB_TIMEOUT)
        self.assertEqual(code, 0, self.describe(job, log, [b, late]))
        for w in (b, late):
            self.assertEqual(w.wait(30), 0, w.describe())
        log.poll()
        self.assertEqual(exactness.check_rows(output, TRAIN_RECORDS, 2), "",
                         self.describe(job, log))
        self.assertEqual(exactness.check_metrics(job.stdout, VALIDATION_RECORDS, 2), "",
                         self.describe(job, log))
        self.assertIn(f"workers join with: elasticdl worker --master={address} "
                      f"--credentials_file={job_dir}/credentials", job.stderr)
        self.assertEqual(job_test.job_processes(job_dir), {})

    def test_unreachable_master(self):
        token = os.path.join(self.dir, "credentials")
        credentials.write_other_job(token)
        worker = self.join(HOST_B, f"{MASTER_IP}:1", token, "--wait_for_master=3")
        code = worker.wait(30)
        self.assertIsNotNone(code, "the worker hung")
        self.assertEqual(code, 1, worker.describe())
        self.assertLess(worker.elapsed, 15, worker.describe())
        self.assertIn(f"cannot reach the master at {MASTER_IP}:1", worker.stdout)

    def test_another_jobs_credentials_are_refused(self):
        job, job_dir, _, log = self.start_master("wrong-credentials", num_workers=1)
        address = self.master_address(job, job_dir, log)
        others = os.path.join(self.dir, "other-credentials")
        credentials.write_other_job(others)
        worker = self.join(HOST_A, address, others)
        self.assertEqual(worker.wait(30), 1, worker.describe())
        self.assertLess(worker.elapsed, 15, worker.describe())
        self.assertIn("refused the TLS handshake", worker.stdout)
        # The old token file: told what to pass instead.
        bare = os.path.join(self.dir, "token")
        with os.fdopen(os.open(bare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write("f" * 64)
        worker = self.join(HOST_A, address, bare)
        self.assertEqual(worker.wait(30), 1, worker.describe())
        self.assertIn("pass the job's credentials file", worker.stdout)
        # This job's own credentials in a file others may read: refused, as ssh
        # refuses such a key.
        readable = os.path.join(self.dir, "readable-credentials")
        shutil.copyfile(os.path.join(job_dir, "credentials"), readable)
        os.chmod(readable, 0o644)
        worker = self.join(HOST_A, address, readable)
        self.assertEqual(worker.wait(30), 1, worker.describe())
        self.assertIn(f"{readable}: mode 0644", worker.stdout)
        self.assertIn(f"chmod 600 {readable}", worker.stdout)
        log.poll()
        self.assertEqual(log.of("worker_joined"), [])
        job.proc.send_signal(signal.SIGINT)
        self.assertIsNotNone(job.wait(30), job.describe())

    def test_servers_refuse_callers_without_the_jobs_credentials(self):
        """Master and parameter server: plaintext, another job's certificate and calls
        without the token are refused; a 900 MB push without the token is refused before
        the server reads it (its peak memory grows by a few MB at most)."""
        job, job_dir, _, log = self.start("security", master_addr="127.0.0.1:0", num_workers=1)
        master = self.master_address(job, job_dir, log)
        ps = self.wait_event(job, log, lambda e: e["event"] == "ps_registered", "the PS")
        ps_pid = self.wait_event(job, log, lambda e: e["event"] == "ps_started", "PS pid")["pid"]
        ours = credentials.read(os.path.join(job_dir, "credentials"))
        others = credentials.write_other_job(os.path.join(self.dir, "other-credentials"))
        status = "/elasticdl.proto.Master/GetJobStatus"
        stats = "/elasticdl.proto.ParameterServer/Stats"

        def call(channel, method, request=b"", token=None, as_=ours, timeout=10):
            with channel:
                try:
                    channel.unary_unary(method)(request, metadata=as_.metadata(token),
                                                timeout=timeout)
                    return grpc.StatusCode.OK, ""
                except grpc.RpcError as e:
                    return e.code(), e.details()

        for address, method in ((master, status), (ps["address"], stats)):
            with self.subTest(address=address):
                # The job's own credentials: served (the positive control).
                self.assertEqual(call(ours.channel(address), method)[0], grpc.StatusCode.OK)
                # Plaintext, even with the job's token: no TLS handshake, no call.
                code, _ = call(grpc.insecure_channel(address), method)
                self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
                # Another job's certificate, with this job's token.
                code, _ = call(others.channel(address), method, token=ours.token, as_=others)
                self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
                # The job's certificate without the token, or with another.
                for token in ("", others.token):
                    code, details = call(ours.channel(address), method, token=token)
                    self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED, details)

        def peak_kb(pid):
            with open(f"/proc/{pid}/status") as f:
                return int(next(l for l in f if l.startswith("VmHWM:")).split()[1])

        before = peak_kb(ps_pid)
        big = b"\0" * (900 << 20)
        started = time.monotonic()
        code, details = call(ours.channel(ps["address"]), "/elasticdl.proto.ParameterServer/Push",
                             big, token=others.token, timeout=120)
        del big
        grown = peak_kb(ps_pid) - before
        print(f"900 MB push without the token: {code.name} after "
              f"{time.monotonic() - started:.2f} s; PS peak memory grew {grown} kB")
        self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED, details)
        self.assertLess(grown, 8 << 10)
        log.poll()
        self.assertEqual(log.of("worker_joined"), [])
        job.proc.send_signal(signal.SIGINT)
        self.assertIsNotNone(job.wait(30), job.describe())

if __name__ == "__main__":
    unittest.main()
