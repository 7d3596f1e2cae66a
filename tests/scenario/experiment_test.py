"""Scenario tests for `elasticdl experiment`: hyperparameter search whose
trials are elastic training jobs sharing a pool of workers.

The trial is tests/zoo/exactness's ExactnessTrial: its model counts how often
each record was trained on (exactness.py), so after any fault a trial's
trained model must hold exactly -E in every row, E being the epochs of the
rungs it completed, each rung a job that starts from the last one's
checkpoint. Its metric `quality` is the trial's own hyperparameter, so the
test knows which trials ASHA must promote: the journal's order of rung ends
and starts is checked against the rule (a trial goes on only from the top
1/divisor of its rung's results so far).

Environment: ELASTICDL_BIN, ELASTICDL_CACHE_DIR (as job_test.py).
"""
import csv
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import corpus
import exactness
from job_test import BIN, CACHE_DIR, REPO, job_processes

TRIAL = "exactness.exactness.ExactnessTrial"
NUM_RECORDS = 256
NUM_VALIDATION = 64
# Rungs of 2 and 4 epochs (max_length 4, divisor 2).
RUNG_EPOCHS = [2, 4]
# Tasks of one minibatch: 16 tasks an epoch. Steps are synchronous; a step
# holding a record twice would lower its row once (the unit-step optimizer),
# but the master never hands out a range another worker holds, and keeps an
# epoch's last ranges out of the next epoch's first ones for twice the
# workers (at most half an epoch), so that with 3 workers nobody waits for
# a range the last epoch still trains.
MINIBATCH_SIZE = 16
MINIBATCHES_PER_TASK = 1
TIMEOUT = 600


def config(exp_dir, searcher="asha", max_trials=4, sleep_ms=5, extra_hparams="",
           hparams=None):
    if hparams is None:
        hparams = (f"  num_records: {NUM_RECORDS}\n"
                   f"  sleep_ms: {sleep_ms}\n"
                   "  quality: {type: double, minval: 0.0, maxval: 1.0}\n")
    return (f"name: {os.path.basename(exp_dir)}\n"
            f"model_zoo: {exactness.MODEL_ZOO}\n"
            f"trial: {TRIAL}\n"
            "data:\n"
            "  training_data: train.rio\n"
            "  validation_data: validation.rio\n"
            "hyperparameters:\n" + hparams + extra_hparams +
            "searcher:\n"
            f"  name: {searcher}\n"
            "  metric: quality\n"
            f"  max_trials: {max_trials}\n"
            "  max_length: {epochs: 4}\n"
            "  num_rungs: 2\n"
            "  divisor: 2\n"
            "  max_concurrent_trials: 2\n"
            "resources:\n"
            "  max_workers: 3\n"
            "job:\n"
            f"  minibatch_size: {MINIBATCH_SIZE}\n"
            f"  num_minibatches_per_task: {MINIBATCHES_PER_TASK}\n"
            "  checkpoint_steps: 4\n"
            "seed: 7\n"
            f"experiment_dir: {exp_dir}\n")


def journal(exp_dir):
    with open(os.path.join(exp_dir, "journal.jsonl")) as f:
        return [json.loads(line) for line in f.read().split("\n") if line.strip()]


def trials_csv(exp_dir):
    with open(os.path.join(exp_dir, "trials.csv")) as f:
        return {int(r["trial"]): r for r in csv.DictReader(f)}


class ExperimentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="experiment_test.")
        exactness.write_records(os.path.join(cls.dir, "train.rio"), range(NUM_RECORDS))
        exactness.write_records(os.path.join(cls.dir, "validation.rio"), range(NUM_VALIDATION))

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP"):
            shutil.rmtree(cls.dir, ignore_errors=True)

    def write_config(self, name, text):
        path = os.path.join(self.dir, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def experiment(self, path, *command, timeout=TIMEOUT):
        env = dict(os.environ, ELASTICDL_CACHE_DIR=CACHE_DIR)
        return subprocess.run([BIN, "experiment", f"--config={path}", *command], cwd=self.dir,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def start(self, path, log):
        env = dict(os.environ, ELASTICDL_CACHE_DIR=CACHE_DIR)
        return subprocess.Popen([BIN, "experiment", f"--config={path}"], cwd=self.dir, env=env,
                                stdout=log, stderr=subprocess.STDOUT)

    def wait_for(self, condition, what, proc=None, timeout=TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                return
            if proc is not None and proc.poll() is not None:
                self.fail(f"the experiment ended ({proc.returncode}) before {what}")
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}")

    def check_finished(self, exp_dir, stdout):
        """Checks a finished ASHA experiment: promotions, exact rows, best model."""
        events = journal(exp_dir)
        self.assertEqual(events[-1]["event"], "finished", events[-1])
        # ASHA's rule, in the order things happened.
        results = {0: {}, 1: {}}
        promoted = set()
        for e in events:
            if e["event"] == "rung_finished":
                self.assertTrue(e["ok"], e)
                results[e["rung"]][e["trial"]] = e["metric"]
            elif e["event"] == "rung_started" and e["rung"] == 1 and e["trial"] not in promoted:
                ranked = sorted(results[0], key=lambda t: (-results[0][t], t))
                top = ranked[:len(ranked) // 2]
                self.assertIn(e["trial"], top, f"trial {e['trial']} promoted from {results[0]}")
                promoted.add(e["trial"])
        ranked = sorted(results[0], key=lambda t: (-results[0][t], t))
        self.assertEqual(len(results[0]), 4)
        self.assertEqual(promoted, set(ranked[:2]), results)
        rows = trials_csv(exp_dir)
        for trial, row in rows.items():
            rung = 1 if trial in promoted else 0
            self.assertEqual(row["state"], "completed" if rung == 1 else "stopped", row)
            self.assertEqual(int(row["records"]), NUM_RECORDS * RUNG_EPOCHS[rung], row)
            # The metric is the trial's quality: the evaluation ran on its model.
            self.assertAlmostEqual(float(row["metric_quality"]), float(row["quality"]), places=5)
            model = os.path.join(exp_dir, "trials", str(trial), f"rung-{rung}", "model")
            self.assertEqual(exactness.check_rows(model, NUM_RECORDS, RUNG_EPOCHS[rung]), "",
                             f"trial {trial} rung {rung}")
        best = max(promoted, key=lambda t: results[1][t])
        self.assertIn(f"best trial: {best} ", stdout)
        self.assertEqual(exactness.check_rows(os.path.join(exp_dir, "best_model"), NUM_RECORDS,
                                              RUNG_EPOCHS[1]), "")
        self.assertFalse(job_processes(exp_dir), "processes of the experiment outlived it")

    def test_client_killed_and_resumed(self):
        exp_dir = os.path.join(self.dir, "killed")
        # 40 ms a minibatch: a running rung's 32 minibatches take a second or more, so
        # that it is still running when the client is killed right after the check.
        path = self.write_config("killed", config(exp_dir, sleep_ms=40))
        with open(os.path.join(self.dir, "killed.log"), "w") as log:
            proc = self.start(path, log)

            def mid_experiment():
                try:
                    events = journal(exp_dir)
                except (OSError, ValueError):
                    return False
                finished = [e for e in events if e["event"] == "rung_finished"]
                running = {(e["trial"], e["rung"]) for e in events if e["event"] == "rung_started"}
                running -= {(e["trial"], e["rung"]) for e in finished}
                if not finished or not running:
                    return False
                # A running rung has trained part of its records.
                for trial, rung in running:
                    job_dir = os.path.join(exp_dir, "trials", str(trial), f"rung-{rung}")
                    if any(e.get("event") == "task_done" for e in exactness.read_events(job_dir)):
                        return True
                return False
            self.wait_for(mid_experiment, "a rung finished and another under way", proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        status = self.experiment(path, "status")
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("interrupted", status.stdout)
        self.assertIn("running", status.stdout)
        # Resumed, then stopped with `stop` while trials run, then resumed again.
        with open(os.path.join(self.dir, "killed-resumed.log"), "w") as log:
            env = dict(os.environ, ELASTICDL_CACHE_DIR=CACHE_DIR)
            proc = subprocess.Popen([BIN, "experiment", f"--config={path}", "resume"],
                                    cwd=self.dir, env=env, stdout=log, stderr=subprocess.STDOUT)
            seen = len(journal(exp_dir))

            def rung_running_again():
                events = journal(exp_dir)[seen:]
                return any(e["event"] == "rung_started" for e in events) or \
                    any(e["event"] == "rung_finished" for e in events)
            self.wait_for(rung_running_again, "the resumed experiment running a rung", proc)
            stop = self.experiment(path, "stop")
            self.assertEqual(stop.returncode, 0, stop.stderr)
            self.assertEqual(proc.wait(timeout=TIMEOUT), 130)
        with open(os.path.join(self.dir, "killed-resumed.log")) as f:
            self.assertIn("[experiment] resuming trial", f.read())
        self.assertIn("stopped", self.experiment(path, "status").stdout)
        resumed = self.experiment(path, "resume")
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        self.check_finished(exp_dir, resumed.stdout)
        events = [e["event"] for e in journal(exp_dir)]
        self.assertEqual(events.count("resumed"), 2)
        self.assertEqual(events.count("stopped"), 1)
        # The best model is an ordinary trained model: predict takes it, and
        # the exactness model predicts rows[id] = -4 (two rungs, 4 epochs).
        predictions = os.path.join(self.dir, "best.csv")
        env = dict(os.environ, ELASTICDL_CACHE_DIR=CACHE_DIR)
        predicted = subprocess.run(
            [BIN, "predict", f"--trained_model={os.path.join(exp_dir, 'best_model')}",
             "--prediction_data=validation.rio", f"--output={predictions}", "--no_progress"],
            cwd=self.dir, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(predicted.returncode, 0, predicted.stderr)
        with open(predictions) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), NUM_VALIDATION)
        self.assertEqual({float(r["output_0"]) for r in rows}, {-4.0})
        # A finished experiment is not resumed again.
        again = self.experiment(path, "resume")
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("has finished", again.stderr)

    def test_trial_worker_killed(self):
        exp_dir = os.path.join(self.dir, "worker")
        path = self.write_config("worker", config(exp_dir, sleep_ms=100))
        killed = []
        with open(os.path.join(self.dir, "worker.log"), "w") as log:
            proc = self.start(path, log)

            def training_worker():
                trials = os.path.join(exp_dir, "trials")
                if not os.path.isdir(trials):
                    return False
                for trial in os.listdir(trials):
                    job_dir = os.path.join(trials, trial, "rung-0")
                    done = [e for e in exactness.read_events(job_dir) if e.get("event") == "task_done"]
                    if not done:
                        continue
                    for pid, argv in job_processes(job_dir).items():
                        if argv[1:2] == ["worker"]:
                            os.kill(pid, signal.SIGKILL)
                            killed.append((job_dir, pid))
                            return True
                return False
            self.wait_for(training_worker, "a trial's worker training", proc)
            out, _ = proc.communicate(timeout=TIMEOUT)
        with open(os.path.join(self.dir, "worker.log")) as f:
            stdout = f.read()
        self.assertEqual(proc.returncode, 0, stdout)
        job_dir = killed[0][0]
        lost = [e for e in exactness.read_events(job_dir) if e.get("event") == "worker_lost"]
        self.assertTrue(lost, f"{job_dir}: no worker_lost event")
        self.check_finished(exp_dir, stdout)

    def test_invalid_configs_fail_before_any_trial(self):
        cases = {
            "searcher": (config(os.path.join(self.dir, "bad1")).replace("name: asha",
                                                                        "name: hyperband"),
                         "searcher.name: 'hyperband' is not one of grid, random, asha"),
            "range": (config(os.path.join(self.dir, "bad2")).replace("maxval: 1.0",
                                                                     "maxval: -1.0"),
                      "hyperparameters.quality: empty range: minval 0 > maxval -1"),
            "undefined": (config(os.path.join(self.dir, "bad3"),
                                 hparams=f"  num_records: {NUM_RECORDS}\n"),
                          "reads hyperparameter 'quality', which hyperparameters: does not define"),
            # A folder of the user's, and the working directory: neither is replaced (and
            # nothing of them deleted), before any trial runs.
            "output": (config(os.path.join(self.dir, "bad4")) + "output: notes\n",
                       "output " + os.path.join(self.dir, "notes") +
                       " exists and is not a trained model of"),
            "output_cwd": (config(os.path.join(self.dir, "bad5")) + "output: .\n",
                           "exists and is not a trained model of"),
        }
        os.makedirs(os.path.join(self.dir, "notes"), exist_ok=True)
        with open(os.path.join(self.dir, "notes", "mine.txt"), "w") as f:
            f.write("a user's notes\n")
        for name, (text, message) in cases.items():
            with self.subTest(name):
                path = self.write_config("bad_" + name, text)
                r = self.experiment(path, timeout=300)
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn(message, r.stderr)
                self.assertIn(path, r.stderr)
                exp_dir = os.path.join(self.dir, "bad" + str(list(cases).index(name) + 1))
                self.assertFalse(os.path.exists(os.path.join(exp_dir, "trials")),
                                 "a trial ran anyway")
        with open(os.path.join(self.dir, "notes", "mine.txt")) as f:
            self.assertEqual(f.read(), "a user's notes\n")
        self.assertTrue(os.path.exists(os.path.join(self.dir, "train.rio")))

    def test_python_model_searched_through_its_params(self):
        """A Python model class (seed 003) as the trial: each trial's hyperparameters are
        its constructor's keyword arguments; its defaults are the program."""
        train, validation = (os.path.join(self.dir, f"mnist-{s}.rio") for s in ("train", "val"))
        corpus.write_subset(train, "train", 0, 512)
        corpus.write_subset(validation, "test", 0, 256)
        exp_dir = os.path.join(self.dir, "python")
        path = self.write_config("python", (
            "name: python\n"
            f"model_zoo: {os.path.join(REPO, 'model_zoo', 'python')}\n"
            "trial: mnist.mnist_class_defaults.MnistModel\n"
            "data:\n"
            f"  training_data: {train}\n"
            f"  validation_data: {validation}\n"
            "hyperparameters:\n"
            "  conv1_channels: {type: categorical, vals: [4, 8]}\n"
            "  conv2_channels: 8\n"
            "  dropout: 0.25\n"
            "searcher:\n"
            "  name: grid\n"
            "  metric: accuracy\n"
            "  max_length: {epochs: 1}\n"
            "  max_concurrent_trials: 2\n"
            "resources:\n"
            "  max_workers: 2\n"
            "job:\n"
            "  minibatch_size: 64\n"
            "seed: 3\n"
            f"experiment_dir: {exp_dir}\n"))
        done = self.experiment(path)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        rows = trials_csv(exp_dir)
        self.assertEqual(sorted(int(r["conv1_channels"]) for r in rows.values()), [4, 8], rows)
        for trial, row in rows.items():
            self.assertEqual(row["state"], "completed", row)
            self.assertGreater(float(row["accuracy"]), 0.1, row)
            models = [os.path.join(root, "parameters.pb")
                      for root, _, files in os.walk(os.path.join(exp_dir, "trials", str(trial)))
                      if "parameters.pb" in files and root.endswith("model")]
            self.assertEqual(len(models), 1, models)
            _, parameters = exactness.read_model_values(models[0])
            self.assertEqual(parameters["conv1.weight"][0], [int(row["conv1_channels"]), 1, 3, 3])
        self.assertTrue(os.path.isfile(os.path.join(exp_dir, "best_model", "parameters.pb")))
        self.assertFalse(job_processes(exp_dir), "processes of the experiment outlived it")


if __name__ == "__main__":
    unittest.main()
