"""Scenario tests for CIFAR-10: `elasticdl data cifar10`, then train, evaluate and
predict with the zoo's two CIFAR-10 models (model_zoo/cifar10/).

The data is generated in CIFAR-10's binary format (cifar10_data.py: classes of
distinct colours and stripes under noise), imported by the real binary, and
trained on by a local cluster of two workers with the entries' defaults
(--model_def alone). Accuracy well above chance (0.1) shows that the import's
layout (HWC floats 0-255, int64 labels) is the one the models read.

Environment: as job_test.py (ELASTICDL_BIN, ELASTICDL_CACHE_DIR: the zoo is
model_zoo/, compiled once and shared with the other scenario tests).
"""
import csv
import os
import subprocess
import tempfile
import unittest

import cifar10_data
import job_test

TRAIN_PER_FILE = 120  # 600 training records in the five data_batch files
TEST_RECORDS = 200
NUM_EPOCHS = 5
MINIBATCH_SIZE = 16  # about 95 steps of two workers' minibatches in five epochs
# Five epochs over the 600 records (the original's SGD 0.1, BatchNorm, dropout) gave
# 0.50-0.90 test accuracy for seeds 1-4, the same for both models at a given seed (with
# minibatches of 32, half the steps: 0.40-0.77). Chance is 0.1.
MIN_ACCURACY = 0.3

FUNCTIONAL = "cifar10.cifar10_functional_api.custom_model"
SUBCLASS = "cifar10.cifar10_subclass.Cifar10Model"


class Cifar10Test(job_test.JobTestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="elasticdl-cifar10-test-")
        source = os.path.join(cls._tmp.name, "cifar-10-batches-bin")
        written = cifar10_data.write_binary(source, TRAIN_PER_FILE, TEST_RECORDS, seed=10)
        cls.test_labels = [r[0] for r in written[cifar10_data.TEST_FILE]]
        data = os.path.join(cls._tmp.name, "cifar10")
        done = subprocess.run([job_test.BIN, "data", "cifar10", f"--source={source}",
                               f"--output={data}", "--records_per_shard=300"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            cls._tmp.cleanup()
            raise AssertionError(f"data cifar10 failed:\n{done.stdout}{done.stderr}")
        # What JobTestCase.train_args trains and validates on.
        cls.train_file = os.path.join(data, "train")
        cls.validation_file = cls.test_dir = os.path.join(data, "test")
        cls.test_file = os.path.join(cls.test_dir, "data-00000-of-00001.recordio")

    def train_evaluate_predict(self, model_def):
        model = self.path("model")
        train_dir = self.job_dir("train")
        train = self.run_job(self.train_args(
            train_dir, model_def=model_def, num_epochs=NUM_EPOCHS, minibatch_size=MINIBATCH_SIZE,
            num_minibatches_per_task=4, output=model))
        self.assertSucceeded(train)
        self.assertNoProcessesLeft(train_dir)
        records, _ = self.trained(train)
        self.assertEqual(records, NUM_EPOCHS * 5 * TRAIN_PER_FILE, train.describe())
        accuracy, version = self.accuracy(train)
        self.assertGreater(accuracy, MIN_ACCURACY, train.describe())

        evaluate_dir = self.job_dir("evaluate")
        evaluate = self.run_job(["evaluate", f"--trained_model={model}",
                                 f"--validation_data={self.test_dir}",
                                 f"--job_dir={evaluate_dir}", "--no_progress"])
        self.assertSucceeded(evaluate)
        self.assertNoProcessesLeft(evaluate_dir)
        self.assertIn(f"evaluated {TEST_RECORDS} records in ", evaluate.stdout)
        eval_accuracy, eval_version = self.accuracy(evaluate)
        self.assertAlmostEqual(eval_accuracy, accuracy, delta=1e-6, msg=evaluate.describe())
        self.assertEqual(eval_version, version, evaluate.describe())

        predictions = self.path("predictions.csv")
        predict_dir = self.job_dir("predict")
        predict = self.run_job(["predict", f"--trained_model={model}",
                                f"--prediction_data={self.test_dir}", f"--output={predictions}",
                                f"--job_dir={predict_dir}", "--no_progress"])
        self.assertSucceeded(predict)
        self.assertNoProcessesLeft(predict_dir)
        with open(predictions, newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], ["file", "index"] + [f"output_{i}" for i in range(10)])
        rows = rows[1:]
        self.assertEqual(len(rows), TEST_RECORDS, predict.describe())
        self.assertEqual([(r[0], int(r[1])) for r in rows],
                         [(self.test_file, i) for i in range(TEST_RECORDS)])
        correct = 0
        for row, label in zip(rows, self.test_labels):
            outputs = [float(x) for x in row[2:]]
            correct += outputs.index(max(outputs)) == label
        self.assertAlmostEqual(correct / TEST_RECORDS, accuracy, delta=0.01)

    def test_functional_api_model(self):
        self.train_evaluate_predict(FUNCTIONAL)

    def test_subclass_model(self):
        self.train_evaluate_predict(SUBCLASS)


if __name__ == "__main__":
    unittest.main()
