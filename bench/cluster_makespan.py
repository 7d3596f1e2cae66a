#!/usr/bin/python3
"""Two jobs that share a Slurm cluster, scheduled as gangs and elastically.

The project's test cluster (scripts/slurm_cluster.sh) with three virtual nodes of 2 CPUs
(6 CPUs for workers) and a service node of its own for the jobs' masters, as a cluster keeps
its control processes off the machines it schedules work on. Two jobs of four workers each
(more than half of the 6 CPUs; AllreduceStrategy, so no parameter servers): the first is
submitted, and the second once the first trains.
  gang     --min_workers=4: the second job's master starts, and it trains only once all
           four of its workers run, that is once the first job has ended;
  elastic  --min_workers=1: the second job trains with the two workers the free CPUs take
           at once, and grows to four when the first job's workers leave.
Reported per mode (median and range over the runs): the makespan (the first submission to
the last job's end), each job's pending time (its submission to its first task) and
completion time (its submission to its end), the cluster's utilisation (worker-CPUs in use
over the 6 CPUs, averaged over the makespan) and each job's goodput (its workers' time
spent on applied minibatches over their time held, from its final status); and a plot of
the CPUs each job's workers held over time, one run of each mode (--plot, PNG).

Both jobs train tests/zoo/exactness, whose forward sleeps --sleep_ms per minibatch: a
worker's pace is set by the job, not by how many of the virtual nodes' CPUs share this
machine's cores; every run checks that each job applied every record exactly once. Times
are this process's clock and the masters' event logs (unix seconds), both this machine's.

  bench/cluster_makespan.py [--bin build/bin/elasticdl] [--runs 3] [--plot FILE.png]
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scenario"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cluster_sharing  # noqa: E402
import exactness  # noqa: E402
import job_test  # noqa: E402
import slurm_test  # noqa: E402
from exactness import EventLog  # noqa: E402

NODES, CPUS_PER_NODE, SERVICE_CPUS = 3, 2, 4
WORKER_CPUS = NODES * CPUS_PER_NODE
MODES = ("gang", "elastic")


def parse_args():
    p = cluster_sharing.arguments(__doc__)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--port_base", type=int, default=17300)
    p.add_argument("--plot", default="", help="write the utilisation plot here (PNG)")
    return p.parse_args()


def start_job(args, train, work, name, min_workers):
    job_dir = os.path.join(work, name)
    output = os.path.join(work, name + "-model")
    submitted = time.time()
    # The master on the service node; the workers in the partition over the three nodes
    # (--priority_partitions names it for the job's level).
    proc = subprocess.Popen([
        args.bin, "train", "--cluster=slurm", "--partition=service", "--priority=high",
        "--priority_partitions=high=debug", "--distribution_strategy=AllreduceStrategy",
        f"--model_zoo={exactness.MODEL_ZOO}", f"--model_def={exactness.MODEL_DEF}",
        f"--training_data={train}", f"--params={exactness.model_params(args.records, args.sleep_ms)}",
        f"--num_epochs={args.epochs}", f"--num_workers={args.workers}",
        f"--min_workers={min_workers}", "--minibatch_size=32", "--num_minibatches_per_task=4",
        "--num_threads=1", "--optimizer=unit_step_optimizer", f"--job_dir={job_dir}",
        f"--output={output}", "--no_progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return {"proc": proc, "dir": job_dir, "output": output, "log": EventLog(job_dir),
            "submitted": submitted}


def finish(args, job, what):
    out, _ = job["proc"].communicate(timeout=1800)
    if job["proc"].returncode != 0:
        raise SystemExit(f"{what} failed:\n{out}")
    diff = exactness.check_rows(job["output"], args.records, args.epochs)
    if diff:
        raise SystemExit(f"{what} is not exact: {diff}")
    log = job["log"]
    log.poll()
    began = log.wait(lambda e: e.get("event") == "tasks_began", 1, f"{what}'s first task")
    ended = log.wait(lambda e: e.get("event") == "job_finished", 1, f"{what}'s end")
    seconds = job_test.final_worker_seconds(job["dir"])
    job.update(began=began["t"], ended=ended["t"], seconds=seconds,
               goodput=seconds.get("trained", 0) / max(seconds.get("held", 0), 1e-9))


def worker_spans(log, until):
    """[(from, to)] of each worker of the job, from its registration (Slurm ran it) to its
    leaving, loss, or `until`."""
    began, spans = {}, []
    for e in log.events:
        kind, worker = e.get("event"), e.get("worker")
        if kind == "worker_registered":
            began.setdefault(worker, e["t"])
        elif kind in ("worker_left", "worker_lost") and worker in began:
            spans.append((began.pop(worker), e["t"]))
    spans.extend((t, until) for t in began.values())
    return spans


def held_over_time(spans, origin):
    """Step points (seconds since origin, workers held) of the spans."""
    changes = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    points, held = [(0.0, 0)], 0
    for t, d in changes:
        held += d
        points.append((t - origin, held))
    return points


def one_run(args, train, work, mode, run):
    min_workers = args.workers if mode == "gang" else 1
    first = start_job(args, train, work, f"{mode}-{run}-first", min_workers)
    first["log"].until(lambda: first["log"].training_done() >= 1, 300,
                       "the first job's first training task")
    second = start_job(args, train, work, f"{mode}-{run}-second", min_workers)
    finish(args, first, "the first job")
    finish(args, second, "the second job")
    origin = first["submitted"]
    end = max(first["ended"], second["ended"])
    spans = {name: worker_spans(job["log"], job["ended"]) for name, job in
             (("first", first), ("second", second))}
    busy = sum(b - a for s in spans.values() for a, b in s)
    return {
        "makespan": end - origin,
        "pending_first": first["began"] - first["submitted"],
        "pending_second": second["began"] - second["submitted"],
        "completion_first": first["ended"] - first["submitted"],
        "completion_second": second["ended"] - second["submitted"],
        "utilisation": busy / (WORKER_CPUS * (end - origin)),
        "goodput_first": first["goodput"],
        "goodput_second": second["goodput"],
        "second_submitted": second["submitted"] - origin,
        "curves": {name: held_over_time(s, origin) for name, s in spans.items()},
    }


def plot(results, path, workers):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(MODES), 1, figsize=(8, 5.5), sharex=True)
    for ax, mode in zip(axes, MODES):
        r = results[mode][0]
        end = r["makespan"]
        grid = sorted({t for c in r["curves"].values() for t, _ in c} | {end})

        def at(curve, t):
            value = 0
            for u, v in curve:
                if u <= t:
                    value = v
            return value
        first = [at(r["curves"]["first"], t) for t in grid]
        second = [at(r["curves"]["second"], t) for t in grid]
        ax.stackplot(grid, first, second, step="post", labels=["first job", "second job"],
                     colors=["#4c72b0", "#dd8452"])
        ax.axvline(r["second_submitted"], color="black", linestyle=":", linewidth=1)
        ax.set_ylim(0, WORKER_CPUS)
        ax.set_ylabel("worker CPUs held")
        ax.set_title(f"{mode} (--min_workers={workers if mode == 'gang' else 1}): makespan "
                     f"{r['makespan']:.0f} s, utilisation {100 * r['utilisation']:.0f}%",
                     fontsize=10)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("seconds since the first job's submission (dotted: the second's)")
    fig.suptitle(f"Two jobs of {workers} workers on {WORKER_CPUS} CPUs (Slurm, {NODES} virtual "
                 "nodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    args = parse_args()
    work, train = cluster_sharing.prepare(args, "elasticdl-cluster-makespan-")
    slurm_dir = os.path.join(work, "slurm")
    os.environ.update(SLURM_NODES=str(NODES), SLURM_CPUS_PER_NODE=str(CPUS_PER_NODE),
                      SLURM_SERVICE_CPUS=str(SERVICE_CPUS))
    slurm_test.start_cluster(slurm_dir, args.port_base)
    results = {mode: [] for mode in MODES}
    try:
        for run in range(args.runs):
            for mode in MODES:  # interleaved: the machine's pace drifts
                r = one_run(args, train, work, mode, run)
                results[mode].append(r)
                print(f"  run {run + 1} {mode:7s}: makespan {r['makespan']:.1f} s; pending "
                      f"{r['pending_first']:.1f} s / {r['pending_second']:.1f} s, completion "
                      f"{r['completion_first']:.1f} s / {r['completion_second']:.1f} s (first / "
                      f"second job); utilisation {100 * r['utilisation']:.1f}%; goodput "
                      f"{100 * r['goodput_first']:.1f}% / {100 * r['goodput_second']:.1f}%; "
                      f"both exact", flush=True)
    finally:
        slurm_test.stop_cluster(slurm_dir)

    def spread(mode, key, scale=1.0, fmt="{:.1f}"):
        xs = [r[key] * scale for r in results[mode]]
        return (f"{fmt.format(statistics.median(xs))} "
                f"({fmt.format(min(xs))}-{fmt.format(max(xs))})")
    print()
    print(f"{'median (range) of ' + str(args.runs) + ' runs':34s} {'gang':>20s} {'elastic':>20s}")
    for key, label, scale in (
            ("makespan", "makespan, s", 1), ("pending_first", "first job pending, s", 1),
            ("pending_second", "second job pending, s", 1),
            ("completion_first", "first job completion, s", 1),
            ("completion_second", "second job completion, s", 1),
            ("utilisation", "utilisation, %", 100), ("goodput_first", "first job goodput, %", 100),
            ("goodput_second", "second job goodput, %", 100)):
        print(f"{label:34s} {spread('gang', key, scale):>20s} {spread('elastic', key, scale):>20s}")
    gang = statistics.median(r["makespan"] for r in results["gang"])
    elastic = statistics.median(r["makespan"] for r in results["elastic"])
    shorter = 1 - elastic / gang
    pending = statistics.median(r["pending_second"] for r in results["elastic"])
    print(f"\nelastic makespan {100 * shorter:.1f}% shorter than gang (goal >= 20%): "
          f"{'met' if shorter >= 0.2 else 'NOT met'}")
    print(f"elastic second job pending {pending:.1f} s (goal < 5 s): "
          f"{'met' if pending < 5 else 'NOT met'}")
    if args.plot:
        plot(results, args.plot, args.workers)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
