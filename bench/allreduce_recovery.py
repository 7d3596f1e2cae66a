"""P14: how long AllreduceStrategy's survivors stop when a worker is killed, beside torchrun.

Trains the MNIST seed CNN with 3 workers x 1 thread and SIGKILLs one worker KILLS times,
a few seconds apart, and measures for each kill:

  next step   from the kill to the survivors' next completed step (the first step of
              the next collective group version, which its log line announces:
              "collective group version V (2 workers): first step ..."; of 3 workers
              when the replacement joined before the survivors regrouped)
  full        from the kill to the first step of a version of 3 workers again (the
              master started a replacement, which joined and received the model and
              the optimizer state from a survivor)

torchrun runs the same model (bench/ddp_mnist.py, DDP over gloo, --max_restarts,
c10d rendezvous, its default monitor interval) beside it: each kill of a worker makes
torchrun stop every worker and start them all again; "next step" is from the kill to
the first step any restarted worker completes, "full" to the first step after which
all three train (the same moment for torchrun: its workers start together).

Prints one line per kill and the median and maximum of each figure. Every line is
time-stamped as this script reads it from the job's output.

  /usr/bin/python3 bench/allreduce_recovery.py --bin build/bin/elasticdl --data DIR
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Lines:
    """The lines of a process's output, each with the time it was read."""

    def __init__(self, proc):
        self.lines = []
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc):
        for raw in proc.stdout:
            with self.cv:
                self.lines.append((time.time(), raw.decode(errors="replace").rstrip("\n")))
                self.cv.notify_all()

    def wait_for(self, pattern, after, timeout):
        """(time, match) of the first line matching `pattern` read after `after`."""
        regex = re.compile(pattern)
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for t, line in self.lines:
                    if t > after:
                        m = regex.search(line)
                        if m:
                            return t, m
                left = deadline - time.time()
                if left <= 0:
                    tail = "\n".join(line for _, line in self.lines[-20:])
                    raise TimeoutError(f"no line matching {pattern!r}; last lines:\n{tail}")
                self.cv.wait(left)


def live_workers(job_dir):
    """worker id -> pid of the job's live workers, from its event log."""
    live = {}
    try:
        with open(os.path.join(job_dir, "events.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == "worker_started":
                    live[e["worker"]] = e["pid"]
                elif e.get("event") in ("worker_lost", "worker_left"):
                    live.pop(e.get("worker"), None)
    except (OSError, ValueError):
        pass
    return live


def ours(args, work):
    job_dir = os.path.join(work, "job")
    cmd = [args.bin, "train", "--model_zoo=" + os.path.join(ROOT, "model_zoo"),
           "--model_def=mnist.mnist_functional_api.custom_model",
           "--training_data=" + args.data, "--num_epochs=100", "--num_workers=3",
           "--num_threads=1", "--minibatch_size=64", "--num_minibatches_per_task=8",
           "--distribution_strategy=AllreduceStrategy", "--max_worker_relaunches=100",
           "--no_progress", "--job_dir=" + job_dir]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = Lines(proc)
    results = []
    try:
        start = time.time()
        lines.wait_for(r"\(3 workers\): first step", 0, 300)
        for k in range(args.kills):
            time.sleep(args.gap)
            live = live_workers(job_dir)
            worker = sorted(live)[k % len(live)]
            killed = time.time()
            os.kill(live[worker], signal.SIGKILL)
            t_next, _ = lines.wait_for(r"\([23] workers\): first step", killed, 120)
            t_full, _ = lines.wait_for(r"\(3 workers\): first step", killed, 120)
            results.append((t_next - killed, t_full - killed))
            print(f"ours kill {k + 1}: worker {worker}: next step {t_next - killed:.3f} s, "
                  f"full {t_full - killed:.3f} s", flush=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return results


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, work):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [args.python, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=3",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
           f"--max_restarts={args.kills + 1}", "--redirects", "2", "--tee", "2",
           os.path.join(ROOT, "bench", "ddp_mnist.py"), "--records=30000", "--threads=1",
           "--epochs=100", "--log_steps"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            cwd=work, start_new_session=True)
    lines = Lines(proc)
    results = []
    try:
        lines.wait_for(r"STEP rank=\d+ step=10\b", 0, 300)
        since = 0  # the workers of the latest start print READY after this
        for k in range(args.kills):
            time.sleep(args.gap)
            _, m = lines.wait_for(r"READY rank=1 pid=(\d+)", since, 60)
            pid = int(m.group(1))
            killed = time.time()
            os.kill(pid, signal.SIGKILL)
            # A restart: every worker prints READY again, then steps from 0.
            t_next, _ = lines.wait_for(r"STEP rank=\d+ step=0\b", killed, 300)
            t_full = t_next
            since = killed
            results.append((t_next - killed, t_full - killed))
            print(f"torchrun kill {k + 1}: next step {t_next - killed:.3f} s, "
                  f"full {t_full - killed:.3f} s", flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return results


def summary(name, results):
    nexts = [r[0] for r in results]
    fulls = [r[1] for r in results]
    print(f"RESULT {name} kills={len(results)} next_step_median_s={statistics.median(nexts):.3f} "
          f"next_step_max_s={max(nexts):.3f} full_median_s={statistics.median(fulls):.3f} "
          f"full_max_s={max(fulls):.3f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--data", required=True, help="a folder of Fashion-MNIST record files")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--gap", type=float, default=4.0, help="seconds of training between kills")
    p.add_argument("--only", choices=["ours", "torchrun"], default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="allreduce_recovery.") as work:
        if args.only in (None, "ours"):
            summary("ours", ours(args, work))
        if args.only in (None, "torchrun"):
            summary("torchrun", torchrun(args, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
