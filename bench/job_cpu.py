"""Where a running job's CPU goes: every process and thread of it over a window.

Runs COMMAND (an `elasticdl train`, say), waits SETTLE seconds for its steady
state, then reads /proc twice, WINDOW seconds apart: the cores' user, system and
idle shares (/proc/stat); each process's CPU time (utime + stime, which counts
its threads that ended inside the window too); and each thread's time on a core
and time runnable but not running (schedstat), with its involuntary switches.
The job is COMMAND's process and every process below it (the master, the
servers and workers the local backend starts). A process is named by the first
word of its arguments after the binary (master, ps, worker, ...); its main
thread is marked `*` (a worker's training thread).

  /usr/bin/python3 bench/job_cpu.py [--settle 12] [--window 12] -- COMMAND...

Prints the figures once COMMAND has ended, and exits with its status.
"""
import argparse
import os
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def children():
    """{ppid: [pid]} of every process now."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(pid))
    return out


def descendants(root):
    tree, found, todo = children(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


def read(path):
    with open(path) as f:
        return f.read()


def role(pid):
    args = read(f"/proc/{pid}/cmdline").split("\0")
    return args[1] if len(args) > 1 and args[1] and not args[1].startswith("-") else "-"


def snapshot(root):
    """(cores' jiffies, {pid: (role, cpu s)}, {(pid, tid): (comm, run s, wait s, involuntary)})."""
    cores = [int(v) for v in read("/proc/stat").split("\n", 1)[0].split()[1:]]
    procs, threads = {}, {}
    for pid in descendants(root):
        try:
            fields = read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
            procs[pid] = (role(pid), (int(fields[11]) + int(fields[12])) / TICKS)
            for tid in os.listdir(f"/proc/{pid}/task"):
                task = f"/proc/{pid}/task/{tid}"
                run, wait, _ = (int(v) for v in read(f"{task}/schedstat").split())
                involuntary = next(int(line.split()[1]) for line in read(f"{task}/status").splitlines()
                                   if line.startswith("nonvoluntary_ctxt_switches"))
                threads[(pid, int(tid))] = (read(f"{task}/comm").strip(), run / 1e9, wait / 1e9,
                                            involuntary)
        except (OSError, StopIteration, ValueError):
            continue  # ended meanwhile
    return cores, procs, threads


def report(before, after, seconds):
    (cores0, procs0, threads0), (cores1, procs1, threads1) = before, after
    d = [b - a for a, b in zip(cores0, cores1)]
    total = sum(d) or 1
    print(f"window {seconds:.1f} s; cores: user {100 * d[0] / total:.1f} % nice {100 * d[1] / total:.1f} % "
          f"system {100 * d[2] / total:.1f} % idle {100 * d[3] / total:.1f} % "
          f"steal {100 * d[7] / total:.1f} %")
    print(f"{'process':<22} {'cpu ms':>9} {'% of a core':>12}")
    for pid, (name, cpu) in sorted(procs1.items()):
        ms = 1e3 * (cpu - procs0.get(pid, (name, 0.0))[1])
        late = "" if pid in procs0 else "  (started inside the window)"
        print(f"{name + ' ' + str(pid):<22} {ms:9.0f} {ms / seconds / 10:12.2f}{late}")
    print(f"{'thread':<40} {'on a core ms':>12} {'%':>7} {'runnable ms':>12} {'involuntary':>12}")
    rows = []
    for (pid, tid), (comm, run, wait, involuntary) in threads1.items():
        comm0, run0, wait0, involuntary0 = threads0.get((pid, tid), (comm, 0.0, 0.0, 0))
        rows.append((run - run0, wait - wait0, involuntary - involuntary0, pid, tid, comm))
    for run, wait, involuntary, pid, tid, comm in sorted(rows, reverse=True):
        if run < 1e-3:
            continue
        name = f"{procs1[pid][0]} {pid} {comm}{' *' if tid == pid else ''}"
        print(f"{name:<40} {1e3 * run:12.1f} {100 * run / seconds:7.2f} {1e3 * wait:12.1f} "
              f"{involuntary:12d}")


def window_parser(doc, settle, window):
    """Arguments of a tool that watches COMMAND over a window: --settle, --window, -- COMMAND..."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--settle", type=float, default=settle, help="seconds before the window")
    parser.add_argument("--window", type=float, default=window, help="seconds of the window")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    return parser


def start_settled(parser, args):
    """Starts args.command; returns it once args.settle seconds have passed (exits if it ended)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND given")
    job = subprocess.Popen(command)
    time.sleep(args.settle)
    if job.poll() is not None:
        sys.exit(f"{command[0]} ended before the window opened (status {job.returncode})")
    return job


def main():
    parser = window_parser(__doc__, settle=12.0, window=12.0)
    args = parser.parse_args()
    job = start_settled(parser, args)
    before, opened = snapshot(job.pid), time.monotonic()
    time.sleep(args.window)
    after, seconds = snapshot(job.pid), time.monotonic() - opened
    status = job.wait()
    report(before, after, seconds)
    sys.exit(status)


if __name__ == "__main__":
    main()
