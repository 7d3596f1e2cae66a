#!/usr/bin/python3
"""A straggler among three workers, with and without what the master does about it.

Three workers and a parameter server (the local backend) train tests/zoo/exactness, whose
forward sleeps --sleep_ms per minibatch, so that a worker's pace is the job's and not its
share of this machine's cores. In a synchronous step every worker waits for the slowest, so
one slow worker sets the pace of all; asynchronously (--use_async) the others go on, but the
straggler's gradients come too stale to be applied and its task holds the job's end. Each
run, interleaved:
  none      no straggler;
  slow      one worker slowed from the hand-out of its first task after the job's first
            finished one (SIGSTOP for --stop_ms, then SIGCONT for --run_ms, over and over),
            --straggler_factor=0 --backup_tasks=false: nothing is done;
  replaced  the same slow worker, default flags: the master tells it from its pace, asks it
            to leave (it hands its task back) and starts another in its place; near the end
            an idle worker backs up a task whose worker is far slower.
Reported: each job's training time (the client's "s of training", median and range), the
ratios to `none` (goal for `replaced`: <= 1.15), how much slower than the others the
straggler was when the master acted (its straggler event: its seconds per applied
minibatch against the others' median; or its backup event) and how long after the
slow-down began the master acted. Every job is checked to have applied every record
exactly once.

  bench/straggler_bench.py [--bin build/bin/elasticdl] [--runs 3] [--use_async]
"""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scenario"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cluster_sharing  # noqa: E402
import exactness  # noqa: E402
from exactness import EventLog  # noqa: E402

MODES = ("none", "slow", "replaced")
TRAINING = re.compile(r"\(([0-9.]+) s of training")


def parse_args():
    p = cluster_sharing.arguments(__doc__)
    p.add_argument("--epochs", type=int, default=16)
    p.add_argument("--stop_ms", type=int, default=250)
    p.add_argument("--run_ms", type=int, default=25)
    p.add_argument("--use_async", action="store_true",
                   help="asynchronous training (plain SGD) instead of synchronous steps")
    return p.parse_args()


def one_job(args, train, work, mode, run):
    job_dir = os.path.join(work, f"{mode}-{run}")
    output = job_dir + "-model"
    flags = ["--straggler_factor=0", "--backup_tasks=false"] if mode == "slow" else []
    if args.use_async:
        flags += ["--use_async=true", "--optimizer=optimizer"]
    else:
        flags += ["--optimizer=unit_step_optimizer"]
    proc = subprocess.Popen([
        args.bin, "train", f"--model_zoo={exactness.MODEL_ZOO}",
        f"--model_def={exactness.MODEL_DEF}", f"--training_data={train}",
        f"--params={exactness.model_params(args.records, args.sleep_ms)}",
        f"--num_epochs={args.epochs}", "--num_workers=3", "--num_ps_pods=1",
        "--minibatch_size=32", "--num_minibatches_per_task=4", "--num_threads=1",
        f"--job_dir={job_dir}", f"--output={output}",
        "--no_progress", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = EventLog(job_dir)
    slowed = None
    if mode == "none":
        out, _ = proc.communicate(timeout=1800)
    else:
        log.until(lambda: log.training_done() >= 1, 120, "a finished training task")
        since = time.time()
        log.until(lambda: any(e["worker"] == 0 and e["t"] >= since and exactness.is_training(e)
                              for e in log.of("task_dispatched")), 120, "a new task of worker 0")
        slowed = time.time()
        with exactness.Throttle(log.live_workers()[0], args.stop_ms / 1000, args.run_ms / 1000):
            out, _ = proc.communicate(timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"the {mode} job failed:\n{out}")
    diff = exactness.check_rows(output, args.records, args.epochs)
    if diff:
        raise SystemExit(f"the {mode} job is not exact: {diff}")
    log.poll()
    result = {"seconds": float(TRAINING.search(out).group(1))}
    stragglers = log.of("straggler")
    backups = [e for e in log.of("task_dispatched") if "backup_of" in e]
    if mode == "replaced":
        acted = ([(e["t"], "replaced", e["seconds_per_minibatch"] / e["others"])
                  for e in stragglers if e.get("worker") == 0] +
                 [(e["t"], "backed up", e["holder_seconds_per_minibatch"] /
                   e["seconds_per_minibatch"]) for e in backups if e.get("backup_of") == 0])
        others = [e for e in stragglers if e.get("worker") != 0]
        if not acted or others:
            raise SystemExit(f"expected worker 0 alone replaced or backed up: {stragglers} "
                             f"{backups}")
        t, how, slower = min(acted)
        result.update(slower=slower, acted=t - slowed, how=how)
    elif stragglers or (mode == "slow" and backups):
        raise SystemExit(f"the {mode} job acted on a straggler: {stragglers} {backups}")
    # Without a straggler, a worker may still back up the last task of one that
    # fell behind (gradients refused as stale, a slow start): counted.
    result["backups"] = len(backups)
    return result


def main():
    args = parse_args()
    work, train = cluster_sharing.prepare(args, "elasticdl-straggler-")
    results = {mode: [] for mode in MODES}
    for run in range(args.runs):
        line = f"  run {run + 1}:"
        for mode in MODES:  # interleaved: the machine's pace drifts
            r = one_job(args, train, work, mode, run)
            results[mode].append(r)
            line += f" {mode} {r['seconds']:.1f} s"
            if "slower" in r:
                line += (f" (straggler {r['slower']:.1f}x the others' time per minibatch, "
                         f"{r['how']} {r['acted']:.1f} s after it slowed)")
            if r["backups"]:
                line += f" ({r['backups']} backup attempts)"
            line += ";"
        print(line + " every job exact", flush=True)

    def median(mode, key="seconds"):
        return statistics.median(r[key] for r in results[mode])

    def spread(mode, key="seconds"):
        xs = [r[key] for r in results[mode]]
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"
    print()
    for mode, label in (("none", "no straggler"), ("slow", "a straggler, --straggler_factor=0"),
                        ("replaced", "a straggler, default flags")):
        print(f"{label:40s} {spread(mode):>20s} s of training")
    hows = sorted({r["how"] for r in results["replaced"]})
    print(f"{'what the master did first':40s} {', '.join(hows):>20s}")
    print(f"{'the straggler, x the others per minibatch':40s} {spread('replaced', 'slower'):>20s}")
    print(f"{'its slow-down -> the master acts, s':40s} {spread('replaced', 'acted'):>20s}")
    slow, replaced = median("slow") / median("none"), median("replaced") / median("none")
    print(f"\n{'asynchronous' if args.use_async else 'synchronous'} training")
    print(f"without mitigation / no straggler: {slow:.3f} (info)")
    print(f"with mitigation / no straggler:    {replaced:.3f} (goal <= 1.15): "
          f"{'met' if replaced <= 1.15 else 'NOT met'}")


if __name__ == "__main__":
    main()
