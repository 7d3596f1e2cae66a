#!/usr/bin/python3
"""Jobs that share a Slurm cluster: a high-priority job arrives on a cluster a low-priority
job fills.

  Priority: a `--priority=low` job's master, parameter server and six workers fill the
  project's test cluster (scripts/slurm_cluster.sh: two virtual nodes of 4 CPUs, partitions
  debug > high > low, preemption by partition priority, GraceTime=5 on low). Once all six
  train, a `--priority=high` job of two workers is submitted: its master and server (in the
  default partition) and its workers (in `high`) need four CPUs, which Slurm takes from the
  low-priority job by preempting four of its workers. Reported per run:
    - the high-priority job's start: its submission -> its first task handed out (the goal
      is GraceTime + 5 s = 10 s);
    - the low-priority job's throughput (training tasks of 4 minibatches done per second,
      from its task_done events) before the high-priority job, while it runs, and after;
      and the longest stretch without a training task done while it ran (the goal is that
      it never stops training);
    - that both jobs applied every record exactly once (their trained rows).

Both jobs train tests/zoo/exactness, whose forward sleeps --sleep_ms per minibatch: a
worker's pace is set by the job, not by how many of the virtual nodes' CPUs share this
machine's cores. Times come from this process's clock and the masters' event logs (unix
seconds), both this machine's wall clock.

  bench/cluster_sharing.py [--bin build/bin/elasticdl] [--runs 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scenario"))

import exactness  # noqa: E402
import slurm_test  # noqa: E402
from exactness import EventLog, is_training  # noqa: E402

GRACE_TIME = 5  # the low partition's, scripts/slurm_cluster.sh


def arguments(doc):
    """The options every benchmark of exactness-zoo jobs takes: the binary, the runs, the
    records, a forward's sleep."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--bin", default=os.environ.get("ELASTICDL_BIN",
                                                   os.path.join(ROOT, "build", "bin", "elasticdl")))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--sleep_ms", type=int, default=60)
    return p


def parse_args():
    p = arguments(__doc__)
    p.add_argument("--low_epochs", type=int, default=60)
    p.add_argument("--high_epochs", type=int, default=2)
    p.add_argument("--port_base", type=int, default=17300)
    return p.parse_args()


def start_job(args, train, work, name, priority, workers, epochs):
    job_dir = os.path.join(work, name)
    output = os.path.join(work, name + "-model")
    proc = subprocess.Popen([
        args.bin, "train", "--cluster=slurm", f"--priority={priority}",
        f"--model_zoo={exactness.MODEL_ZOO}", f"--model_def={exactness.MODEL_DEF}",
        f"--training_data={train}", f"--params={exactness.model_params(args.records, args.sleep_ms)}",
        f"--num_epochs={epochs}", f"--num_workers={workers}", "--num_ps_pods=1",
        "--minibatch_size=32", "--num_minibatches_per_task=4", "--num_threads=1",
        "--optimizer=unit_step_optimizer", f"--job_dir={job_dir}", f"--output={output}",
        "--no_progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, job_dir, output, EventLog(job_dir)


def finish(proc, output, args, epochs, what):
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{out}")
    diff = exactness.check_rows(output, args.records, epochs)
    if diff:
        raise SystemExit(f"{what} is not exact: {diff}")


def training_done_times(log):
    return sorted(e["t"] for e in log.events
                  if e.get("event") == "task_done" and e.get("records", 0) > 0)


def rate(times, start, end):
    return sum(1 for t in times if start <= t < end) / max(end - start, 1e-9)


def one_run(args, train, work, run):
    low, low_dir, low_out, low_log = start_job(args, train, work, f"low-{run}", "low", 6,
                                               args.low_epochs)
    low_log.until(lambda: len({e["worker"] for e in low_log.of("task_dispatched")
                               if is_training(e)}) >= 6, 180, "six low-priority workers training")
    time.sleep(3)  # a stretch at full size
    submitted = time.time()
    high, high_dir, high_out, high_log = start_job(args, train, work, f"high-{run}", "high", 2,
                                                   args.high_epochs)
    began = high_log.wait(lambda e: e.get("event") == "tasks_began", 120,
                          "the high-priority job's first task")
    finish(high, high_out, args, args.high_epochs, "the high-priority job")
    high_log.poll()
    high_end = max(e["t"] for e in high_log.events)
    # The low-priority job grows back once the high-priority one is gone.
    finish(low, low_out, args, args.low_epochs, "the low-priority job")
    low_log.poll()
    times = training_done_times(low_log)
    if max(times) < high_end:
        raise SystemExit("the low-priority job ended before the high-priority one: give it more "
                         "--low_epochs")
    during = [t for t in times if submitted <= t < high_end]
    gaps = [b - a for a, b in zip([submitted] + during, during + [high_end])]
    preempted = [e["worker"] for e in low_log.of("worker_left") if submitted <= e["t"] < high_end]
    lost = low_log.of("worker_lost")
    first_low = min(times)
    return {
        "start": began["t"] - submitted,
        "before": rate(times, first_low, submitted),
        "during": rate(times, submitted, high_end),
        "after": rate(times, high_end, max(times)),
        "gap": max(gaps),
        "preempted": len(preempted),
        "lost": len(lost),
        "high_seconds": high_end - submitted,
    }


def prepare(args, prefix):
    """A scratch directory and the exactness zoo's training records in it (their path); the
    zoo built once, on this machine, by a local job, before any Slurm job needs it."""
    work = tempfile.mkdtemp(prefix=prefix)
    train = os.path.join(work, "train.recordio")
    exactness.write_records(train, range(args.records))
    subprocess.run([args.bin, "train", f"--model_zoo={exactness.MODEL_ZOO}",
                    f"--model_def={exactness.MODEL_DEF}", f"--training_data={train}",
                    f"--params={exactness.model_params(args.records, 0)}", "--num_epochs=1",
                    "--num_workers=1", "--optimizer=unit_step_optimizer",
                    f"--job_dir={work}/warm-up", "--no_progress"], check=True,
                   capture_output=True)
    return work, train


def main():
    args = parse_args()
    work, train = prepare(args, "elasticdl-cluster-sharing-")
    slurm_dir = os.path.join(work, "slurm")
    slurm_test.start_cluster(slurm_dir, args.port_base)
    results = []
    try:
        for run in range(args.runs):
            r = one_run(args, train, work, run)
            results.append(r)
            print(f"  run {run + 1}: high-priority job's first task {r['start']:.2f} s after "
                  f"its submission; low-priority job: {r['preempted']} workers preempted, "
                  f"{r['lost']} lost, training tasks done/s {r['before']:.1f} before, "
                  f"{r['during']:.1f} while the other ran ({r['high_seconds']:.0f} s), "
                  f"{r['after']:.1f} after; longest stretch without one {r['gap']:.2f} s; "
                  f"both exact", flush=True)
    finally:
        slurm_test.stop_cluster(slurm_dir)

    def spread(key, fmt="{:.2f}"):
        xs = [r[key] for r in results]
        return (f"median {fmt.format(statistics.median(xs))} "
                f"({fmt.format(min(xs))}-{fmt.format(max(xs))})")
    print()
    print(f"high-priority job: submission -> first task: {spread('start')} s "
          f"(goal <= GraceTime + 5 = {GRACE_TIME + 5} s)")
    print(f"low-priority job, training tasks done/s: before {spread('before', '{:.1f}')}, "
          f"during {spread('during', '{:.1f}')}, after {spread('after', '{:.1f}')}")
    print(f"low-priority job, longest stretch without a training task done while the "
          f"high-priority job ran: {spread('gap')} s (goal: it never stops training)")
    print(f"{len(results)} runs, every job exact")


if __name__ == "__main__":
    main()
