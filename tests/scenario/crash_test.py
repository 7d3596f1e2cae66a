"""Crash consistency: SIGKILL the master and the parameter servers while they publish.

Training jobs of tests/zoo/exactness's embedding model (its rows on two
parameter servers, which checkpoint every version) write over the trained
model of the job before them, while the test SIGKILLs their master and
parameter servers. While a job trains, a server is killed as it writes a
checkpoint (once its temporary file appears) and the master at a random
moment; once the master begins to publish (it takes the last checkpoint, has
the servers export their tables into the model being built beside the
output, and exchanges that model into place), the master is killed at a
random moment of the time a publish takes and a server as it exports. A
restarted master publishes again, so the publishing can be hit many times
over. A prediction job's master is killed at random moments, and its workers
as they write a task's predictions.

Right after every kill the test stops the job (the client first, so that
nothing is relaunched, then every process of the job), copies what is
published, and lets the job go on. The copy must hold:
  - checkpoints: every <job_dir>/checkpoints/version-V/ps-I-of-N.ckpt whole
    (its frames and their CRC32C, nothing after them) and of version V;
  - the trained model: the previous job's, whole, or this job's, whole (its
    record, parameters and table export of one version, and every row of
    the table at -E for the E epochs of the job that wrote it);
  - predictions: none yet, or all of them, each record once with its value;
    every task's file whole, one range of records.
A kill "landed mid-publish" when it left the killed process's work cut
short: a checkpoint's or a predictions file's temporary, the model's staging
directory (each counted once). Every job must then finish exactly (every
record trained exactly E times, metrics exact: chaos_test.py's checks; every
prediction once).

Environment (besides job_test.py's ELASTICDL_BIN and ELASTICDL_CACHE_DIR):
  CRASH_KILLS   kills of the training jobs (default 8; the prediction job gets a
                quarter as many, at least 2; docs/benchmarks.md's figures: 60)
  CHAOS_SEED    seed of the kills' timing and targets (default: a new one, printed)
"""
import collections
import os
import shutil
import signal
import time

import chaos_test
import exactness
import job_test

KILLS = int(os.environ.get("CRASH_KILLS", "8"))
# Kills per training job while it trains; the rest of its share while it publishes, as
# long as it does.
TRAINING_KILLS = 3
NUM_PS = 2

def checkpoint_version(data, name):
    """The version a whole checkpoint file's header names (ValueError when not whole)."""
    header = exactness.wire_fields(exactness.checkpoint_frames(data, name)[0])
    return next((v for n, t, v in header if n == 1 and t == 0), 0)


class CrashTest(chaos_test.ChaosCase):
    """SIGKILLs aimed at publishing; the disk checked after each; exact jobs."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.mid_publish = {"checkpoint": 0, "model": 0, "predictions": 0}
        cls.kills = collections.Counter()
        # Temporaries and staging directories already counted as cut short.
        cls.counted = set()

    @classmethod
    def tearDownClass(cls):
        kills = ", ".join(f"{n} of {role}" for role, n in sorted(cls.kills.items()))
        print(f"\ncrash test: {sum(cls.kills.values())} kills ({kills}); landed mid-publish: "
              f"{cls.mid_publish['checkpoint']} checkpoint writes, {cls.mid_publish['model']} "
              f"trained models, {cls.mid_publish['predictions']} prediction files", flush=True)
        super().tearDownClass()

    # -- stopping the world ------------------------------------------------------------

    @staticmethod
    def _stopped(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True  # gone
        return state in ("T", "t", "Z", "X")

    def freeze(self, job, job_dir):
        """SIGSTOPs the client (nothing is relaunched then), then every process of the
        job, until none is left running; returns their pids for thaw()."""
        stopped = []
        pending = [job.proc.pid]
        while pending:
            for pid in pending:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while not all(self._stopped(p) for p in stopped) and time.monotonic() < deadline:
                time.sleep(0.001)
            pending = [p for p in job_test.job_processes(job_dir) if p not in stopped]
        return stopped

    @staticmethod
    def thaw(stopped):
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def snapshot(self, job, job_dir, paths, into):
        """Copies `paths` (files or directories, as they are on disk) into `into` with
        the job stopped; the copy keeps their names."""
        stopped = self.freeze(job, job_dir)
        try:
            os.makedirs(into)
            for path in paths:
                target = os.path.join(into, os.path.basename(path))
                if os.path.isdir(path):
                    # The zoo's compiled library is big and not ours to check here.
                    shutil.copytree(path, target, symlinks=True,
                                    ignore=lambda d, names: ["zoo"] if "zoo" in names else [])
                elif os.path.exists(path):
                    shutil.copy2(path, target)
        finally:
            self.thaw(stopped)
        return into

    # -- what may be on disk -----------------------------------------------------------

    def check_checkpoints(self, snapshot):
        """Problems of the copied checkpoints: [] when every published file is whole and
        of its directory's version."""
        problems = []
        root = os.path.join(snapshot, "checkpoints")
        if not os.path.isdir(root):
            return problems
        for version_dir in sorted(os.listdir(root)):
            if not version_dir.startswith("version-"):
                continue
            version = int(version_dir[len("version-"):])
            for name in sorted(os.listdir(os.path.join(root, version_dir))):
                if name.endswith(".tmp"):
                    continue  # not published
                with open(os.path.join(root, version_dir, name), "rb") as f:
                    data = f.read()
                try:
                    written = checkpoint_version(data, f"{version_dir}/{name}")
                except ValueError as e:
                    problems.append(str(e))
                    continue
                if written != version:
                    problems.append(f"{version_dir}/{name} holds version {written}")
        return problems

    def model_epochs(self, model_dir):
        """The epochs a whole trained model in model_dir was trained for; a string saying
        what is wrong when it is not whole (or not exact)."""
        try:
            with open(os.path.join(model_dir, "trained_model.pbtxt")) as f:
                record = f.read()
            version = int(next(line.split(":")[1] for line in record.splitlines()
                               if line.startswith("model_version:")))
            parameters_version, _ = exactness.read_model_values(
                os.path.join(model_dir, "parameters.pb"))
            exported = os.listdir(os.path.join(model_dir, "embeddings"))
        except (OSError, ValueError, StopIteration) as e:
            return f"{model_dir} is not a whole trained model: {e!r}"
        if parameters_version != version or exported != [f"version-{version}"]:
            return (f"{model_dir} mixes versions: record {version}, parameters "
                    f"{parameters_version}, tables {exported}")
        rows = exactness.read_embedding_rows(os.path.join(model_dir, "embeddings"), "records")
        values = {rows.get(r, [0.0])[0] for r in range(self.TRAIN_RECORDS)}
        if len(values) != 1 or len(rows) != self.TRAIN_RECORDS:
            return f"{model_dir}: rows of several values {sorted(values)[:5]}"
        return -int(values.pop())

    def assertPublished(self, snapshot, output, allowed_epochs, describe):
        """The copied output is absent (allowed_epochs holds None) or a whole model of one
        of allowed_epochs."""
        model = os.path.join(snapshot, os.path.basename(output))
        if not os.path.exists(model):
            self.assertIn(None, allowed_epochs, f"the trained model is gone\n{describe()}")
        else:
            epochs = self.model_epochs(model)
            self.assertIn(epochs, allowed_epochs, f"published: {epochs}\n{describe()}")

    # -- kills -------------------------------------------------------------------------

    def victim(self, job_dir, log, target):
        """The pid of `target` ("master" or a server's index), or None when it is not
        running now (being relaunched, or the job ended)."""
        log.poll()
        pid = log.master_pid() if target == "master" else log.live_ps().get(target)
        role = "master" if target == "master" else "ps"
        return pid if pid and chaos_test.is_process_of(pid, role, job_dir) else None

    def kill_and_check(self, job, job_dir, output, log, target, pid, allowed_epochs, n):
        """SIGKILLs `target` (its process `pid`, from victim()), checks the disk, and
        waits until the job has replaced what was killed."""
        if pid is None:
            return False
        role = "master" if target == "master" else "ps"
        killed_at = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.kills[f"{role} (training)"] += 1
        while not self._stopped(pid):
            time.sleep(0.001)
        # What the killed process left cut short: a checkpoint's temporary of its own, the
        # model's staging directory (each counted once).
        if target != "master":
            fresh = {t for t in self.checkpoint_temporaries(job_dir) - self.counted
                     if os.path.basename(t).startswith(f"ps-{target}-of-")}
            self.mid_publish["checkpoint"] += bool(fresh)
            self.counted |= fresh
        try:
            staging = os.stat(output + ".elasticdl-staging").st_ino
            self.mid_publish["model"] += staging not in self.counted
            self.counted.add(staging)
        except FileNotFoundError:
            pass
        snap = self.snapshot(job, job_dir,
                             [os.path.join(job_dir, "checkpoints"), output,
                              output + ".elasticdl-staging"],
                             os.path.join(self.dir, f"snapshot-{n}"))
        describe = lambda: f"kill {n} of {target}\n{self.describe(job, log)}"  # noqa: E731
        self.assertEqual(self.check_checkpoints(snap), [], describe())
        self.assertPublished(snap, output, allowed_epochs, describe)
        shutil.rmtree(snap)
        # Back, unless the kill came as the job was ending.
        if target == "master":
            back = lambda e: (e.get("event") == "master_started" and  # noqa: E731
                              e.get("pid") != pid and e["t"] >= killed_at)
        else:
            back = lambda e: (e.get("event") == "ps_registered" and  # noqa: E731
                              e.get("ps") == target and e["t"] >= killed_at)
        self.until(job, log, lambda: job.proc.poll() is not None or
                   any(back(e) for e in log.events), f"{target} back after kill {n}")
        return True

    def target(self):
        return self.rng.choice(["master"] + list(range(NUM_PS)))

    def checkpoint_temporaries(self, job_dir):
        """The checkpoint files being written now (their temporaries)."""
        root = os.path.join(job_dir, "checkpoints")
        found = set()
        try:
            for version_dir in os.listdir(root):
                for name in os.listdir(os.path.join(root, version_dir)):
                    if name.endswith(".tmp"):
                        found.add(os.path.join(version_dir, name))
        except OSError:
            pass  # a version removed meanwhile
        return found

    def wait_for_checkpoint_write(self, job, job_dir, ps):
        """Waits (up to a few seconds) until server `ps` is writing a checkpoint."""
        before = self.checkpoint_temporaries(job_dir)
        prefix = f"ps-{ps}-of-"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and job.proc.poll() is None:
            if any(os.path.basename(name).startswith(prefix)
                   for name in self.checkpoint_temporaries(job_dir) - before):
                return True
        return False

    def watch_publish(self, job, staging):
        """Seconds the model's staging directory existed while the job published it."""
        while not os.path.exists(staging) and job.proc.poll() is None:
            time.sleep(0.0005)
        start = time.monotonic()
        while os.path.exists(staging) and job.proc.poll() is None:
            time.sleep(0.0005)
        return time.monotonic() - start

    def train_with_kills(self, run, previous_model, budget, epochs, previous_epochs):
        """One training job whose --output holds the previous job's model, killed up to
        `budget` times; returns (kills, its trained model)."""
        output = os.path.join(self.dir, f"model-crash-{run}")
        os.rename(previous_model, output)
        job, job_dir, output, log = self.start(
            f"crash-{run}", num_epochs=epochs, num_ps_pods=NUM_PS, num_workers=3,
            model_def=chaos_test.EMBEDDING_MODEL, checkpoint_steps=1, keep_checkpoint_max=3,
            max_master_restarts=100, max_ps_relaunches=100)
        allowed = {previous_epochs, epochs}
        staging = output + ".elasticdl-staging"
        kills = 0
        # While it trains: a server as it writes a checkpoint, the master at a random
        # moment (as it journals).
        while kills < min(budget, TRAINING_KILLS):
            self.until(job, log, lambda: log.training_done() >= 1, "a finished training task")
            target = self.target()
            pid = self.victim(job_dir, log, target)
            if target == "master":
                time.sleep(self.rng.uniform(0, 1.0))
            elif not self.wait_for_checkpoint_write(job, job_dir, target):
                break
            if os.path.exists(staging) or job.proc.poll() is not None:
                break  # publishing already
            kills += self.kill_and_check(job, job_dir, output, log, target, pid, allowed,
                                         f"{run}.{kills}")
        # While it publishes: once the staging directory appears, the master at a random
        # moment of a publish, or a server as it exports its tables.
        while kills < budget and job.proc.poll() is None:
            target = "master" if self.rng.random() < 0.6 else self.rng.randrange(NUM_PS)
            pid = self.victim(job_dir, log, target)
            if pid is None:
                time.sleep(0.05)
                continue
            deadline = time.monotonic() + self.JOB_TIMEOUT
            while not os.path.exists(staging) and job.proc.poll() is None:
                if time.monotonic() > deadline:
                    self.fail(f"no staging directory\n{self.describe(job, log)}")
                time.sleep(0.0005)
            if target == "master":
                time.sleep(self.rng.uniform(0, self.publish_seconds))
            else:
                exporting = os.path.join(staging, "embeddings")
                deadline = time.monotonic() + self.publish_seconds
                while not os.path.exists(exporting) and time.monotonic() < deadline:
                    pass
            if job.proc.poll() is not None:
                break
            kills += self.kill_and_check(job, job_dir, output, log, target, pid, allowed,
                                         f"{run}.{kills}")
        self.assertExact(job, job_dir, output, log, epochs)
        self.assertEqual(self.model_epochs(output), epochs)
        return kills, output

    def test_kills_while_publishing(self):
        # The first model: one epoch, no kills; how long its publishing takes.
        job, job_dir, model, log = self.start(
            "crash-first", num_epochs=1, num_ps_pods=NUM_PS, model_def=chaos_test.EMBEDDING_MODEL,
            params=exactness.model_params(self.TRAIN_RECORDS, 0))
        self.publish_seconds = self.watch_publish(job, model + ".elasticdl-staging")
        print(f"\npublishing the first model took {self.publish_seconds:.3f} s", flush=True)
        self.assertExact(job, job_dir, model, log, 1)
        kills, run, previous = 0, 0, 1
        while kills < KILLS:
            epochs = 3 if previous == 2 else 2
            took, model = self.train_with_kills(run, model, KILLS - kills, epochs, previous)
            kills += took
            previous, run = epochs, run + 1

    # -- predictions -------------------------------------------------------------------

    def check_predictions(self, snapshot, output, epochs, killed_pid):
        """Problems of the copied predictions ([] when the merged file is absent or
        whole and exact, and every task's file is whole), and whether the killed
        process left a temporary file."""
        problems, cut_short = [], False
        merged = os.path.join(snapshot, os.path.basename(output))
        if os.path.exists(merged):
            problems += self.prediction_problems(merged, whole=True, epochs=epochs)
        tasks = os.path.join(snapshot, "predictions")
        for name in sorted(os.listdir(tasks)) if os.path.isdir(tasks) else []:
            if ".tmp." in name:
                cut_short |= f".tmp.{killed_pid}." in name
                continue
            problems += self.prediction_problems(os.path.join(tasks, name), whole=False,
                                                 epochs=epochs)
        # A dead process's temporary stays where it was.
        for name in os.listdir(os.path.dirname(output)):
            cut_short |= name.startswith(f"{os.path.basename(output)}.tmp.{killed_pid}.")
        return problems, cut_short

    def prediction_problems(self, path, whole, epochs):
        """What is wrong with a predictions file: a task's (lines of file,index,value) or
        the merged one (a header, then every record once)."""
        with open(path) as f:
            text = f.read()
        if not text.endswith("\n"):
            return [f"{path}: its last line is cut short"]
        lines = text.splitlines()
        if whole:
            if lines[:1] != ["file,index,output_0"]:
                return [f"{path}: header {lines[:1]}"]
            lines = lines[1:]
        indexes = []
        for line in lines:
            fields = line.rsplit(",", 2)
            if len(fields) != 3 or float(fields[2]) != -epochs:
                return [f"{path}: line {line!r}"]
            indexes.append(int(fields[1]))
        if whole and sorted(indexes) != list(range(self.TRAIN_RECORDS)):
            return [f"{path}: {len(indexes)} predictions, not each record once"]
        if not whole and indexes != list(range(indexes[0], indexes[0] + len(indexes))):
            return [f"{path}: records not one range"]
        return []

    def prediction_writer(self, job, tasks_dir):
        """The pid of a process writing a task's predictions now (seen by the temporary
        file it writes), or None after a few seconds without one."""
        seen = set(os.listdir(tasks_dir)) if os.path.isdir(tasks_dir) else set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and job.proc.poll() is None:
            try:
                names = os.listdir(tasks_dir)
            except FileNotFoundError:
                continue
            for name in names:
                if ".csv.tmp." in name and name not in seen:
                    return int(name.split(".csv.tmp.")[1].split(".")[0])
        return None

    def test_kills_while_predicting(self):
        job, job_dir, model, log = self.start(
            "predict-model", num_epochs=1, params=exactness.model_params(self.TRAIN_RECORDS, 0))
        self.assertExact(job, job_dir, model, log, 1)
        output = os.path.join(self.dir, "predictions.csv")
        job_dir = os.path.join(self.dir, "job-predict")
        self._job_dirs.append(job_dir)
        job = job_test.Job(["predict", f"--trained_model={model}",
                            f"--prediction_data={self.train_file}", f"--output={output}",
                            f"--job_dir={job_dir}", "--num_workers=3",
                            f"--minibatch_size={self.MINIBATCH}", "--num_minibatches_per_task=2",
                            "--max_master_restarts=100", "--no_progress"])
        self._jobs.append(job)
        log = exactness.EventLog(job_dir)
        kills = 0
        tasks_dir = os.path.join(job_dir, "predictions")
        while kills < max(2, KILLS // 4) and job.proc.poll() is None:
            self.until(job, log, lambda: log.master_pid(), "a master")
            if self.rng.random() < 0.5:
                # The master, at a random moment.
                time.sleep(self.rng.uniform(0, 0.5))
                log.poll()
                pid, role = log.master_pid(), "master"
            else:
                # A worker as it writes a task's predictions (its pid names the temporary).
                pid, role = self.prediction_writer(job, tasks_dir), "worker"
            # (A writer's pid comes from its temporary in the job's own directory; looking
            # it up in /proc first would take longer than its write.)
            if pid is None or (role == "master" and
                               not chaos_test.is_process_of(pid, role, job_dir)):
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kills += 1
            self.kills[f"{role} (prediction)"] += 1
            while not self._stopped(pid):
                time.sleep(0.001)
            snap = self.snapshot(job, job_dir, [output, os.path.join(job_dir, "predictions")],
                                 os.path.join(self.dir, f"snapshot-predict-{kills}"))
            problems, cut_short = self.check_predictions(snap, output, 1, pid)
            self.assertEqual(problems, [], self.describe(job, log))
            self.mid_publish["predictions"] += cut_short
            shutil.rmtree(snap)
            if role == "master":
                self.until(job, log, lambda p=pid: job.proc.poll() is not None or any(
                    e.get("event") == "master_started" and e.get("pid") != p for e in log.events),
                    f"the master restarted after kill {kills}")
        code = job.wait(self.JOB_TIMEOUT)
        self.assertEqual(code, 0, self.describe(job, log))
        self.assertEqual(self.prediction_problems(output, whole=True, epochs=1), [],
                         self.describe(job, log))
        self.assertNothingLeft(job_dir)
