"""Scenario tests for what `--seed` promises and for jobs that diverge.

Every random choice of a job derives from --seed (initial parameters, task
order, dataset_fn's shuffles, dropout masks): with one worker, or with
synchronous steps, the same command gives the same trained model, byte for
byte, at --num_threads=1. A job whose loss or gradients become non-finite
fails, naming the minibatch, the task, the model version and the tensor, and
writes no model.

Environment: as job_test.py.
"""
import os
import unittest

import corpus
import exactness
import job_test

# Reproducibility needs no accuracy: a quarter of job_test's records, in tasks of a quarter
# of its size (two minibatches of 64), so that a job still has as many tasks (8) to order,
# shuffle and hand out as one over all 4000 (the subclass test's tasks of three: 6).
RECORDS = 1000
MINIBATCHES_PER_TASK = 2


class ReproducibilityTest(job_test.JobTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.records_file = os.path.join(os.path.dirname(cls.train_file), "records.recordio")
        corpus.write_subset(cls.records_file, "train", 0, RECORDS)

    def setUp(self):
        super().setUp()
        self.versions = {}  # job name: the trained model's version

    def train_model(self, name, **flags):
        """Trains one epoch of the seed CNN on RECORDS records and returns its
        parameters.pb."""
        model = self.path("model-" + name)
        flags = {"num_minibatches_per_task": MINIBATCHES_PER_TASK, **flags}
        job = self.run_job(self.train_args(self.job_dir(name), output=model, validation_data=None,
                                           training_data=self.records_file, **flags))
        self.assertSucceeded(job)
        self.assertEqual(self.trained(job)[0], RECORDS, job.describe())
        self.versions[name] = self.trained(job)[1]
        self.assertIn(f", seed {flags.get('seed', 0)}\n", job.stdout, job.describe())
        with open(os.path.join(model, "trained_model.pbtxt")) as f:
            record = f.read()
        if flags.get("seed", 0):
            self.assertIn(f"seed: {flags['seed']}\n", record)
        return self.read_parameters(model)

    def test_one_worker_same_seed_same_model(self):
        first = self.train_model("one-a", num_workers=1, seed=7)
        second = self.train_model("one-b", num_workers=1, seed=7)
        self.assertEqual(first, second, "two runs with --seed=7 trained different models")
        other = self.train_model("one-c", num_workers=1, seed=8)
        self.assertNotEqual(first, other, "--seed=8 trained the same model as --seed=7")

    def test_three_synchronous_workers_same_seed_same_model(self):
        # The default mode: every step averages one minibatch of each worker, from the
        # first step on, whichever worker's first task goes out first: the workers go
        # through their tasks in lockstep, a round of three tasks at a time, so that the
        # steps are as many as the rounds' minibatches (8 tasks of 2: 6).
        first = self.train_model("sync-a", num_workers=3, seed=7)
        second = self.train_model("sync-b", num_workers=3, seed=7)
        self.assertEqual(first, second, "two synchronous runs with --seed=7 differ")
        self.assertEqual(self.versions, {"sync-a": 6, "sync-b": 6})
        # A model whose minibatch takes no time at all shows a worker that misses the
        # first step at once (it adds rounds of its own): the exactness model, 3000
        # records in 12 tasks of 8 minibatches, 4 rounds of 3 tasks, 32 steps.
        data = self.path("ids.recordio")
        exactness.write_records(data, range(3000))
        models = []
        for name in ("fast-a", "fast-b"):
            model = self.path("model-" + name)
            job = self.run_job(self.train_args(
                self.job_dir(name), model_zoo=exactness.MODEL_ZOO, model_def=exactness.MODEL_DEF,
                params="num_records=3000", optimizer="unit_step_optimizer", training_data=data,
                validation_data=None, minibatch_size=32, num_workers=3, seed=5, output=model))
            self.assertSucceeded(job)
            self.assertEqual(self.trained(job), (3000, 32), job.describe())
            self.assertEqual(exactness.check_rows(model, 3000, 1), "", job.describe())
            models.append(self.read_parameters(model))
        self.assertEqual(models[0], models[1], "two synchronous runs with --seed=5 differ")

    def test_three_allreduce_workers_same_seed_same_model(self):
        """AllreduceStrategy: a sum of three workers' gradients depends on which worker
        brings which minibatch, so the same seed must deal the same tasks to the same
        ranks. The subclass model shuffles in dataset_fn and drops out."""
        flags = dict(num_workers=3, seed=5, distribution_strategy="AllreduceStrategy",
                     num_ps_pods=None, model_def=job_test.SUBCLASS)
        first = self.train_model("allreduce-a", **flags)
        second = self.train_model("allreduce-b", **flags)
        self.assertEqual(first, second, "two AllreduceStrategy runs with --seed=5 differ")

    def test_subclass_model_with_shuffles_and_dropout_is_reproducible(self):
        """The subclass model's dataset_fn shuffles and its forward drops out, all from the
        job's seed; its Python twin (model_zoo/python) draws the same shuffles and masks,
        so it trains the same model too."""
        flags = dict(num_workers=1, seed=3, num_minibatches_per_task=3)
        first = self.train_model("subclass-a", model_def=job_test.SUBCLASS, **flags)
        second = self.train_model("subclass-b", model_def=job_test.SUBCLASS, **flags)
        self.assertEqual(first, second)
        self.train_model("subclass-python",
                         model_zoo=os.path.join(job_test.REPO, "model_zoo", "python"),
                         model_def="mnist.mnist_subclass.CustomModel", **flags)
        values = [list(exactness.read_model_values(
            os.path.join(self.path("model-" + name), "parameters.pb"))[1].values())
            for name in ("subclass-a", "subclass-python")]
        self.assertGreater(len(values[0]), 0)
        self.assertEqual(values[1], values[0],
                         "the Python file trained another model than its C++ twin")


class DivergenceTest(job_test.JobTestCase):
    def test_a_diverging_job_fails_loudly_and_writes_no_model(self):
        data = self.path("ids.recordio")
        exactness.write_records(data, range(1000))
        model = self.path("model")
        for mode in ({}, {"use_async": "true"}):
            with self.subTest(**mode):
                job_dir = self.job_dir("diverging-" + "-".join(mode))
                job = self.run_job(self.train_args(
                    job_dir, model_zoo=exactness.MODEL_ZOO,
                    model_def="diverging.diverging.Diverging", training_data=data,
                    validation_data=None, minibatch_size=32, output=model, **mode))
                message = self.assertFailedWith(
                    job, "error: training diverged: minibatch ", " of task ",
                    " computed on model version ", "the first non-finite tensor: ",
                    "Nothing was pushed", "--max_nonfinite_minibatches=3", within=300)
                self.assertRegex(message, r"the first non-finite tensor: (the loss|the gradient "
                                 r"of 'w')")
                self.assertFalse(os.path.exists(os.path.join(model, "parameters.pb")),
                                 job.describe())
                self.assertNoProcessesLeft(job_dir)


if __name__ == "__main__":
    unittest.main()
