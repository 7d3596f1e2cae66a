"""Scenario tests of `--cluster=slurm` against a real Slurm cluster.

setUpClass starts a two-node cluster on this machine with
scripts/slurm_cluster.sh (slurmctld and two slurmd, n1 and n2, both on
localhost; Slurm and munge are installed from Debian if missing) and stops it
at the end. Every job's master, parameter servers and workers are Slurm
batch jobs of that cluster; the tests find them with squeue and lose nodes
the way a cluster does: the node's slurmd and everything running on it die
at once, and the node is marked DOWN.

Exactness jobs train tests/zoo/exactness (see exactness.py): after the job
every row of the model must be exactly -epochs, whatever was lost on the way.

Environment (besides job_test.py's ELASTICDL_BIN and ELASTICDL_CACHE_DIR):
  SLURM_REPEAT     run every scenario this many times (default 1)
  SLURM_PORT_BASE  the cluster's first TCP port (default 17200; it uses 3)
"""
import os
import signal
import socket
import subprocess
import time
import unittest

import corpus
import exactness
import job_test
from exact_jobs import ExactJobCase
from exactness import is_training

REPEAT = int(os.environ.get("SLURM_REPEAT", "1"))
CLUSTER_SCRIPT = os.path.join(job_test.REPO, "scripts", "slurm_cluster.sh")

TRAIN_RECORDS = 2000
VALIDATION_RECORDS = 500
JOB_TIMEOUT = 240
EVENT_TIMEOUT = 90


def squeue(*args):
    """squeue's lines for its arguments (all states), as lists of |-separated fields."""
    out = subprocess.run(["squeue", "--noheader", "--states=all", *args], check=True,
                         capture_output=True, text=True).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


def slurm_jobs_of(job_name):
    """{slurm job id: (name, state, node)} of a job's Slurm jobs (master and processes)."""
    jobs = {}
    for jid, name, state, node in squeue("--format=%i|%j|%T|%N"):
        if name == job_name or name.startswith(job_name + "-"):
            jobs[jid] = (name, state, node)
    return jobs


def idle_cpus():
    """The cluster's idle CPUs (sinfo's allocated/idle/other/total of each node, which
    every partition lists)."""
    out = subprocess.run(["sinfo", "--noheader", "-N", "-o", "%N %C"], check=True,
                         capture_output=True, text=True).stdout
    nodes = dict(line.split() for line in out.splitlines() if line.strip())
    return sum(int(cpus.split("/")[1]) for cpus in nodes.values())


ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}


def process_slurm_job(pid):
    """The SLURM_JOB_ID a process runs under, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"SLURM_JOB_ID="):
                    return var.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


def stepd_pids(slurm_ids):
    """The slurmstepd processes of the given Slurm jobs ("slurmstepd: [12.batch]")."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith("slurmstepd: ["):
            jid = cmd[len("slurmstepd: ["):].split(".")[0].split("]")[0]
            if jid in slurm_ids:
                found.append(int(entry))
    return found


def lose_node(slurm_dir, node):
    """The node dies: its slurmd, the job steps on it and their processes, at once;
    then Slurm is told it is DOWN (as its health check would). Returns the ids of
    the Slurm jobs that ran there."""
    on_node = {jid for jid, _, _, n in squeue("--format=%i|%j|%T|%N") if n == node}
    with open(os.path.join(slurm_dir, f"slurmd-{node}.pid")) as f:
        slurmd = int(f.read().strip())
    victims = [slurmd] + stepd_pids(on_node) + [
        int(p) for p in os.listdir("/proc")
        if p.isdigit() and process_slurm_job(int(p)) in on_node]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down",
                    "reason=lost by a test"], check=True, capture_output=True)
    return on_node


def restore_node(conf, node):
    """Starts the node's slurmd again and waits until Slurm takes it back."""
    subprocess.run(["slurmd", "-N", node, "-f", conf], capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                       capture_output=True)
        states = subprocess.run(["sinfo", "--noheader", "-n", node, "-o", "%t"],
                                capture_output=True, text=True).stdout.split()
        if states and states[0] in ("idle", "mix", "alloc"):
            return
        time.sleep(0.3)
    raise AssertionError(f"node {node} did not come back")


def start_cluster(slurm_dir, port_base):
    """Starts the two-node cluster under slurm_dir; returns its slurm.conf (and sets
    SLURM_CONF for this process and its children)."""
    env = dict(os.environ, SLURM_PORT_BASE=str(port_base))
    started = subprocess.run([CLUSTER_SCRIPT, "start", slurm_dir], env=env,
                             capture_output=True, text=True)
    if started.returncode != 0:
        raise AssertionError(f"could not start Slurm:\n{started.stdout}\n{started.stderr}")
    conf = os.path.join(slurm_dir, "slurm.conf")
    os.environ["SLURM_CONF"] = conf
    return conf


def stop_cluster(slurm_dir):
    subprocess.run([CLUSTER_SCRIPT, "stop", slurm_dir], capture_output=True)
    os.environ.pop("SLURM_CONF", None)


class SlurmTest(ExactJobCase):
    REPEAT = REPEAT
    EVENT_TIMEOUT = EVENT_TIMEOUT
    JOB_TIMEOUT = JOB_TIMEOUT
    FLAGS = {"cluster": "slurm"}
    # The zoo builds on this machine, before the cluster starts.
    WARM_UP_FLAGS = {"cluster": "local"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.slurm_dir = os.path.join(cls._tmp.name, "slurm")
        cls.conf = start_cluster(cls.slurm_dir, os.environ.get("SLURM_PORT_BASE", "17200"))
        data = os.path.join(cls._tmp.name, "data")
        cls.mnist_train = os.path.join(data, "mnist-train.recordio")
        cls.mnist_validation = os.path.join(data, "mnist-validation.recordio")
        corpus.write_subset(cls.mnist_train, "train", 0, job_test.TRAIN_RECORDS)
        corpus.write_subset(cls.mnist_validation, "test", 0, job_test.VALIDATION_RECORDS)

    @classmethod
    def tearDownClass(cls):
        stop_cluster(cls.slurm_dir)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self._lost_nodes = []
        self._occupying = []

    def _cleanup(self):
        """Cancels the Slurm jobs a failed run left, kills its processes, and brings
        lost nodes back."""
        if getattr(self, "_occupying", None):
            subprocess.run(["scancel", *self._occupying], capture_output=True)
        self._occupying = []
        for job_dir in self._job_dirs:
            name = os.path.basename(job_dir)
            ids = [jid for jid, (_, state, _) in slurm_jobs_of(name).items() if state in ACTIVE]
            if ids:
                subprocess.run(["scancel", *ids], capture_output=True)
        super()._cleanup()
        for node in getattr(self, "_lost_nodes", []):
            self.restore_node(node)
        self._lost_nodes = []

    # -- jobs ----------------------------------------------------------------

    def describe(self, job, log):
        return f"{super().describe(job, log)}\nsqueue:\n" + "\n".join(
            "|".join(f) for f in squeue("--format=%i|%j|%T|%N|%r"))

    def assertNothingLeft(self, job_dir):
        """No process of the job, and none of its Slurm jobs still active."""
        name = os.path.basename(job_dir)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            active = {j: v for j, v in slurm_jobs_of(name).items() if v[1] in ACTIVE}
            if not active and not job_test.job_processes(job_dir):
                return
            time.sleep(0.2)
        self.fail(f"left behind: Slurm jobs {active}, processes "
                  f"{job_test.job_processes(job_dir)}")

    # -- nodes -----------------------------------------------------------------

    def lose_node(self, node):
        self._lost_nodes.append(node)
        return lose_node(self.slurm_dir, node)

    def restore_node(self, node):
        restore_node(self.conf, node)

    # -- scenarios -------------------------------------------------------------

    def test_main_job(self):
        """The README's main job (the seed's Fashion-MNIST model), on Slurm."""
        def scenario(run):
            job_dir = os.path.join(self.dir, f"main-{run}")
            output = os.path.join(self.dir, f"main-model-{run}")
            self._job_dirs.append(job_dir)
            job = job_test.Job([
                "train", "--cluster=slurm", f"--model_zoo={job_test.MODEL_ZOO}",
                f"--model_def={job_test.FUNCTIONAL}", f"--training_data={self.mnist_train}",
                f"--validation_data={self.mnist_validation}",
                "--dataset_fn=standardized_dataset_fn", "--optimizer=adam_optimizer",
                "--num_epochs=1", "--num_workers=2", "--num_ps_pods=1", "--minibatch_size=64",
                "--num_threads=1", f"--job_dir={job_dir}", f"--output={output}",
                "--no_progress"])
            self._jobs.append(job)
            code = job.wait(JOB_TIMEOUT)
            self.assertEqual(code, 0, job.describe())
            found = job_test.ACCURACY.findall(job.stdout)
            self.assertEqual(len(found), 1, job.describe())
            self.assertGreater(float(found[0][0]), job_test.MIN_ACCURACY, job.describe())
            records, _ = job_test.TRAINED.findall(job.stdout)[0]
            self.assertEqual(int(records), job_test.TRAIN_RECORDS, job.describe())
            self.assertNothingLeft(job_dir)
            # Every process ran as a Slurm job of its own, and ended cleanly.
            jobs = slurm_jobs_of(os.path.basename(job_dir))
            names = sorted(name for name, _, _ in jobs.values())
            base = os.path.basename(job_dir)
            self.assertEqual(names, [base, f"{base}-ps-0", f"{base}-worker-0",
                                     f"{base}-worker-1"], jobs)
            self.assertEqual({state for _, state, _ in jobs.values()}, {"COMPLETED"},
                             f"{jobs}\n{job.describe()}")
            # The processes' logs are in the job directory, and the client relays them.
            for role in ("master", "ps-0", "worker-0", "worker-1"):
                self.assertTrue(os.path.exists(os.path.join(job_dir, "logs", role + ".log")), role)
            self.assertIn("[ps-0] parameter server 0 serving on", job.stderr, job.describe())
        self.repeat(scenario)

    def test_detached_job_and_status(self):
        def scenario(run):
            job, job_dir, output, log = self.start(f"detached-{run}", detach="true")
            code = job.wait(60)
            self.assertEqual(code, 0, self.describe(job, log))
            self.assertIn("submitted: Slurm job", job.stdout, job.describe())
            self.assertIn(f"elasticdl job status {job_dir}", job.stdout, job.describe())
            seen_running = False
            status = None
            deadline = time.monotonic() + JOB_TIMEOUT
            while time.monotonic() < deadline:
                status = subprocess.run([job_test.BIN, "job", "status", job_dir],
                                        capture_output=True, text=True)
                if status.returncode == 0 and "records" in status.stdout:
                    if "finished" in status.stdout or os.path.exists(
                            os.path.join(job_dir, "status.pbtxt")):
                        break
                    seen_running = True
                time.sleep(0.5)
            self.assertTrue(seen_running, "job status never reported the running job")
            # What the job said of itself at the end, and its master's log.
            master_log = os.path.join(job_dir, "logs", "master.log")
            tail = ""
            if os.path.exists(master_log):
                with open(master_log) as f:
                    tail = f.read()[-4000:]
            ended = (f"last `job status`: {status.stdout if status else ''}"
                     f"{status.stderr if status else ''}\n--- {master_log} (tail)\n{tail}")
            self.assertNotIn("failed: true", status.stdout, ended)
            self.assertEqual(exactness.check_rows(output, TRAIN_RECORDS, 2), "",
                             f"{self.describe(job, log)}\n{ended}")
            self.assertNothingLeft(job_dir)
        self.repeat(scenario)

    def test_node_lost_mid_job(self):
        self.node_lost("node-lost")

    def test_python_model_node_lost_mid_job(self):
        """The same with the Python exactness model: Slurm's nodes import it."""
        self.node_lost("py-node-lost", model_def="exactness.python_exactness.Exactness")

    def test_allreduce_node_lost_mid_job(self):
        """AllreduceStrategy, three workers all-reducing on both nodes: the survivors
        regroup without the lost node's workers, a replacement joins, the job is exact."""
        self.node_lost("ar-node-lost", distribution_strategy="AllreduceStrategy",
                       num_ps_pods=None, num_workers=3)

    def node_lost(self, label, **flags):
        def scenario(run):
            job, job_dir, output, log = self.start(f"{label}-{run}", checkpoint_steps=8, **flags)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            name = os.path.basename(job_dir)
            jobs = slurm_jobs_of(name)
            master_node = next(n for jname, _, n in jobs.values() if jname == name)
            worker_nodes = {n for jname, st, n in jobs.values()
                            if "-worker-" in jname and st == "RUNNING"}
            others = sorted(worker_nodes - {master_node})
            self.assertTrue(others, f"no worker away from the master's node: {jobs}")
            node = others[0]
            lost_at = time.time()
            lost = self.lose_node(node)
            lost_workers = [e["worker"] for e in log.of("worker_started")
                            if e.get("backend_id") in lost]
            self.assertTrue(lost_workers, self.describe(job, log))
            worker = lost_workers[0]
            self.wait_event(job, log, lambda e: e.get("event") == "worker_lost" and
                            e.get("worker") == worker, f"worker {worker} lost")
            self.wait_event(job, log, lambda e: e.get("event") == "worker_started" and
                            e.get("relaunch") and e["t"] >= lost_at, "a replacement worker")
            self.assertExact(job, job_dir, output, log)
        self.repeat(scenario)

    def test_master_node_lost_mid_job(self):
        """The master's node is lost mid-job: the client submits a new master, which lands
        on the other node and resumes from its journal. Both virtual nodes are this machine,
        so the test holds the old master's port, as another host's address would differ:
        the new master serves elsewhere, and the servers and workers that survived find it
        in the job directory. The job is exact."""
        def scenario(run):
            job, job_dir, output, log = self.start(f"master-lost-{run}", checkpoint_steps=8,
                                                   num_workers=3)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            name = os.path.basename(job_dir)
            jobs = slurm_jobs_of(name)
            node = next(n for jname, _, n in jobs.values() if jname == name)
            survivors = sorted(jname[len(name) + 1:] for jname, st, n in jobs.values()
                               if jname != name and st == "RUNNING" and n != node)
            on_node = sorted(jname[len(name) + 1:] for jname, st, n in jobs.values()
                             if jname != name and st == "RUNNING" and n == node)
            first = log.of("master_started")[0]
            port = int(first["address"].rsplit(":", 1)[1])
            lost_at = time.time()
            self.lose_node(node)
            squatter = socket.socket()
            try:
                deadline = time.monotonic() + 5
                while True:
                    try:
                        squatter.bind(("", port))
                        squatter.listen(1)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
                resumed = self.wait_event(
                    job, log, lambda e: e.get("event") == "master_started" and e.get("resumed"),
                    "a master resumed from the journal")
            finally:
                squatter.close()
            self.assertNotEqual(resumed["address"], first["address"])
            self.assertIn("restarting it (1 of", job.stdout + job.stderr, job.describe())
            new_master = [n for jname, st, n in slurm_jobs_of(name).values()
                          if jname == name and st == "RUNNING"]
            self.assertEqual(len(new_master), 1, slurm_jobs_of(name))
            self.assertNotEqual(new_master[0], node)
            self.assertExact(job, job_dir, output, log)
            lost = {f"worker-{e['worker']}" for e in log.of("worker_lost")}
            self.assertLessEqual(lost, set(on_node), self.describe(job, log))
            for label in survivors:
                with open(os.path.join(job_dir, "logs", label + ".log")) as f:
                    self.assertIn(f"now serves at {resumed['address']}", f.read(), label)
            print(f"\n[master-lost-{run}] master on {node} lost with {on_node}; the new one "
                  f"serves at {resumed['address']} (was {first['address']}), "
                  f"{resumed['t'] - lost_at:.1f} s after the loss; "
                  f"{survivors} followed it")
        self.repeat(scenario)

    def test_detached_master_node_lost_mid_job(self):
        """A detached job has no client to submit a new master: its master is requeueable,
        and Slurm requeues it when its node is lost. Slurm holds a requeued job for about
        two minutes; the test starts it at once, as `scontrol update ... StartTime=now`
        lets its owner do. The master resumes from its journal; the job is exact."""
        def scenario(run):
            job, job_dir, output, log = self.start(f"detached-lost-{run}", detach="true",
                                                   checkpoint_steps=8)
            self.assertEqual(job.wait(60), 0, job.describe())
            with open(os.path.join(job_dir, "slurm_job_id")) as f:
                master_job = f.read().strip()
            deadline = time.monotonic() + EVENT_TIMEOUT
            while log.training_done() < 3:
                self.assertLess(time.monotonic(), deadline, log.tail(20))
                time.sleep(0.2)
                log.poll()
            node = next(n for jid, _, _, n in squeue("--format=%i|%j|%T|%N") if jid == master_job)
            self.lose_node(node)
            deadline = time.monotonic() + 30
            while [st for jid, st in squeue("--format=%i|%T") if jid == master_job] != ["PENDING"]:
                self.assertLess(time.monotonic(), deadline, squeue("--format=%i|%j|%T|%N|%r"))
                time.sleep(0.2)
            subprocess.run(["scontrol", "update", f"JobId={master_job}", "StartTime=now"],
                           check=True, capture_output=True)
            deadline = time.monotonic() + JOB_TIMEOUT
            while not os.path.exists(os.path.join(job_dir, "status.pbtxt")):
                self.assertLess(time.monotonic(), deadline,
                                f"{log.tail(20)}\n{squeue('--format=%i|%j|%T|%N|%r')}")
                time.sleep(0.5)
                log.poll()
            resumed = [e for e in log.of("master_started") if e.get("resumed")]
            self.assertEqual(len(resumed), 1, log.tail(20))
            status = subprocess.run([job_test.BIN, "job", "status", job_dir],
                                    capture_output=True, text=True)
            self.assertNotIn("failed: true", status.stdout, status.stdout + status.stderr)
            self.assertEqual(exactness.check_rows(output, TRAIN_RECORDS, 2), "", log.tail(20))
            self.assertNothingLeft(job_dir)
        self.repeat(scenario)

    def test_scale_two_four_two(self):
        def scale(job, job_dir, log, n):
            out = subprocess.run([job_test.BIN, "job", "scale", job_dir, f"--num_workers={n}"],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr + self.describe(job, log))

        def scenario(run):
            # Asynchronous with plain SGD (the chaos scenarios scale a
            # synchronous job): both modes must count exactly as workers
            # come and go.
            job, job_dir, output, log = self.start(
                f"scale-{run}", num_epochs=3, use_async="true", optimizer="optimizer",
                params=exactness.model_params(self.TRAIN_RECORDS, 150))
            self.until(job, log, lambda: log.training_done() >= 2, "training under way")
            scale(job, job_dir, log, 4)
            self.until(job, log, lambda: len(log.of("worker_registered")) >= 4,
                       "four workers registered")
            name = os.path.basename(job_dir)
            running = [j for j, (jn, st, _) in slurm_jobs_of(name).items()
                       if "-worker-" in jn and st == "RUNNING"]
            self.assertEqual(len(running), 4, slurm_jobs_of(name))
            self.until(job, log, lambda: log.training_done() >= 10, "training with four")
            scale(job, job_dir, log, 2)
            self.until(job, log, lambda: len(log.of("worker_left")) >= 2, "two workers left")
            self.assertExact(job, job_dir, output, log, epochs=3)
        self.repeat(scenario)

    # -- jobs that start small ------------------------------------------------

    def occupy(self, name, cpus):
        """Submits `cpus` one-CPU Slurm jobs that sleep (another user's work), waits
        until they all run, and returns their ids; they are cancelled with the run."""
        ids = self._occupying
        for i in range(cpus):
            out = subprocess.run(["sbatch", "--parsable", f"--job-name={name}-{i}", "-c1",
                                  "-o", "/dev/null", "--wrap", "sleep 600"],
                                 check=True, capture_output=True, text=True).stdout
            ids.append(out.strip().split(";")[0])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = {jid: st for jid, _, st in squeue("--format=%i|%j|%T") if jid in ids}
            if all(st == "RUNNING" for st in states.values()) and len(states) == len(ids):
                return ids
            time.sleep(0.2)
        self.fail(f"the occupying jobs did not all start: {states}")

    def worker_states(self, job_dir):
        """{worker index: Slurm state} of the job's workers."""
        name = os.path.basename(job_dir)
        return {int(jname.rsplit("-", 1)[1]): st for jname, st, _ in slurm_jobs_of(name).values()
                if jname.startswith(name + "-worker-")}

    def test_starts_with_one_of_three_workers_and_grows(self):
        """Room for one worker: the job trains with it while the other two pend, and
        they join when Slurm starts them."""
        def scenario(run):
            # Room for the master, the server and one worker.
            blockers = self.occupy(f"others-{run}", idle_cpus() - 3)
            job, job_dir, output, log = self.start(f"grow-{run}", num_workers=3, num_epochs=3)
            self.until(job, log, lambda: log.training_done() >= 2, "training with one worker")
            pending = self.worker_states(job_dir)
            self.assertEqual(sorted(pending.values()), ["PENDING", "PENDING", "RUNNING"],
                             self.describe(job, log))
            self.assertEqual({e["worker"] for e in log.of("task_dispatched")}, {0},
                             self.describe(job, log))
            began = log.of("tasks_began")
            self.assertEqual([(e["workers"], e["min_workers"]) for e in began], [(1, 1)], began)
            # The other user's work ends: Slurm starts the two, and they train.
            subprocess.run(["scancel", *blockers[:2]], check=True)
            for worker in (1, 2):
                self.wait_event(job, log, lambda e, w=worker: e.get("event") == "task_dispatched"
                                and e.get("worker") == w and is_training(e),
                                f"a training task for worker {worker}")
            self.assertExact(job, job_dir, output, log, epochs=3)
            self.assertEqual(log.of("worker_lost"), [], self.describe(job, log))
        self.repeat(scenario)

    def test_gang_waits_for_every_worker(self):
        """--min_workers=--num_workers: nothing trains until all of them run."""
        def scenario(run):
            blockers = self.occupy(f"others-gang-{run}", idle_cpus() - 3)
            job, job_dir, output, log = self.start(f"gang-{run}", num_workers=3, min_workers=3)
            self.wait_event(job, log, lambda e: e.get("event") == "worker_registered",
                            "the first worker registered")
            time.sleep(3)
            log.poll()
            self.assertEqual(log.of("task_dispatched"), [], self.describe(job, log))
            self.assertEqual(sorted(self.worker_states(job_dir).values()),
                             ["PENDING", "PENDING", "RUNNING"], self.describe(job, log))
            subprocess.run(["scancel", *blockers[:2]], check=True)
            began = self.wait_event(job, log, lambda e: e.get("event") == "tasks_began",
                                    "the first task")
            self.assertEqual((began["workers"], began["min_workers"]), (3, 3), began)
            self.assertExact(job, job_dir, output, log)
        self.repeat(scenario)

    # -- priorities ------------------------------------------------------------

    GRACE_TIME = 5  # the low partition's (scripts/slurm_cluster.sh)

    def test_preempted_worker_hands_back_its_task(self):
        """A low-priority job fills the cluster; another user's high-priority job needs
        a CPU. Slurm preempts one of the job's workers, which hands its task back within
        the grace time; the job trains on with the other two; the master's replacement
        pends until the high-priority job ends, then joins; every row is exact."""
        def scenario(run):
            # Room for the master, the server and three workers, no more.
            self.occupy(f"others-pre-{run}", idle_cpus() - 5)
            # Eight epochs: enough left, once the high-priority job ends, for the
            # replacement to be scheduled and start on a slow machine before the end.
            job, job_dir, output, log = self.start(f"preempt-{run}", num_workers=3,
                                                   num_epochs=8, priority="low")
            for worker in (0, 1, 2):
                self.wait_event(job, log, lambda e, w=worker: e.get("event") == "task_dispatched"
                                and e.get("worker") == w and is_training(e),
                                f"a training task for worker {worker}")
            self.assertEqual(log.of("worker_left") + log.of("worker_lost"), [],
                             self.describe(job, log))
            urgent_at = time.time()
            urgent = subprocess.run(["sbatch", "--parsable", "--partition=high",
                                     f"--job-name=urgent-{run}", "-c1", "-o", "/dev/null",
                                     "--wrap", "sleep 600"],
                                    check=True, capture_output=True, text=True).stdout
            urgent = urgent.strip().split(";")[0]
            self._occupying.append(urgent)
            # Slurm starts it once the preempted worker is gone: within the grace time.
            deadline = time.monotonic() + self.GRACE_TIME + 5
            while time.monotonic() < deadline:
                if [s for j, s in squeue("--format=%i|%T") if j == urgent] == ["RUNNING"]:
                    break
                time.sleep(0.1)
            else:
                self.fail(f"the high-priority job did not start within {self.GRACE_TIME + 5} s"
                          f"\n{self.describe(job, log)}")
            started_in = time.time() - urgent_at
            left = self.wait_event(job, log, lambda e: e.get("event") == "worker_left",
                                   "the preempted worker left")
            preempted = left["worker"]
            # It handed its task back itself: nothing was left for the master to take back.
            self.assertEqual(left["requeued"], 0, self.describe(job, log))
            self.assertLess(left["t"] - urgent_at, self.GRACE_TIME + 2, self.describe(job, log))
            self.assertIn("COMPLETED", left.get("how", ""), left)
            # A replacement at no cost to the relaunch budget, pending while the
            # high-priority job runs; the other two go on training.
            replacement = self.wait_event(
                job, log, lambda e: e.get("event") == "worker_started" and e["t"] >= left["t"],
                "a replacement worker")
            self.assertFalse(replacement.get("relaunch"), replacement)
            done_before = log.training_done()
            self.until(job, log, lambda: log.training_done() >= done_before + 3,
                       "training with two workers")
            states = self.worker_states(job_dir)
            self.assertEqual(states.get(replacement["worker"]), "PENDING",
                             f"{states}\n{self.describe(job, log)}")
            self.assertEqual(sorted(s for w, s in states.items() if w != preempted and
                                    w != replacement["worker"]), ["RUNNING", "RUNNING"], states)
            # The high-priority job ends: the replacement starts and trains.
            subprocess.run(["scancel", urgent], check=True)
            self.wait_event(job, log, lambda e: e.get("event") == "task_dispatched" and
                            e.get("worker") == replacement["worker"] and is_training(e),
                            "a training task for the replacement")
            self.assertExact(job, job_dir, output, log, epochs=8)
            self.assertEqual(log.of("worker_lost"), [], self.describe(job, log))
            handed_back = [(e["task"], e["minibatches_done"]) for e in log.of("task_stopped")
                           if e["worker"] == preempted and e["t"] >= urgent_at]
            print(f"\n[preempt-{run}] the high-priority job started {started_in:.1f} s after "
                  f"it was submitted; worker {preempted} left {left['t'] - urgent_at:.1f} s "
                  f"after it, handing back (task, minibatches done): {handed_back}")
        self.repeat(scenario)

    def test_straggler_is_replaced(self):
        """Three synchronous workers, one of them slowed down (stopped 150 ms of every 175
        with SIGSTOP and SIGCONT): the master tells it from its pace and asks it to leave;
        it hands its task back, its Slurm job ends, another takes its place, and every row
        is exact."""
        def scenario(run):
            job, job_dir, output, log = self.start(f"straggler-{run}", num_workers=3,
                                                   num_epochs=4)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            worker, pid = self.until(job, log, lambda: next(
                ((int(job_test.argv_flag(argv, "worker_id")), p)
                 for p, argv in sorted(job_test.job_processes(job_dir).items())
                 if argv[1:2] == ["worker"]), None), "a worker process")
            slowed = time.time()
            found, left = self.throttle_until_replaced(job, log, worker, pid)
            self.assertIn("COMPLETED", left.get("how", ""), left)
            replacement = self.wait_event(
                job, log, lambda e: e.get("event") == "worker_started" and e["t"] >= slowed,
                "a worker in the straggler's place")
            self.assertFalse(replacement.get("relaunch"), replacement)
            self.assertExact(job, job_dir, output, log, epochs=4)
            self.assertEqual(len(log.of("straggler")), 1, self.describe(job, log))
            print(f"\n[straggler-{run}] worker {worker}: "
                  f"{found['seconds_per_minibatch'] / found['others']:.1f} times the others' "
                  f"time per minibatch, asked to leave {found['t'] - slowed:.1f} s after it "
                  f"slowed, gone {left['t'] - slowed:.1f} s after")
        self.repeat(scenario)

    def test_straggler_task_is_backed_up(self):
        """Three asynchronous workers in their own Slurm jobs, one slowed down (stopped 150 ms
        of every 175) and kept (--straggler_factor=0): near the end of training an idle
        worker is handed a backup attempt of the straggler's task, the first attempt to
        finish wins, and every row is exact."""
        def scenario(run):
            epochs = 4
            job, job_dir, output, log = self.start(
                f"backup-{run}", num_workers=3, num_epochs=epochs, use_async="true",
                optimizer="optimizer", dataset_fn="wide_shuffle_dataset_fn", straggler_factor=0)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            worker, pid = self.worker_with_a_new_task(job, job_dir, log)
            with exactness.Throttle(pid, stop_s=0.150, run_s=0.025):
                backup, done = self.wait_backup_done(job, log, worker)
            self.assertExact(job, job_dir, output, log, epochs=epochs)
            self.assertBackup(job, log, worker, backup, done)
            print(f"\n[backup-{run}] worker {backup['worker']} backed up task {backup['task']} "
                  f"of worker {worker} from minibatch {backup['minibatches_done']} "
                  f"({backup['holder_seconds_per_minibatch']:.3f} s per minibatch against "
                  f"{backup['seconds_per_minibatch']:.3f} s); worker {done['worker']} won")
        self.repeat(scenario)

    def test_scancel_stops_everything(self):
        def scenario(run):
            job, job_dir, output, log = self.start(f"scancel-{run}", num_epochs=3)
            self.until(job, log, lambda: log.training_done() >= 2, "training under way")
            with open(os.path.join(job_dir, "slurm_job_id")) as f:
                master = f.read().strip()
            subprocess.run(["scancel", master], check=True)
            code = job.wait(60)
            self.assertIsNotNone(code, "the client did not end after scancel")
            self.assertNotEqual(code, 0, job.describe())
            self.assertIn("cancelled", job.stderr, job.describe())
            self.assertNothingLeft(job_dir)
        self.repeat(scenario)

    def test_wrong_partition(self):
        job, job_dir, _, _ = self.start("wrong-partition", partition="no_such_partition")
        code = job.wait(60)
        self.assertEqual(code, 1, job.describe())
        errors = [l for l in job.stderr.splitlines() if l.startswith("error:")]
        self.assertEqual(len(errors), 1, job.describe())
        self.assertIn("Slurm refused", errors[0])
        self.assertIn("invalid partition", errors[0])
        self.assertIn("no_such_partition", errors[0])


if __name__ == "__main__":
    unittest.main()
