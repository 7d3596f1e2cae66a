"""Chaos scenarios: whole jobs through the real binary while processes die.

Each scenario trains tests/zoo/exactness (see exactness.py) on a few thousand
records while the test kills, stops or adds processes, and then requires:
the client exits 0; every row of the trained model is exactly -epochs (no
record lost, none trained twice); the evaluation metrics are exactly those
of the validation ids counted once; the client reports every record of
every epoch; and no process of the job outlives it. Faults are aimed by the
master's event log (<job_dir>/events.jsonl): a worker is killed while it
holds a training task, at a random moment inside it.

The zoo's dataset_fn shuffles every task's records (through a buffer smaller
than a task, or with --dataset_fn=wide_shuffle_dataset_fn one larger), so a
task resumed by another worker must replay its predecessor's order exactly.
Jobs train in the default mode (synchronous steps of one minibatch per
training worker) with the zoo's unit_step_optimizer, which lowers every row
of a step's records by exactly 1 whatever the step's size; the *_async
scenarios train asynchronously with plain SGD. PythonChaosTest runs the
row-exact scenarios with the zoo's Python twin (python_exactness.py): a
Python model and a Python dataset_fn that shuffles, three workers.

Environment (besides job_test.py's ELASTICDL_BIN and ELASTICDL_CACHE_DIR):
  CHAOS_REPEAT  run every scenario this many times (default 1)
  CHAOS_SEED    seed of the random fault timing (default: a new one, printed)
"""
import os
import random
import signal
import subprocess
import time
import unittest

import exactness
import job_test
from exact_jobs import ExactJobCase

REPEAT = int(os.environ.get("CHAOS_REPEAT", "1"))
SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))

TRAIN_RECORDS = 2000
VALIDATION_RECORDS = 500
MINIBATCH = 32
MINIBATCHES_PER_TASK = 4
TASK_RECORDS = MINIBATCH * MINIBATCHES_PER_TASK
TASKS_PER_EPOCH = -(-TRAIN_RECORDS // TASK_RECORDS)
# Every training forward sleeps this long, so that a task (four minibatches)
# lasts long enough to kill a worker inside it on two busy cores.
SLEEP_MS = 60
TASK_SECONDS = MINIBATCHES_PER_TASK * SLEEP_MS / 1000
# Repeated kills need a longer job: each waits for the replacement worker.
SIGKILL_SLEEP_MS = 80
# A whole scenario, faults and recovery included; the zoo is built beforehand.
JOB_TIMEOUT = 150
# How long a fault may take to show in the event log, or to be repaired.
EVENT_TIMEOUT = 60


# The exactness counts kept in an embedding table on the parameter servers.
EMBEDDING_MODEL = "exactness.exactness.EmbeddingExactness"


def shard_of(name, num_shards):
    """The parameter server holding a dense parameter (ps/placement.h: FNV-1a 64)."""
    h = 14695981039346656037
    for c in name.encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    return h % num_shards


def newest_checkpoint(job_dir, ps, num_ps):
    """The newest version parameter server `ps` has a checkpoint file of; -1 if none.
    The file appears by rename, whole (ps/checkpoint.cc)."""
    newest = -1
    try:
        names = os.listdir(os.path.join(job_dir, "checkpoints"))
    except OSError:
        return newest
    for name in names:
        if not name.startswith("version-") or not name[len("version-"):].isdigit():
            continue
        path = os.path.join(job_dir, "checkpoints", name, f"ps-{ps}-of-{num_ps}.ckpt")
        if os.path.exists(path):
            newest = max(newest, int(name[len("version-"):]))
    return newest


def is_process_of(pid, role, job_dir):
    """Whether pid is still a `role` process of the job (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    return pid in job_test.job_processes(job_dir) and role in argv[1:2]


class ChaosCase(ExactJobCase):
    """The chaos scenarios' data, fault helpers and scenario bodies."""
    TRAIN_RECORDS = TRAIN_RECORDS
    VALIDATION_RECORDS = VALIDATION_RECORDS
    MINIBATCH = MINIBATCH
    MINIBATCHES_PER_TASK = MINIBATCHES_PER_TASK
    SLEEP_MS = SLEEP_MS
    REPEAT = REPEAT
    EVENT_TIMEOUT = EVENT_TIMEOUT
    JOB_TIMEOUT = JOB_TIMEOUT

    @classmethod
    def setUpClass(cls):
        print(f"\nchaos seed {SEED} (CHAOS_SEED), {REPEAT} run(s) per scenario (CHAOS_REPEAT)",
              flush=True)
        cls.rng = random.Random(SEED)
        super().setUpClass()

    # -- jobs ----------------------------------------------------------------

    def describe(self, job, log):
        return f"chaos seed {SEED}\n{super().describe(job, log)}"

    # -- faults ----------------------------------------------------------------

    def holder_inside_task(self, job, log, exclude_tasks=(), min_seconds=0.0):
        """(worker, pid, task) of a live worker inside a training task.

        Waits until some worker has been inside a training task (not in
        exclude_tasks) for min_seconds, and still is.
        """
        def find():
            now = time.time()
            live = log.live_workers()
            for worker, dispatched in sorted(log.holders().items(), key=lambda kv: str(kv[0])):
                if dispatched["task"] in exclude_tasks or worker not in live:
                    continue
                if now - dispatched["t"] >= min_seconds:
                    return worker, live[worker], dispatched["task"]
            return None
        return self.until(job, log, find, "a worker inside a training task")

    def signal_worker_mid_task(self, job, job_dir, log, sig, exclude_tasks=(),
                               min_seconds=0.0, max_seconds=None):
        """Sends sig to a worker inside a training task, at a random moment in it.

        The moment is min_seconds to max_seconds (default: a task's length)
        after the worker began the task (as holders() times it). Returns (worker, pid, task, unix time
        just before the signal).
        """
        if max_seconds is None:
            max_seconds = TASK_SECONDS
        for _ in range(100):
            delay = self.rng.uniform(min_seconds, max_seconds)
            worker, pid, task = self.holder_inside_task(job, log, exclude_tasks, delay)
            log.poll()
            if log.holders().get(worker, {}).get("task") != task:
                continue  # finished meanwhile: pick again
            if not is_process_of(pid, "worker", job_dir):
                continue
            sent = time.time()
            os.kill(pid, sig)
            return worker, pid, task, sent
        self.fail(f"found no worker to signal inside a task\n{self.describe(job, log)}")

    def assertRedispatched(self, job, log, worker, task):
        """The task the worker held when it was stopped went out again (or it had finished)."""
        done_by_it = log.of("task_done", task=task, worker=worker)
        again = [e for e in log.of("task_dispatched", task=task) if e.get("redispatch")]
        self.assertTrue(done_by_it or again,
                        f"task {task} of worker {worker} never handed out again\n"
                        f"{self.describe(job, log)}")
        return again

    # -- scenario bodies -------------------------------------------------------

    def repeated_worker_sigkills(self, name, **flags):
        kills = 4

        def scenario(run):
            epochs = 4
            job, job_dir, output, log = self.start(
                f"{name}-{run}", num_epochs=epochs,
                params=exactness.model_params(TRAIN_RECORDS, SIGKILL_SLEEP_MS), **flags)
            killed = []
            for _ in range(kills):
                log.poll()
                started = len(log.of("worker_started"))
                worker, _, task, _ = self.signal_worker_mid_task(
                    job, job_dir, log, signal.SIGKILL, exclude_tasks=[t for _, t in killed])
                killed.append((worker, task))
                self.wait_event(job, log, lambda e, w=worker: e.get("event") == "worker_lost" and
                                e.get("worker") == w, f"worker_lost of worker {worker}")
                # A replacement joins before the next kill.
                workers = int(flags.get("num_workers", 2))
                self.until(job, log, lambda n=started: len(log.of("worker_started")) > n and
                           len(log.live_workers()) >= workers, "a replacement worker")
            self.assertExact(job, job_dir, output, log, epochs)
            for worker, task in killed:
                self.assertRedispatched(job, log, worker, task)
            self.assertEqual(len(log.of("worker_lost")), kills, self.describe(job, log))
        self.repeat(scenario)

    def ps_sigkill(self, name, ps, **flags):
        num_ps = 2
        checkpoint_steps = 8

        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(
                f"{name}-{run}", num_epochs=epochs, num_ps_pods=num_ps,
                checkpoint_steps=checkpoint_steps, **flags)
            # Past this server's first checkpoint after version 0, inside a task. In
            # synchronous training a version takes one minibatch from every worker, so
            # the number of finished tasks does not tell where the versions are.
            self.until(job, log, lambda: newest_checkpoint(job_dir, ps, num_ps) > 0,
                       f"a checkpoint of parameter server {ps} past version 0")
            self.holder_inside_task(job, log, min_seconds=self.rng.uniform(0, TASK_SECONDS))
            pid = self.until(job, log, lambda: log.live_ps().get(ps), f"parameter server {ps}")
            self.assertTrue(is_process_of(pid, "ps", job_dir), self.describe(job, log))
            os.kill(pid, signal.SIGKILL)
            self.wait_event(job, log, lambda e: e.get("event") == "ps_lost" and e.get("ps") == ps,
                            f"ps_lost of parameter server {ps}")
            started = self.wait_event(job, log, lambda e: e.get("event") == "ps_started" and
                                      e.get("ps") == ps and e.get("pid") != pid,
                                      f"parameter server {ps} relaunched")
            registered = self.wait_event(
                job, log, lambda e: e.get("event") == "ps_registered" and e.get("ps") == ps and
                e["t"] >= started["t"] and e.get("restored"),
                f"parameter server {ps} registered from its checkpoint")
            self.assertGreater(registered.get("version", 0), 0, self.describe(job, log))
            self.assertExact(job, job_dir, output, log, epochs)
        self.repeat(scenario)


class ChaosTest(ChaosCase):
    """The scenarios, with tests/zoo/exactness/exactness.cc."""

    def test_baseline(self):
        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(f"baseline-{run}", num_epochs=epochs,
                                                   num_ps_pods=2)
            self.assertExact(job, job_dir, output, log, epochs)
            # The counting buffer adds up over the workers of every step.
            self.assertEqual(exactness.check_trained_counts(output, self.TRAIN_RECORDS, epochs),
                             "", self.describe(job, log))
            if not log.events:
                return  # the event log is not implemented yet
            describe = self.describe(job, log)
            self.assertEqual([e["resumed"] for e in log.of("master_started")], [False], describe)
            self.assertEqual(len(log.of("ps_started")), 2, describe)
            self.assertEqual(len(log.of("worker_started")), 2, describe)
            for kind in ("worker_lost", "ps_lost"):
                self.assertEqual(log.of(kind), [], describe)
            # Nothing went out twice but, maybe, a backup attempt near the end.
            self.assertEqual([e for e in log.of("task_dispatched")
                              if e.get("redispatch") and "backup_of" not in e], [], describe)
            self.assertEqual(log.training_done(), TASKS_PER_EPOCH * epochs, describe)
        self.repeat(scenario)

    def test_repeated_worker_sigkills(self):
        self.repeated_worker_sigkills("sigkill")

    def test_repeated_worker_sigkills_async(self):
        self.repeated_worker_sigkills("sigkill-async", use_async="true", optimizer="optimizer",
                                      dataset_fn="wide_shuffle_dataset_fn", num_workers=3)

    def test_worker_sigterm_mid_task(self):
        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(f"sigterm-{run}", num_epochs=epochs,
                                                   dataset_fn="wide_shuffle_dataset_fn")
            # Wait for a finished task first, so that workers are up to speed;
            # then stop one after one or two of its task's minibatches.
            self.until(job, log, lambda: log.training_done() >= 1, "a finished training task")
            worker, _, task, _ = self.signal_worker_mid_task(
                job, job_dir, log, signal.SIGTERM, min_seconds=1.5 * SLEEP_MS / 1000,
                max_seconds=2.5 * SLEEP_MS / 1000)
            self.wait_event(job, log, lambda e: e.get("event") in ("worker_left", "worker_lost")
                            and e.get("worker") == worker, f"worker {worker} leaving")
            self.assertExact(job, job_dir, output, log, epochs)
            describe = self.describe(job, log)
            # A clean exit: the worker left, it was not lost.
            self.assertEqual(len(log.of("worker_left", worker=worker)), 1, describe)
            self.assertEqual(log.of("worker_lost", worker=worker), [], describe)
            # It finished the minibatch it was in and handed back the rest.
            if not log.of("task_done", task=task, worker=worker):
                again = self.assertRedispatched(job, log, worker, task)
                done = again[0].get("minibatches_done", 0)
                self.assertGreaterEqual(done, 1, describe)
                self.assertLess(done, MINIBATCHES_PER_TASK, describe)
        self.repeat(scenario)

    def test_straggler_is_replaced(self):
        """One of three synchronous workers slowed down (stopped 150 ms of every 175 with
        SIGSTOP and SIGCONT: each of its minibatches waits for a few of its short runs): the
        master tells it from its pace, asks it to leave and starts another; the straggler
        hands its task back, and the job is exact."""
        def scenario(run):
            epochs = 4
            job, job_dir, output, log = self.start(f"straggler-{run}", num_epochs=epochs,
                                                   num_workers=3)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            worker, pid, _, slowed = self.signal_worker_mid_task(job, job_dir, log,
                                                                 signal.SIGSTOP)
            self.throttle_until_replaced(job, log, worker, pid)
            self.until(job, log, lambda: any(e["t"] > slowed for e in log.of("worker_started")),
                       "a worker started in the straggler's place")
            self.assertExact(job, job_dir, output, log, epochs)
            # The others were not taken for stragglers.
            self.assertEqual(len(log.of("straggler")), 1, self.describe(job, log))
        self.repeat(scenario)

    def test_straggler_task_is_backed_up(self):
        """Three asynchronous workers, one slowed down (stopped 150 ms of every 175) and
        kept (--straggler_factor=0): near the end of training an idle worker is handed a
        backup attempt of the straggler's task; the first attempt to finish wins, the servers
        take the other's minibatches as duplicates, and every row is exact."""
        def scenario(run):
            epochs = 4
            job, job_dir, output, log = self.start(
                f"backup-{run}", num_epochs=epochs, num_workers=3, use_async="true",
                optimizer="optimizer", dataset_fn="wide_shuffle_dataset_fn", straggler_factor=0)
            self.until(job, log, lambda: log.training_done() >= 3, "training under way")
            # Slowed at the start of a task, it applies next to nothing of it: its
            # gradients come too stale while the others train.
            worker, pid = self.worker_with_a_new_task(job, job_dir, log)
            with exactness.Throttle(pid, stop_s=0.150, run_s=0.025):
                backup, done = self.wait_backup_done(job, log, worker)
            self.assertExact(job, job_dir, output, log, epochs)
            self.assertBackup(job, log, worker, backup, done)
            self.assertEqual(log.training_done(), TASKS_PER_EPOCH * epochs,
                             self.describe(job, log))
            print(f"\n[backup-{run}] worker {backup['worker']} backed up task {backup['task']} "
                  f"of worker {worker} from minibatch {backup['minibatches_done']} "
                  f"({backup['holder_seconds_per_minibatch']:.3f} s per minibatch against "
                  f"{backup['seconds_per_minibatch']:.3f} s); worker {done['worker']} won")
        self.repeat(scenario)

    def test_scale_workers_up_then_down(self):
        def scale(job, job_dir, log, n):
            result = subprocess.run([job_test.BIN, "job", "scale", job_dir, f"--num_workers={n}"],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0,
                             f"job scale to {n}: {result.stdout}{result.stderr}\n"
                             f"{self.describe(job, log)}")
            self.wait_event(job, log, lambda e: e.get("event") == "scaled" and
                            e.get("workers_target") == n, f"scaled to {n}")

        def scenario(run):
            epochs = 3
            job, job_dir, output, log = self.start(f"scale-{run}", num_epochs=epochs,
                                                   num_workers=1)
            self.until(job, log, lambda: log.training_done() >= 1, "a finished training task")
            first = set(log.live_workers())
            scale(job, job_dir, log, 3)
            # The new workers train.
            added = self.until(job, log, lambda: (len(log.live_workers()) == 3 and
                                                  set(log.live_workers()) - first),
                               "three live workers")
            for worker in added:
                self.wait_event(job, log, lambda e, w=worker: e.get("event") == "task_dispatched"
                                and e.get("worker") == w and exactness.is_training(e),
                                f"a training task for added worker {worker}")
            self.assertLess(log.training_done(), TASKS_PER_EPOCH * epochs - 4,
                            "too late to scale down: make the job longer")
            scale(job, job_dir, log, 1)
            self.until(job, log, lambda: len(log.of("worker_left")) >= 2,
                       "two workers leaving")
            self.until(job, log, lambda: len(log.live_workers()) == 1, "one live worker")
            self.assertExact(job, job_dir, output, log, epochs)
            describe = self.describe(job, log)
            self.assertEqual(log.of("worker_lost"), [], describe)
        self.repeat(scenario)

    def test_ps_sigkill_restores_checkpoint(self):
        # The one holding the model's only parameter.
        self.ps_sigkill("ps-kill", shard_of("rows", 2))

    def test_embedding_ps_sigkill_restores_rows(self):
        """The embedding-table model: its rows (and their optimizer slots) live on
        both servers; one of them dies and comes back from its checkpoint."""
        self.ps_sigkill("embedding-ps-kill", self.rng.randrange(2), model_def=EMBEDDING_MODEL,
                        num_workers=3)

    def test_embedding_worker_sigkills_async(self):
        """The embedding-table model, asynchronous: three workers race to push sparse
        gradients of overlapping rows to two servers while workers are killed."""
        self.repeated_worker_sigkills("embedding-sigkill-async", model_def=EMBEDDING_MODEL,
                                      use_async="true", optimizer="optimizer",
                                      dataset_fn="wide_shuffle_dataset_fn", num_workers=3,
                                      num_ps_pods=2)

    def test_master_sigkill_resumes(self):
        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(f"master-kill-{run}", num_epochs=epochs)
            self.until(job, log, lambda: log.training_done() >= 2, "two finished training tasks")
            self.holder_inside_task(job, log, min_seconds=self.rng.uniform(0, TASK_SECONDS))
            pid = log.master_pid()
            self.assertTrue(is_process_of(pid, "master", job_dir), self.describe(job, log))
            os.kill(pid, signal.SIGKILL)
            resumed = self.wait_event(job, log, lambda e: e.get("event") == "master_started" and
                                      e.get("resumed") and e.get("pid") != pid,
                                      "the master restarted and resumed")
            done = log.training_done()
            self.until(job, log, lambda: any(e["t"] >= resumed["t"]
                                             for e in log.of("task_done")),
                       "a task finished after the master resumed")
            self.assertGreaterEqual(log.training_done(), done, self.describe(job, log))
            self.assertExact(job, job_dir, output, log, epochs)
        self.repeat(scenario)

    def test_sync_training_applies_the_last_partial_step(self):
        # 2000 records in minibatches of 32 are 63 minibatches: with
        # --grads_to_wait=2 the last one still waits for a step when training
        # ends, and the servers apply it then (weighing 1/2 like the others),
        # before the evaluation and the trained model read the model.
        self.assertEqual(-(-TRAIN_RECORDS // MINIBATCH) % 2, 1)
        job, job_dir, output, log = self.start(
            "sync", num_epochs=1, num_ps_pods=2, grads_to_wait=2, optimizer="optimizer",
            params=exactness.model_params(TRAIN_RECORDS, 0))
        code = job.wait(JOB_TIMEOUT)
        self.assertEqual(code, 0, self.describe(job, log))
        log.poll()
        self.assertIn("flushed", [e.get("event") for e in log.events], self.describe(job, log))
        _, parameters = exactness.read_model_values(os.path.join(output, "parameters.pb"))
        _, rows = parameters["rows"]
        wrong = {i: v for i, v in enumerate(rows) if v != -0.5}
        self.assertEqual(len(rows), TRAIN_RECORDS)
        self.assertEqual(wrong, {}, self.describe(job, log))
        self.assertIn("mean_prediction: -0.500000", job.stdout, self.describe(job, log))


class PythonChaosTest(ChaosCase):
    """The row-exact scenarios with the Python twin of the exactness zoo
    (tests/zoo/exactness/python_exactness.py): a Python model, a Python dataset_fn that
    shuffles, three workers, kills inside tasks, a parameter server killed; and the Python
    embedding model beside a C++ dataset_fn whose loaders are forked processes."""
    FLAGS = {"model_def": "exactness.python_exactness.Exactness"}

    def test_repeated_worker_sigkills(self):
        self.repeated_worker_sigkills("py-sigkill", num_workers=3)

    def test_ps_sigkill_restores_checkpoint(self):
        self.ps_sigkill("py-ps-kill", shard_of("rows", 2), num_workers=3)

    def test_embedding_model_with_forked_loaders(self):
        """The Python model's counts in an elasticdl.nn.Embedding table on two servers, its
        records parsed by exactness.cc's forked_dataset_fn (each worker forks two loader
        processes beside its interpreter); a worker is killed inside a task."""
        epochs = 2
        job, job_dir, output, log = self.start(
            "py-forked", num_epochs=epochs, num_workers=3, num_ps_pods=2,
            model_def="exactness.python_exactness.EmbeddingExactness",
            dataset_fn="exactness.exactness.forked_dataset_fn")
        worker, _, _, _ = self.signal_worker_mid_task(job, job_dir, log, signal.SIGKILL)
        self.wait_event(job, log, lambda e: e.get("event") == "worker_lost" and
                        e.get("worker") == worker, f"worker_lost of worker {worker}")
        self.assertExact(job, job_dir, output, log, epochs)


if __name__ == "__main__":
    unittest.main()
