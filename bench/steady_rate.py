"""Steady-state records/s of a finished `elasticdl train` job, from its event log.

The job's own figure ("X s of training: Y records/s") counts from the first task
handed out to the last one done: it includes the first steps, in which LibTorch
and Gloo set themselves up. ddp_mnist.py opens its window after its first
minibatches instead. This is the same window for our job: it opens when every
worker has finished its first training task, and closes when the last one is
done; the records are those of the tasks finished inside it.

  /usr/bin/python3 bench/steady_rate.py JOB_DIR     # prints records/s
"""
import json
import os
import sys


def steady_rate(job_dir):
    with open(os.path.join(job_dir, "events.jsonl")) as f:
        events = [json.loads(line) for line in f if line.strip()]
    done = [e for e in events if e.get("event") == "task_done" and e.get("records")]
    if not done:
        raise SystemExit(f"{job_dir}: no training task was done")
    workers = {e["worker"] for e in done}
    opened = max(min(e["t"] for e in done if e["worker"] == w) for w in workers)
    inside = [e for e in done if e["t"] > opened]
    closed = max(e["t"] for e in done)
    if not inside or closed <= opened:
        raise SystemExit(f"{job_dir}: too few tasks for a steady-state window")
    return sum(e["records"] for e in inside) / (closed - opened)


if __name__ == "__main__":
    print(f"{steady_rate(sys.argv[1]):.1f}")
