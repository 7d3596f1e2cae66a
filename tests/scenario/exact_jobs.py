"""A base for scenario tests of tests/zoo/exactness jobs (chaos, Slurm, external).

ExactJobCase writes the training and validation records once per class, builds
the zoo (or finds it cached) with a small local job so that the scenarios'
clocks start with training, gives every test its own directory, kills what a
failed run left, and waits on the master's event log with messages that show
the job's output. Subclasses set the class attributes below and `_args`.
"""
import os
import tempfile
import time
import unittest

import exactness
import job_test
from exactness import EventLog, JobEnded

# Building the zoo (the first job of a fresh cache): minutes on two busy cores.
BUILD_TIMEOUT = 600


class ExactJobCase(unittest.TestCase):
    TRAIN_RECORDS = 2000
    VALIDATION_RECORDS = 500
    # How many times repeat() runs a scenario.
    REPEAT = 1
    # How long a fault may take to show in the event log, or to be repaired.
    EVENT_TIMEOUT = 60
    # A whole scenario, faults and recovery included; the zoo is built beforehand.
    JOB_TIMEOUT = 240
    MINIBATCH = 32
    MINIBATCHES_PER_TASK = 4
    # Every training forward sleeps this long, so that a task lasts long
    # enough to hit it with a fault on two busy cores.
    SLEEP_MS = 60
    # The suite's flags over _args' defaults (None: leave the flag out).
    FLAGS = {}
    # Flags of the warm-up job that builds the zoo, over the suite's.
    WARM_UP_FLAGS = {}

    @classmethod
    def _args(cls, job_dir, output, **flags):
        """train's arguments for an exactness job: defaults, the suite's FLAGS, `flags`."""
        options = {
            "model_zoo": exactness.MODEL_ZOO, "model_def": exactness.MODEL_DEF,
            "training_data": cls.train_file, "validation_data": cls.validation_file,
            "params": exactness.model_params(cls.TRAIN_RECORDS, cls.SLEEP_MS),
            "num_epochs": 2, "num_workers": 2, "num_ps_pods": 1,
            "minibatch_size": cls.MINIBATCH, "num_minibatches_per_task": cls.MINIBATCHES_PER_TASK,
            "num_threads": 1, "job_dir": job_dir, "output": output,
            "optimizer": "unit_step_optimizer",
        }
        options.update(cls.FLAGS)
        options.update(flags)
        return (["train"] + [f"--{k}={v}" for k, v in options.items() if v is not None] +
                ["--no_progress"])

    def start(self, name, prefix=(), **flags):
        """Starts a training job (run by `prefix`, if any); returns (job, job_dir,
        output, event log)."""
        job_dir = os.path.join(self.dir, "job-" + name)
        output = os.path.join(self.dir, "model-" + name)
        self._job_dirs.append(job_dir)
        job = job_test.Job(self._args(job_dir, output, **flags), prefix=prefix)
        self._jobs.append(job)
        return job, job_dir, output, EventLog(job_dir)

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix=f"elasticdl-{cls.__name__.lower()}-")
        data = os.path.join(cls._tmp.name, "data")
        os.makedirs(data)
        cls.train_file = os.path.join(data, "train.recordio")
        cls.validation_file = os.path.join(data, "validation.tfrecord")
        exactness.write_records(cls.train_file, range(cls.TRAIN_RECORDS))
        exactness.write_records(cls.validation_file, range(cls.VALIDATION_RECORDS),
                                fmt="tfrecord")
        flags = dict(num_workers=1, num_epochs=1, validation_data=None,
                     params=exactness.model_params(cls.TRAIN_RECORDS, 0))
        flags.update(cls.WARM_UP_FLAGS)
        job = job_test.Job(cls._args(os.path.join(cls._tmp.name, "job-warm-up"), None, **flags))
        if job.wait(BUILD_TIMEOUT) != 0:
            if job.proc.poll() is None:
                job.proc.kill()
                job.wait(30)
            raise AssertionError(f"warm-up job failed:\n{job.describe()}")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self._testMethodName + "-", dir=self._tmp.name)
        self._jobs = []
        self._job_dirs = []

    def tearDown(self):
        self._cleanup()

    def _cleanup(self):
        """Kills what a failed run left: our clients, then every process of our jobs."""
        job_test.kill_leftovers(self._jobs, self._job_dirs)
        self._jobs, self._job_dirs = [], []

    def repeat(self, scenario):
        """Runs scenario(run) REPEAT times, each a subtest cleaned up after."""
        for run in range(self.REPEAT):
            with self.subTest(run=run):
                try:
                    scenario(run)
                finally:
                    self._cleanup()

    def describe(self, job, log):
        return f"{job.describe()}\n{log.tail(20)}"

    def until(self, job, log, condition, what, timeout=None):
        """log.until, failing the test (with the job's output) instead of raising."""
        try:
            return log.until(condition, timeout or self.EVENT_TIMEOUT, what,
                             alive=lambda: job.proc.poll() is None)
        except (TimeoutError, JobEnded) as e:
            if job.proc.poll() is not None:
                job.wait(10)
            self.fail(f"{e}\n{self.describe(job, log)}")

    def wait_event(self, job, log, predicate, what, timeout=None):
        return self.until(job, log, lambda: next((e for e in log.events if predicate(e)), None),
                          what, timeout)

    def throttle_until_replaced(self, job, log, worker, pid):
        """Slows `worker` (process `pid`) down (exactness.Throttle: stopped 150 ms of every
        175) until the master takes it for a straggler and it has left; returns the
        `straggler` event and its leaving event, after checking that it was the one."""
        with exactness.Throttle(pid, stop_s=0.150, run_s=0.025):
            found = self.wait_event(job, log, lambda e: e.get("event") == "straggler",
                                    "a straggler")
            left = self.wait_event(job, log, lambda e: e.get("event") in (
                "worker_left", "worker_lost") and e.get("worker") == worker,
                f"worker {worker} leaving")
        describe = self.describe(job, log)
        self.assertEqual(found.get("worker"), worker, describe)
        self.assertGreater(found["seconds_per_minibatch"], 2 * found["others"], describe)
        # It left as asked, handing its task back.
        self.assertEqual(left["event"], "worker_left", describe)
        return found, left

    def worker_with_a_new_task(self, job, job_dir, log):
        """(worker, pid) of a worker handed a new training task from now on, found as soon
        as the event log shows it."""
        since = time.time()
        dispatched = self.wait_event(job, log, lambda e: e.get("event") == "task_dispatched" and
                                     exactness.is_training(e) and e["t"] >= since and
                                     not e.get("redispatch"), "a new training task")
        pid = self.until(job, log, lambda: next(
            (p for p, argv in job_test.job_processes(job_dir).items()
             if argv[1:2] == ["worker"] and
             job_test.argv_flag(argv, "worker_id") == str(dispatched["worker"])), None),
            f"worker {dispatched['worker']}'s process")
        return dispatched["worker"], pid

    def wait_backup_done(self, job, log, worker):
        """Waits for a backup attempt of `worker`'s task and for that task's task_done;
        returns both events."""
        backup = self.wait_event(job, log, lambda e: e.get("event") == "task_dispatched" and
                                 e.get("backup_of") == worker, f"a backup of worker {worker}'s task")
        done = self.wait_event(job, log, lambda e: e.get("event") == "task_done" and
                               e.get("task") == backup["task"], f"task {backup['task']} done")
        return backup, done

    def assertBackup(self, job, log, worker, backup, done):
        """A backup of `worker`'s task was handed out for a holder far slower than the
        backup's worker, and the first attempt to finish overtook the other: one task_done
        for the task, none from the other attempt."""
        describe = self.describe(job, log)
        # JobState's kBackupPaceFactor.
        self.assertGreater(backup["holder_seconds_per_minibatch"],
                           3 * backup["seconds_per_minibatch"], describe)
        attempts = {worker, backup["worker"]}
        self.assertIn(done["worker"], attempts, describe)
        self.assertEqual(done.get("overtook"), list(attempts - {done["worker"]}), describe)
        self.assertEqual(len(log.of("task_done", task=backup["task"])), 1, describe)
        self.assertEqual(log.of("task_stopped", task=backup["task"]), [], describe)

    def assertNothingLeft(self, job_dir):
        """No process of the job outlived it (a finished job's may take a moment to be
        reaped)."""
        deadline = time.monotonic() + 5
        while job_test.job_processes(job_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(job_test.job_processes(job_dir), {},
                         f"processes of {job_dir} outlived their job")

    def assertExact(self, job, job_dir, output, log, epochs=2):
        """The job succeeded and accounted for every record exactly; nothing is left running."""
        code = job.wait(self.JOB_TIMEOUT)
        if code is None:
            self.fail(f"still running after {self.JOB_TIMEOUT} s\n{self.describe(job, log)}")
        log.poll()
        self.assertEqual(code, 0, self.describe(job, log))
        # Only the client's own failure line; logs of recovered faults may
        # quote gRPC errors ("last error: ...").
        errors = [line for line in job.stderr.splitlines() if line.startswith("error:")]
        self.assertEqual(errors, [], self.describe(job, log))
        diff = exactness.check_rows(output, self.TRAIN_RECORDS, epochs)
        self.assertEqual(diff, "", self.describe(job, log))
        diff = exactness.check_metrics(job.stdout, self.VALIDATION_RECORDS, epochs)
        self.assertEqual(diff, "", self.describe(job, log))
        trained = job_test.TRAINED.findall(job.stdout)
        self.assertEqual([int(r) for r, _ in trained], [self.TRAIN_RECORDS * epochs],
                         self.describe(job, log))
        self.assertNothingLeft(job_dir)
        if log.events:
            last = log.events[-1]
            self.assertEqual(last.get("event"), "job_finished", self.describe(job, log))
            self.assertFalse(last.get("failed"), self.describe(job, log))
