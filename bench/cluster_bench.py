#!/usr/bin/python3
"""What running on Slurm costs, each figure beside the same job on the local backend.

  (a) Start-up: the client's start -> the first task done (the master's
      task_done event), the main job on the local backend and on Slurm.
  (b) Throughput: records/s of the main job's training window (the client's
      summary line), Slurm / local, same cores (2 workers x 1 thread, 1 PS).
  (c) Node loss on Slurm: a virtual node dies (its slurmd, job steps and their
      processes SIGKILLed, then marked DOWN) while it runs a worker -> that
      worker's task handed out again, and -> the replacement worker
      registered with the master. Median and max over --losses losses; every
      job's rows are checked for exact accounting.

The main job is scripts/main_job.sh's training (the seed CNN on Fashion-MNIST,
standardized_dataset_fn, adam_optimizer, 1 epoch, 2 workers x 1 thread).
The Slurm cluster is scripts/slurm_cluster.sh's two virtual nodes on this
machine, started and stopped here. Times come from this process's clock and
the master's event log (unix seconds), both this machine's wall clock.

  bench/cluster_bench.py [--bin build/bin/elasticdl] [--runs 3] [--losses 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scenario"))

import exactness  # noqa: E402
import slurm_test  # noqa: E402
from exactness import EventLog  # noqa: E402

TRAINED = re.compile(r"^trained (\d+) records in ([0-9.]+) s \(([0-9.]+) s of training: "
                     r"([0-9.]+) records/s\)", re.M)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.environ.get("ELASTICDL_BIN",
                                                   os.path.join(ROOT, "build", "bin", "elasticdl")))
    p.add_argument("--runs", type=int, default=3, help="main jobs per backend for (a), (b)")
    p.add_argument("--losses", type=int, default=5, help="node losses for (c)")
    p.add_argument("--port_base", type=int, default=17300)
    return p.parse_args()


def run(bin_path, args, env=None):
    started = time.time()
    out = subprocess.run([bin_path, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"elasticdl {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return started, out.stdout


def first_task_done(job_dir):
    log = EventLog(job_dir)
    log.poll()
    return min(e["t"] for e in log.of("task_done"))


def main_job(bin_path, data, work, cluster, name):
    job_dir = os.path.join(work, name)
    started, stdout = run(bin_path, [
        "train", f"--cluster={cluster}", f"--model_zoo={ROOT}/model_zoo",
        "--model_def=mnist.mnist_functional_api.custom_model",
        f"--training_data={data}/train", "--dataset_fn=standardized_dataset_fn",
        "--optimizer=adam_optimizer", "--num_epochs=1", "--num_workers=2", "--num_ps_pods=1",
        "--minibatch_size=64", "--num_threads=1", f"--job_dir={job_dir}", "--no_progress"])
    records, _, _, rate = TRAINED.search(stdout).groups()
    return first_task_done(job_dir) - started, float(rate)


def node_losses(bin_path, work, slurm_dir, losses):
    records = 2000
    train = os.path.join(work, "exact-train.recordio")
    exactness.write_records(train, range(records))
    redispatch, replaced = [], []
    for i in range(losses):
        job_dir = os.path.join(work, f"node-loss-{i}")
        output = os.path.join(work, f"node-loss-model-{i}")
        proc = subprocess.Popen([
            bin_path, "train", "--cluster=slurm", f"--model_zoo={exactness.MODEL_ZOO}",
            f"--model_def={exactness.MODEL_DEF}", f"--training_data={train}",
            f"--params={exactness.model_params(records, 60)}", "--num_epochs=2",
            "--num_workers=2", "--minibatch_size=32", "--num_minibatches_per_task=4",
            "--num_threads=1", "--optimizer=unit_step_optimizer", "--checkpoint_steps=8",
            f"--job_dir={job_dir}", f"--output={output}", "--no_progress"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = EventLog(job_dir)
        log.until(lambda: log.training_done() >= 3, 120, "training under way")
        name = os.path.basename(job_dir)
        jobs = slurm_test.slurm_jobs_of(name)
        master_node = next(n for jn, _, n in jobs.values() if jn == name)
        node = next(n for jn, st, n in jobs.values()
                    if "-worker-" in jn and st == "RUNNING" and n != master_node)
        lost_at = time.time()
        lost = slurm_test.lose_node(slurm_dir, node)
        worker = next(e["worker"] for e in log.of("worker_started") if e.get("backend_id") in lost)
        held = log.holders().get(worker, {}).get("task")
        again = log.wait(lambda e: e.get("event") == "task_dispatched" and e.get("redispatch") and
                         e["t"] >= lost_at and (held is None or e.get("task") == held), 120,
                         "the lost worker's task handed out again")
        started = log.wait(lambda e: e.get("event") == "worker_started" and e.get("relaunch") and
                           e["t"] >= lost_at, 120, "a replacement")
        registered = log.wait(lambda e: e.get("event") == "worker_registered" and
                              e.get("worker") == started["worker"], 120,
                              "the replacement registered")
        out, _ = proc.communicate(timeout=300)
        slurm_test.restore_node(os.path.join(slurm_dir, "slurm.conf"), node)
        if proc.returncode != 0:
            raise SystemExit(f"node-loss job {i} failed:\n{out}")
        diff = exactness.check_rows(output, records, 2)
        if diff:
            raise SystemExit(f"node-loss job {i} is not exact: {diff}")
        redispatch.append(again["t"] - lost_at)
        replaced.append(registered["t"] - lost_at)
        print(f"  loss {i + 1}: node {node}, task re-dispatched after "
              f"{redispatch[-1]:.2f} s, replacement registered after {replaced[-1]:.2f} s",
              flush=True)
    return redispatch, replaced


def main():
    args = parse_args()
    work = tempfile.mkdtemp(prefix="elasticdl-cluster-bench-")
    data = os.path.join(work, "fashion-mnist")
    run(args.bin, ["data", "mnist", "--output", data])
    slurm_dir = os.path.join(work, "slurm")
    slurm_test.start_cluster(slurm_dir, args.port_base)
    try:
        main_job(args.bin, data, work, "local", "warm-up")  # builds the zoo
        figures = {"local": [], "slurm": []}
        for i in range(args.runs):
            for cluster in ("local", "slurm"):
                figures[cluster].append(main_job(args.bin, data, work, cluster,
                                                 f"{cluster}-{i}"))
                start, rate = figures[cluster][-1]
                print(f"  {cluster} run {i + 1}: first task done after {start:.2f} s, "
                      f"{rate:.0f} records/s", flush=True)
        redispatch, replaced = node_losses(args.bin, work, slurm_dir, args.losses)
    finally:
        slurm_test.stop_cluster(slurm_dir)

    def med(xs):
        return statistics.median(xs)
    local_start = [s for s, _ in figures["local"]]
    slurm_start = [s for s, _ in figures["slurm"]]
    local_rate = [r for _, r in figures["local"]]
    slurm_rate = [r for _, r in figures["slurm"]]
    print()
    print(f"(a) train -> first task done: local median {med(local_start):.2f} s "
          f"(max {max(local_start):.2f}), slurm median {med(slurm_start):.2f} s "
          f"(max {max(slurm_start):.2f})")
    print(f"(b) main job records/s: local median {med(local_rate):.0f} "
          f"({min(local_rate):.0f}-{max(local_rate):.0f}), slurm median {med(slurm_rate):.0f} "
          f"({min(slurm_rate):.0f}-{max(slurm_rate):.0f}); slurm / local = "
          f"{med(slurm_rate) / med(local_rate):.3f} (goal >= 0.95)")
    if replaced:
        print(f"(c) node lost -> task re-dispatched: median {med(redispatch):.2f} s, max "
              f"{max(redispatch):.2f} s; -> replacement registered: median "
              f"{med(replaced):.2f} s, max {max(replaced):.2f} s ({len(replaced)} losses, "
              f"every job exact)")


if __name__ == "__main__":
    main()
