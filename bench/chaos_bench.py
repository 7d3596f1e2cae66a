#!/usr/bin/python3
"""Recovery figures of `elasticdl train` under faults, each beside what it is compared with.

  (a) SIGKILL of a worker -> its task handed out again: median and max over
      --kills kills (kill time: just before os.kill; re-dispatch time: the
      master's task_dispatched event for that task, redispatch=true).
      Compared with the length of one task.
  (b) After a replacement joins: joining (worker_started -> its first task
      handed out) and back to full throughput (kill -> the replacement's first
      task done, i.e. all workers producing again). Compared with a task's
      length and with the cold start of a worker in the fault-free job.
  (c) Total job time with those kills / without any (same job).
  (d) SIGKILL of the parameter server holding the model -> relaunched ->
      registered from its checkpoint -> first training task done after it.
  (e) SIGKILL of the master -> master_started(resumed) -> first task done
      after it.
(d) and (e) are compared with a task's length and the fault-free job's cold
start (master started -> first task done).

The jobs train tests/zoo/exactness, whose forward sleeps --sleep_ms per
minibatch so that throughput is fixed by the configuration rather than by
the load of the machine; every job's trained rows are checked for exact data
accounting too (each record trained exactly once per epoch).

  bench/chaos_bench.py [--bin build/bin/elasticdl] [--kills 10] ...

Times come from the master's event log (<job_dir>/events.jsonl, unix seconds)
and this process's clock (time.time()); both are this machine's wall clock.
"""
import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scenario"))

import exactness  # noqa: E402
from exactness import EventLog, is_training  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.environ.get("ELASTICDL_BIN",
                                                   os.path.join(ROOT, "build", "bin", "elasticdl")))
    p.add_argument("--cache_dir", default=os.environ.get("ELASTICDL_CACHE_DIR", ""),
                   help="compiled-zoo cache (default: zoo-cache beside the binary's bin/)")
    p.add_argument("--kills", type=int, default=10, help="worker SIGKILLs for (a)-(c)")
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--minibatch_size", type=int, default=32)
    p.add_argument("--minibatches_per_task", type=int, default=4)
    p.add_argument("--sleep_ms", type=int, default=40)
    p.add_argument("--checkpoint_steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600, help="seconds per job")
    p.add_argument("--only", default="abcde", help="which figures, e.g. 'de'")
    return p.parse_args()


def fail(message):
    print(f"chaos_bench: {message}", file=sys.stderr)
    sys.exit(1)


class Bench:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.bin = os.path.abspath(args.bin)
        os.environ["ELASTICDL_BIN"] = self.bin
        if args.cache_dir:
            os.environ["ELASTICDL_CACHE_DIR"] = os.path.abspath(args.cache_dir)
        import job_test  # reads ELASTICDL_BIN and ELASTICDL_CACHE_DIR when imported
        self.jt = job_test
        self.tmp = tempfile.TemporaryDirectory(prefix="chaos-bench-")
        self.train_file = os.path.join(self.tmp.name, "train.recordio")
        exactness.write_records(self.train_file, range(args.records))
        self.task_seconds = args.minibatches_per_task * args.sleep_ms / 1000
        self.count = 0

    # -- jobs ----------------------------------------------------------------

    def start(self, name, **flags):
        a = self.args
        self.count += 1
        job_dir = os.path.join(self.tmp.name, f"job-{self.count}-{name}")
        output = os.path.join(self.tmp.name, f"model-{self.count}-{name}")
        options = {
            "model_zoo": exactness.MODEL_ZOO, "model_def": exactness.MODEL_DEF,
            "training_data": self.train_file,
            "params": exactness.model_params(a.records, a.sleep_ms),
            "num_epochs": a.epochs, "num_workers": a.workers, "num_ps_pods": 1,
            "minibatch_size": a.minibatch_size,
            "num_minibatches_per_task": a.minibatches_per_task, "num_threads": 1,
            "max_worker_relaunches": a.kills + 8, "job_dir": job_dir, "output": output,
            # Exact row counts in the default (synchronous) mode too.
            "optimizer": "unit_step_optimizer",
        }
        options.update(flags)
        argv = (["train"] + [f"--{k}={v}" for k, v in options.items() if v is not None] +
                ["--no_progress"])
        job = self.jt.Job(argv)
        job.job_dir, job.output, job.log = job_dir, output, EventLog(job_dir)
        job.epochs = options["num_epochs"]
        return job

    def alive(self, job):
        return lambda: job.proc.poll() is None

    def until(self, job, condition, what, timeout=120):
        try:
            return job.log.until(condition, timeout, what, alive=self.alive(job))
        except Exception as e:  # noqa: BLE001: TimeoutError, JobEnded
            self.abort(job, str(e))

    def event(self, job, predicate, what, timeout=120):
        return self.until(job, lambda: next((e for e in job.log.events if predicate(e)), None),
                          what, timeout)

    def abort(self, job, message):
        if job.proc.poll() is None:
            job.proc.kill()
        job.wait(30)
        for pid in self.jt.job_processes(job.job_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        fail(f"{message}\n{job.describe()[-4000:]}")

    def finish(self, job):
        """Waits for the job; checks exit 0 and exact rows. Returns its wall seconds."""
        code = job.wait(self.args.timeout)
        if code is None:
            self.abort(job, f"still running after {self.args.timeout} s")
        job.log.poll()
        if code != 0:
            fail(f"job failed (exit {code}):\n{job.describe()[-4000:]}")
        diff = exactness.check_rows(job.output, self.args.records, job.epochs)
        job.exact = "exact" if not diff else f"NOT EXACT: {diff[:300]}"
        return job.elapsed

    def holder(self, job, min_seconds):
        """(worker, pid, task) of a live worker that has held a training task for min_seconds."""
        def find():
            now = time.time()
            live = job.log.live_workers()
            for worker, d in job.log.holders().items():
                if worker in live and now - d["t"] >= min_seconds:
                    return worker, live[worker], d["task"]
            return None
        return self.until(job, find, "a worker inside a training task")

    def kill_worker(self, job):
        """SIGKILLs a worker at a random moment inside a training task; (worker, task, time)."""
        while True:
            worker, pid, task = self.holder(job, self.rng.uniform(0, self.task_seconds))
            job.log.poll()
            if job.log.holders().get(worker, {}).get("task") == task:
                break
        sent = time.time()
        os.kill(pid, signal.SIGKILL)
        return worker, task, sent

    # -- measurements ------------------------------------------------------------

    def cold_start(self, job):
        """master started -> first training task done, in a job's event log (s)."""
        started = job.log.of("master_started")
        done = [e for e in job.log.of("task_done") if job.log.is_training_task(e)]
        return done[0]["t"] - started[0]["t"] if started and done else float("nan")

    def worker_cold_start(self, job):
        """Median over first workers: worker_started -> its first training task done (s)."""
        spans = []
        for s in job.log.of("worker_started"):
            done = [e for e in job.log.of("task_done", worker=s["worker"])
                    if job.log.is_training_task(e)]
            if done:
                spans.append(done[0]["t"] - s["t"])
        return statistics.median(spans) if spans else float("nan")

    def task_length(self, job):
        """Median of task_dispatched -> task_done of training tasks (s)."""
        dispatched = {}
        spans = []
        for e in job.log.events:
            if e.get("event") == "task_dispatched" and is_training(e):
                dispatched[(e["task"], e["worker"])] = e["t"]
            elif e.get("event") == "task_done" and (e["task"], e["worker"]) in dispatched:
                spans.append(e["t"] - dispatched.pop((e["task"], e["worker"])))
        return statistics.median(spans) if spans else float("nan")

    def reference(self):
        job = self.start("reference")
        seconds = self.finish(job)
        self.ref = job
        self.ref_seconds = seconds
        self.ref_task = self.task_length(job)
        self.ref_cold = self.cold_start(job)
        self.ref_worker_cold = self.worker_cold_start(job)

    def worker_kills(self):
        job = self.start("worker-kills")
        detected, redispatch, started, first_dispatch, full = [], [], [], [], []
        for _ in range(self.args.kills):
            worker, task, sent = self.kill_worker(job)
            lost = self.event(job, lambda e: e.get("event") == "worker_lost" and
                              e.get("worker") == worker, f"worker_lost of worker {worker}")
            detected.append(lost["t"] - sent)
            again = self.event(job, lambda e: e.get("event") == "task_dispatched" and
                               e.get("task") == task and e.get("redispatch") and e["t"] >= sent - 1,
                               f"task {task} handed out again")
            redispatch.append(again["t"] - sent)
            new = self.event(job, lambda e: e.get("event") == "worker_started" and
                             e["t"] >= sent and e.get("worker") != worker, "a replacement worker")
            started.append(new["t"] - sent)
            w = new["worker"]
            d = self.event(job, lambda e: e.get("event") == "task_dispatched" and
                           e.get("worker") == w and is_training(e),
                           f"a task for replacement worker {w}")
            first_dispatch.append(d["t"] - new["t"])
            done = self.event(job, lambda e: e.get("event") == "task_done" and
                              e.get("worker") == w and job.log.is_training_task(e),
                              f"a finished task of replacement worker {w}")
            full.append(done["t"] - sent)
        seconds = self.finish(job)
        self.kills_job = job
        self.kills_seconds = seconds
        self.detected, self.redispatch, self.started, self.first_dispatch, self.full = (
            detected, redispatch, started, first_dispatch, full)

    def ps_kill(self):
        job = self.start("ps-kill", checkpoint_steps=self.args.checkpoint_steps)
        per_task = self.args.minibatches_per_task
        self.until(job, lambda: job.log.training_done() * per_task > 2 * self.args.checkpoint_steps,
                   "training past a checkpoint")
        self.holder(job, self.rng.uniform(0, self.task_seconds))
        ps = 0
        pid = self.until(job, lambda: job.log.live_ps().get(ps), "parameter server 0")
        sent = time.time()
        os.kill(pid, signal.SIGKILL)
        started = self.event(job, lambda e: e.get("event") == "ps_started" and e.get("ps") == ps
                             and e.get("pid") != pid, "the parameter server relaunched")
        registered = self.event(job, lambda e: e.get("event") == "ps_registered" and
                                e.get("ps") == ps and e["t"] >= started["t"],
                                "the parameter server registered again")
        done = self.event(job, lambda e: e.get("event") == "task_done" and
                          job.log.is_training_task(e) and e["t"] >= registered["t"],
                          "a task done after the server came back")
        self.finish(job)
        self.ps_job = job
        self.ps_figures = (started["t"] - sent, registered["t"] - sent, done["t"] - sent,
                           registered.get("restored"), registered.get("version"))

    def master_kill(self):
        job = self.start("master-kill")
        self.until(job, lambda: job.log.training_done() >= 2,
                   "two finished tasks")
        self.holder(job, self.rng.uniform(0, self.task_seconds))
        pid = job.log.master_pid()
        sent = time.time()
        os.kill(pid, signal.SIGKILL)
        resumed = self.event(job, lambda e: e.get("event") == "master_started" and
                             e.get("resumed") and e.get("pid") != pid, "the master resumed")
        done = self.event(job, lambda e: e.get("event") == "task_done" and e["t"] >= resumed["t"],
                          "a task reported to the resumed master")
        self.finish(job)
        self.master_job = job
        self.master_figures = (resumed["t"] - sent, done["t"] - sent)

    # -- report ------------------------------------------------------------------

    def report(self):
        a = self.args
        print(f"# chaos_bench: {a.records} records x {a.epochs} epochs, {a.workers} workers, "
              f"minibatch {a.minibatch_size} x {a.minibatches_per_task} per task, "
              f"{a.sleep_ms} ms sleep per minibatch, {os.cpu_count()} cores, "
              f"load {open('/proc/loadavg').read().split()[0]}, seed {a.seed}")
        print(f"reference (no faults): {self.ref_seconds:.2f} s, median task {self.ref_task:.3f} s "
              f"(nominal {self.task_seconds:.3f} s), cold start {self.ref_cold:.2f} s, "
              f"worker start -> first task done {self.ref_worker_cold:.2f} s; {self.ref.exact}")

        def ms(xs):
            return f"median {statistics.median(xs) * 1000:7.0f} ms, max {max(xs) * 1000:7.0f} ms"
        if hasattr(self, "redispatch"):
            n = len(self.redispatch)
            print(f"(a) SIGKILL -> task re-dispatched      ({n} kills): {ms(self.redispatch)}"
                  f"   vs one task {self.ref_task * 1000:.0f} ms (a requeued task waits for the "
                  "next worker to ask)")
            print(f"    SIGKILL -> worker_lost (detected)  ({n} kills): {ms(self.detected)}")
            print(f"(b) SIGKILL -> replacement started     ({n} kills): {ms(self.started)}")
            print(f"    replacement started -> first task  ({n} kills): {ms(self.first_dispatch)}")
            print(f"    SIGKILL -> full throughput again   ({n} kills): {ms(self.full)}"
                  f"   vs worker cold start {self.ref_worker_cold * 1000:.0f} ms"
                  " (replacement's first task done: every worker producing)")
            print(f"(c) job time with {n} kills / without: {self.kills_seconds:.2f} s / "
                  f"{self.ref_seconds:.2f} s = {self.kills_seconds / self.ref_seconds:.3f}"
                  f"   (1.000 would be free recovery); {self.kills_job.exact}")
        if hasattr(self, "ps_figures"):
            started, registered, done, restored, version = self.ps_figures
            print(f"(d) SIGKILL PS -> relaunched {started * 1000:.0f} ms -> registered "
                  f"{registered * 1000:.0f} ms (restored={restored}, version {version}) -> first "
                  f"task done {done * 1000:.0f} ms   vs one task {self.ref_task * 1000:.0f} ms, "
                  f"cold start {self.ref_cold * 1000:.0f} ms; {self.ps_job.exact}")
        if hasattr(self, "master_figures"):
            resumed, done = self.master_figures
            print(f"(e) SIGKILL master -> resumed {resumed * 1000:.0f} ms -> first task done "
                  f"{done * 1000:.0f} ms   vs one task {self.ref_task * 1000:.0f} ms, cold start "
                  f"{self.ref_cold * 1000:.0f} ms; {self.master_job.exact}")


def main():
    args = parse_args()
    if args.kills < 1:
        fail("--kills must be at least 1")
    bench = Bench(args)
    # Build the zoo (or find it cached) outside every timed job.
    warm = bench.start("warm-up", num_epochs=1, num_workers=1,
                       params=exactness.model_params(args.records, 0))
    code = warm.wait(1200)
    if code != 0:
        bench.abort(warm, "the warm-up job failed")
    bench.reference()
    if not bench.ref.log.events:
        fail(f"{bench.ref.job_dir}/events.jsonl is missing: this binary writes no event log")
    if set("abc") & set(args.only):
        bench.worker_kills()
    if "d" in args.only:
        bench.ps_kill()
    if "e" in args.only:
        bench.master_kill()
    bench.report()


if __name__ == "__main__":
    main()
