"""The chaos scenarios under --distribution_strategy=AllreduceStrategy.

The same row-exact jobs as chaos_test.py (tests/zoo/exactness, whose
dataset_fn shuffles every task's records, and unit_step_optimizer, which
lowers every row of a step's records by exactly 1 whatever the number of
minibatches in the step), with the model and its optimizer on the workers
and gradients all-reduced, three workers: kills inside tasks, SIGTERM,
scaling up and down, a worker frozen until its lease lapses, the master
killed; and the zoo's Python twin under kills. Every scenario also requires
that survivors keep their processes: only the workers the test stops are
ever replaced. Models with Embedding layers are refused.

Environment: as chaos_test.py (CHAOS_REPEAT, CHAOS_SEED, ELASTICDL_BIN).
"""
import os
import signal
import textwrap
import unittest

import chaos_test
import exactness
import job_test
import python_model_test

PYTHON_MODEL = "exactness.python_exactness.Exactness"
PYTHON_EMBEDDING_MODEL = "exactness.python_exactness.EmbeddingExactness"


class AllreduceChaosTest(chaos_test.ChaosTest):
    FLAGS = {"distribution_strategy": "AllreduceStrategy", "num_ps_pods": None,
             "num_workers": 3}

    # Parameter servers, asynchronous steps, --grads_to_wait and backup
    # attempts are the other strategy's.
    test_repeated_worker_sigkills_async = None
    test_straggler_task_is_backed_up = None
    test_ps_sigkill_restores_checkpoint = None
    test_embedding_ps_sigkill_restores_rows = None
    test_embedding_worker_sigkills_async = None
    test_sync_training_applies_the_last_partial_step = None

    def start(self, name, prefix=(), **flags):
        self.signalled = set()
        return super().start(name, prefix, **flags)

    def signal_worker_mid_task(self, job, job_dir, log, sig, *args, **kwargs):
        signalled = super().signal_worker_mid_task(job, job_dir, log, sig, *args, **kwargs)
        self.signalled.add(signalled[0])
        return signalled

    def assertExact(self, job, job_dir, output, log, epochs=2):
        super().assertExact(job, job_dir, output, log, epochs)
        # Whatever the scenario: only the workers it signalled were replaced.
        self.assertSurvivorsKept(job, log, replaced=tuple(self.signalled))

    def assertSurvivorsKept(self, job, log, replaced=()):
        """Every worker process the job started lived until the job (or the test) ended it:
        each worker id was started once, but those in `replaced`."""
        describe = self.describe(job, log)
        for worker, starts in self.starts(log).items():
            if worker not in replaced:
                self.assertEqual(starts, 1, f"worker {worker} was started again\n{describe}")
        # A master started again is not its workers' parent: it cannot tell how they
        # ended, and says so ("exit status lost") when they leave at the job's end.
        lost = {e.get("worker") for e in log.of("worker_lost")
                if e.get("how") != "exit status lost"}
        self.assertLessEqual(lost, set(replaced), describe)

    @staticmethod
    def starts(log):
        counts = {}
        for e in log.of("worker_started"):
            counts[e.get("worker")] = counts.get(e.get("worker"), 0) + 1
        return counts

    def test_baseline(self):
        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(f"ar-baseline-{run}", num_epochs=epochs)
            self.assertExact(job, job_dir, output, log, epochs)
            describe = self.describe(job, log)
            # Counters add up over the members of every step (running statistics
            # are averaged): what each minibatch's forward added.
            self.assertEqual(exactness.check_trained_counts(output, self.TRAIN_RECORDS, epochs),
                             "", describe)
            self.assertEqual(log.of("ps_started"), [], describe)
            self.assertEqual(len(log.of("worker_started")), 3, describe)
            self.assertSurvivorsKept(job, log)
            self.assertEqual(log.training_done(), chaos_test.TASKS_PER_EPOCH * epochs, describe)
            # The trained model is the final checkpoint of the workers.
            self.assertTrue(os.path.isdir(os.path.join(job_dir, "checkpoints")), describe)
        self.repeat(scenario)

    def test_worker_frozen_until_its_lease_lapses(self):
        """SIGSTOP one worker inside a task: the others wait in the step's collective
        until the master takes the frozen one as lost (its lease lapses), then go on
        without it; resumed, it finds itself out of the job. Exact."""
        lease_ms = 2000

        def scenario(run):
            epochs = 2
            job, job_dir, output, log = self.start(
                f"ar-frozen-{run}", num_epochs=epochs, worker_lease_ms=lease_ms,
                params=exactness.model_params(chaos_test.TRAIN_RECORDS,
                                              chaos_test.SIGKILL_SLEEP_MS))
            self.until(job, log, lambda: log.training_done() >= 1, "a finished training task")
            worker, pid, _, sent = self.signal_worker_mid_task(job, job_dir, log, signal.SIGSTOP)
            try:
                lost = self.wait_event(job, log, lambda e: e.get("event") == "worker_lost" and
                                       e.get("worker") == worker, f"worker_lost of {worker}")
                # The master waited out the whole lease, counted from the
                # frozen worker's last call: one that came before the signal,
                # or a heartbeat already on its way that landed just after it.
                # (How long before the signal that call came depends on the
                # load: a heartbeat may come late.)
                describe = f"{lost}, signal at {sent}\n{self.describe(job, log)}"
                self.assertGreaterEqual(lost["silent_ms"], lease_ms, describe)
                self.assertLessEqual(lost["t"] - lost["silent_ms"] / 1000, sent + 0.5, describe)
                done = log.training_done()
                self.until(job, log, lambda: log.training_done() > done,
                           "a task finished without the frozen worker")
            finally:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            self.assertExact(job, job_dir, output, log, epochs)
            self.assertSurvivorsKept(job, log, replaced=(worker,))
            # Goodput's account of it: the frozen worker's silence until the
            # master gave it up is lost; the survivors' step that waited for it
            # was discarded, and forming the group again is recovery.
            seconds = job_test.final_worker_seconds(job_dir)
            describe = f"{seconds}\n{self.describe(job, log)}"
            self.assertGreaterEqual(seconds.get("lost", 0), lease_ms / 1000 * 0.9, describe)
            self.assertGreater(seconds.get("discarded", 0), 0, describe)
            self.assertGreater(seconds.get("recovery", 0), 0, describe)
            self.assertGreater(seconds.get("trained", 0), 0, describe)
        self.repeat(scenario)

    def test_two_workers_take_their_next_task_ahead(self):
        """Two workers take no turns: each asks for its next task once its current task's
        pipeline has made its last minibatch and holds both until that one is reported. A worker
        killed (SIGKILL) and one stopped (SIGTERM) meanwhile lose nothing and apply
        nothing twice."""
        def scenario(run):
            epochs = 3
            job, job_dir, output, log = self.start(f"ar-ahead-{run}", num_epochs=epochs,
                                                   num_workers=2)
            self.until(job, log, lambda: any("ahead_of" in e for e in log.of("task_dispatched")),
                       "a task handed out ahead of its worker's current one")
            killed, _, _, _ = self.signal_worker_mid_task(job, job_dir, log, signal.SIGKILL)
            self.wait_event(job, log, lambda e: e.get("event") == "worker_lost" and
                            e.get("worker") == killed, f"worker_lost of worker {killed}")
            self.until(job, log, lambda: len(log.live_workers()) >= 2, "a replacement worker")
            stopped, _, _, _ = self.signal_worker_mid_task(job, job_dir, log, signal.SIGTERM)
            self.wait_event(job, log, lambda e: e.get("event") in ("worker_left", "worker_lost")
                            and e.get("worker") == stopped, f"worker {stopped} leaving")
            self.assertExact(job, job_dir, output, log, epochs)
            describe = self.describe(job, log)
            # The stopped worker handed back what it held, the next task included.
            self.assertEqual([e["requeued"] for e in log.of("worker_left", worker=stopped)], [0],
                             describe)
            ahead = [e for e in log.of("task_dispatched") if "ahead_of" in e]
            self.assertGreaterEqual(len(ahead), chaos_test.TASKS_PER_EPOCH, describe)
        self.repeat(scenario)

    def test_python_model_repeated_worker_sigkills(self):
        """The exactness zoo's Python twin (a Python model, a Python dataset_fn that
        shuffles) all-reducing its gradients while workers are killed inside tasks."""
        self.repeated_worker_sigkills("ar-py-sigkill", model_def=PYTHON_MODEL, num_workers=3)

    def test_a_model_with_embedding_layers_is_refused_before_anything_starts(self):
        """The embedding-table models' rows need parameter servers: the client says so,
        naming the table and the strategy to use, and starts no process."""
        for model_def in (chaos_test.EMBEDDING_MODEL, PYTHON_EMBEDDING_MODEL):
            with self.subTest(model_def=model_def):
                job, job_dir, _, _ = self.start("ar-embedding-" + model_def.split(".")[1],
                                                model_def=model_def)
                self.assertEqual(job.wait(60), 1, job.describe())
                self.assertIn("error: --distribution_strategy=AllreduceStrategy: the model's "
                              "embedding table '", job.stderr)
                self.assertIn("use --distribution_strategy=ParameterServerStrategy", job.stderr)
                self.assertFalse(os.path.exists(os.path.join(job_dir, "events.jsonl")),
                                 job.describe())

class BufferStepsTest(job_test.JobTestCase):
    """How a step of several workers combines a model's buffers: a counter adds up what
    each worker's forward added, under both strategies, and under AllreduceStrategy a
    running statistic that averages cumulatively (BatchNorm with momentum=None) is the
    mean over every minibatch trained. 2048 records in minibatches of 32 (all full, so the mean of the minibatches'
    mean ids is the mean id, 1023.5), three workers, two epochs: 128 minibatches."""

    def test_counters_add_up_and_cumulative_means_cover_every_minibatch(self):
        data = self.path("ids.recordio")
        exactness.write_records(data, range(2048))
        for name, flags in (("allreduce", {"distribution_strategy": "AllreduceStrategy",
                                           "num_ps_pods": None}),
                            ("ps", {})):
            with self.subTest(name):
                model = self.path("model-" + name)
                job = self.run_job(self.train_args(
                    self.job_dir(name), model_zoo=exactness.MODEL_ZOO,
                    model_def="exactness.python_exactness.CumulativeNormExactness",
                    params="num_records=2048", optimizer="unit_step_optimizer",
                    training_data=data, validation_data=None, minibatch_size=32,
                    num_workers=3, num_epochs=2, output=model, **flags))
                self.assertSucceeded(job)
                self.assertEqual(exactness.check_rows(model, 2048, 2), "", job.describe())
                self.assertEqual(exactness.check_trained_counts(model, 2048, 2), "",
                                 job.describe())
                _, buffers = exactness.read_model_values(os.path.join(model, "parameters.pb"),
                                                         field=3)
                self.assertEqual(buffers["norm.num_batches_tracked"][1], [128], job.describe())
                if name == "allreduce":
                    # A server folds each push in with its worker's own count, an
                    # approximation with several pushes a step (README, "BatchNorm
                    # statistics"); a step of the collective group weighs them exactly.
                    self.assertAlmostEqual(buffers["norm.running_mean"][1][0], 1023.5,
                                           delta=0.01, msg=job.describe())


class NondeterministicModelTest(job_test.JobTestCase):
    def test_a_model_built_differently_by_each_worker_fails_the_job(self):
        """A constructor that draws from Python's own random numbers builds another model in
        each worker: the group refuses to train it (each worker would apply the same
        gradients to different parameters), and the job's error says why."""
        zoo = self.path("zoo")
        os.makedirs(os.path.join(zoo, "nondet"))
        with open(os.path.join(zoo, "nondet", "model.py"), "w") as f:
            f.write(python_model_test.MNIST_LINEAR + textwrap.dedent("""
                import random

                class Nondeterministic(Model):
                    def __init__(self):
                        super().__init__()
                        with torch.no_grad():
                            self.dense.bias.fill_(random.SystemRandom().random())
                """))
        job = self.run_job(self.train_args(
            self.job_dir("nondet"), model_zoo=zoo, model_def="nondet.model.Nondeterministic",
            distribution_strategy="AllreduceStrategy", num_ps_pods=None, validation_data=None,
            min_workers=2))
        # Whatever relaunches are left: a worker started in place of one
        # that left would form a smaller group that has nobody to disagree
        # with, and train.
        self.assertFailedWith(job, "error: the model's initial values differ between worker "
                              "ranks ", within=120)
        self.assertNoProcessesLeft(self.job_dir("nondet"))


if __name__ == "__main__":
    unittest.main()
