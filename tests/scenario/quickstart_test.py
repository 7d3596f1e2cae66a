"""Scenario tests for README.md's quick start, as written, and `elasticdl zoo init`.

  quick start  every ```sh block under README.md's "## Quick start" heading (up to the
               next "## " heading), run in order by bash (set -euo pipefail) in a fresh
               directory, with the binary's directory first on PATH; then the trained
               model, the evaluation's accuracy and the predictions are checked
  templates    `zoo init --template=mnist|pytorch|tabular|trial`, then the ```sh blocks of the
               README.md each zoo gets, as written: the data, training, evaluation and
               prediction (the trial's: one run with --params, then the experiment)
  errors       `zoo init` into a directory that is not empty, or with a template that
               does not exist: an error naming it, and nothing written

Environment: ELASTICDL_BIN, ELASTICDL_CACHE_DIR (as job_test.py).
"""
import csv
import os
import re
import subprocess
import tempfile
import time
import unittest

from job_test import BIN, CACHE_DIR, REPO

README = os.path.join(REPO, "README.md")
# What any one block may take; the first job compiles the zoo (about 10-20 s on 2 cores).
BLOCK_TIMEOUT = 300
ACCURACY = re.compile(r"^accuracy: ([0-9.]+) \(model version \d+\)$", re.M)
MNIST_WRITTEN = re.compile(r"^wrote (\d+) training and (\d+) test examples", re.M)
# Chance is 0.1 for Fashion-MNIST's 10 classes, 1/3 for the tabular template's 3.
MIN_MNIST_ACCURACY = 0.4
MIN_TABULAR_ACCURACY = 0.7


def sh_blocks(markdown, heading=None):
    """The ```sh fenced blocks of `markdown`, in order; with `heading` ("## Quick start"),
    only those between that heading and the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#")) if heading else 0
    blocks, block, fence, inside = [], [], None, heading is None
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence is not None:  # inside a fenced block: its lines are not headings
            if stripped == "```":
                if fence == "sh" and inside:
                    blocks.append("\n".join(block) + "\n")
                fence = None
            else:
                block.append(line)
        elif stripped.startswith("```"):
            fence, block = stripped[3:].strip(), []
        elif heading is not None and stripped == heading:
            inside = True
        elif inside and heading is not None and re.match(r"^#{1,%d} " % level, line):
            break
    return blocks


class QuickstartTest(unittest.TestCase):

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="elasticdl-quickstart-")
        self.dir = self._tmp.name
        # Jobs' directories (under $TMPDIR) go with the test's.
        os.makedirs(os.path.join(self.dir, ".tmp"))
        self.env = dict(os.environ, ELASTICDL_CACHE_DIR=CACHE_DIR,
                        TMPDIR=os.path.join(self.dir, ".tmp"),
                        PATH=os.path.dirname(BIN) + os.pathsep + os.environ.get("PATH", ""))

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def run_block(self, block, name):
        """Runs a shell block in the test's directory; returns its stdout. Output goes to
        files, so that a process the block leaves behind cannot hold a pipe open."""
        script = self.path(f".{name}.sh")
        with open(script, "w") as f:
            f.write("set -euo pipefail\n" + block)
        out, err = self.path(f".{name}.out"), self.path(f".{name}.err")
        started = time.monotonic()
        with open(out, "w") as stdout, open(err, "w") as stderr:
            proc = subprocess.run(["bash", script], cwd=self.dir, env=self.env, stdout=stdout,
                                  stderr=stderr, timeout=BLOCK_TIMEOUT)
        with open(out) as f:
            stdout = f.read()
        with open(err) as f:
            stderr = f.read()
        self.assertEqual(proc.returncode, 0,
                         f"{name} exited {proc.returncode} after "
                         f"{time.monotonic() - started:.1f} s:\n{block}\n"
                         f"stdout:\n{stdout}\nstderr:\n{stderr}")
        return stdout

    def run_blocks(self, blocks, name):
        """Runs the blocks in order; returns their stdout, joined."""
        self.assertTrue(blocks, f"{name}: no ```sh block")
        return "".join(self.run_block(b, f"{name}-{i}") for i, b in enumerate(blocks))

    def elasticdl(self, *args):
        return subprocess.run(["elasticdl", *args], cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=60)

    def assertAccuracyAbove(self, stdout, minimum, what):
        found = ACCURACY.findall(stdout)
        self.assertTrue(found, f"{what}: no accuracy printed:\n{stdout}")
        self.assertGreater(float(found[-1]), minimum, f"{what}:\n{stdout}")

    def assertPredictions(self, path, records):
        """A CSV file of predictions: a header, then one row per record."""
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0][:2], ["file", "index"], path)
        self.assertEqual(len(rows) - 1, records, path)

    def test_quick_start_as_written(self):
        with open(README) as f:
            blocks = sh_blocks(f.read(), "## Quick start")
        self.assertGreaterEqual(len(blocks), 1, "README.md: no ```sh block under ## Quick start")
        outputs = []
        for i, block in enumerate(blocks):
            outputs.append(self.run_block(block, f"quick-start-{i}"))
        stdout = "".join(outputs)

        # The trained model, the evaluation's accuracy, a prediction per test record.
        models = [m for m in os.listdir(self.dir)
                  if os.path.isfile(os.path.join(self.dir, m, "trained_model.pbtxt"))]
        self.assertEqual(len(models), 1, f"trained models in {os.listdir(self.dir)}")
        written = MNIST_WRITTEN.search(stdout)
        self.assertIsNotNone(written, f"no `data mnist` output:\n{stdout}")
        evaluate = next(o for o, b in zip(outputs, blocks) if "elasticdl evaluate" in b)
        self.assertAccuracyAbove(evaluate, MIN_MNIST_ACCURACY, "evaluate")
        predictions = re.search(r"elasticdl predict .*?--output=(\S+)", "".join(blocks),
                                re.S).group(1)
        self.assertPredictions(self.path(predictions), int(written.group(2)))

    def zoo_init(self, name, template):
        proc = self.elasticdl("zoo", "init", name, f"--template={template}")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("next: ", proc.stdout)
        with open(self.path(os.path.join(name, "README.md"))) as f:
            return sh_blocks(f.read())

    def test_mnist_template_trains_as_its_readme_says(self):
        blocks = self.zoo_init("mnist_zoo", "mnist")
        stdout = self.run_blocks(blocks, "mnist")
        self.assertTrue(os.path.isfile(self.path("mnist_model/trained_model.pbtxt")))
        self.assertAccuracyAbove(stdout, MIN_MNIST_ACCURACY, "mnist")
        written = MNIST_WRITTEN.search(stdout)
        self.assertPredictions(self.path("mnist_predictions.csv"), int(written.group(2)))

    def test_pytorch_template_trains_exports_as_its_readme_says(self):
        blocks = self.zoo_init("pytorch_zoo", "pytorch")
        stdout = self.run_blocks(blocks, "pytorch")
        with open(self.path("pytorch_model/trained_model.pbtxt")) as f:
            self.assertIn('model_def: "mnist.model.Model"', f.read())
        self.assertAccuracyAbove(stdout, MIN_MNIST_ACCURACY, "pytorch")
        written = MNIST_WRITTEN.search(stdout)
        self.assertPredictions(self.path("pytorch_predictions.csv"), int(written.group(2)))
        self.assertIn("as TorchScript (torch.jit.script) to pytorch_model.pt", stdout)
        self.assertGreater(os.path.getsize(self.path("pytorch_model.pt")), 0)

    def test_tabular_template_trains_as_its_readme_says(self):
        blocks = self.zoo_init("tabular_zoo", "tabular")
        stdout = self.run_blocks(blocks, "tabular")
        self.assertIn("converted 600 records", stdout)
        self.assertAccuracyAbove(stdout, MIN_TABULAR_ACCURACY, "tabular")
        self.assertPredictions(self.path("tabular_predictions.csv"), 200)

    def test_trial_template_trains_and_searches_as_its_readme_says(self):
        blocks = self.zoo_init("trial_zoo", "trial")
        stdout = self.run_blocks(blocks, "trial")
        self.assertTrue(os.path.isfile(self.path("trial_model/trained_model.pbtxt")))
        self.assertAccuracyAbove(stdout, MIN_MNIST_ACCURACY, "trial")
        written = MNIST_WRITTEN.search(stdout)
        self.assertPredictions(self.path("trial_predictions.csv"), int(written.group(2)))
        with open(self.path("trial_experiment/trials.csv"), newline="") as f:
            self.assertEqual(len(list(csv.reader(f))) - 1, 4)
        self.assertTrue(
            os.path.isfile(self.path("trial_experiment/best_model/trained_model.pbtxt")))

    def test_zoo_init_refuses_a_directory_that_is_not_empty(self):
        os.makedirs(self.path("zoo"))
        with open(self.path("zoo/notes.txt"), "w") as f:
            f.write("mine\n")
        proc = self.elasticdl("zoo", "init", "zoo", "--template=mnist")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("error: zoo: exists and is not empty", proc.stderr)
        self.assertEqual(os.listdir(self.path("zoo")), ["notes.txt"])

        # An empty one is fine.
        os.makedirs(self.path("empty"))
        proc = self.elasticdl("zoo", "init", "empty")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("empty/mnist/model.cc", proc.stdout)
        self.assertIn("next: elasticdl data mnist --output=empty/data", proc.stdout)

    def test_zoo_init_refuses_an_unknown_template(self):
        proc = self.elasticdl("zoo", "init", "zoo", "--template=resnet")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("error: --template=resnet: no such template "
                      "(the templates are mnist, pytorch, tabular, trial)", proc.stderr)
        self.assertFalse(os.path.exists(self.path("zoo")))


if __name__ == "__main__":
    unittest.main()
