"""Whom a running job's computing threads waited for: the scheduler's record of a window.

Runs COMMAND (an `elasticdl train`, or a bare loop), waits SETTLE seconds for
its steady state, then records every context switch on every core for WINDOW
seconds (`perf record --switch-events -a`; root, or
kernel.perf_event_paranoid <= -1: perf's own switch records, since the
sched:sched_switch tracepoint may miss a core's switches out of its idle
task; on the 2-core machine of docs/benchmarks.md it missed every one of the
second core's). The computing threads are the COUNT threads
of the job's PROCESS processes (the first word of their arguments after the
binary: worker) that were on a core longest in the window; the job is
COMMAND's process and every process below it, as bench/job_cpu.py has it.

Each time a computing thread was switched out while still runnable (it was
preempted), the thread that took its core is charged the time until the
computing thread ran again. Prints, by what took the core (the process's role
and the thread's name; `outside` for processes not of the job, named by their
thread), how many times and for how long; and, for the times one computing
thread took the core of another of the same process (the two stacked on one
core), what the other cores ran at that moment: nothing (idle) or which thread.

  /usr/bin/python3 bench/preemptions.py [--settle 8] [--window 6] [--process worker] \\
      [--count 2] -- COMMAND...

`--process -` picks a process whose arguments start with a flag (the bare loop,
bench/train_bench). Prints the figures once COMMAND has ended, and exits with
its status.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_cpu  # noqa: E402

# `perf script --show-switch-events -F comm,tid,cpu,time`: a context switch
# as the thread going out records it (OUT, `preempt` when it was still
# runnable, and the next thread's ids) and as the thread coming in records it
# (IN, and the previous thread's). The idle task records neither.
RECORD = re.compile(r"^\s*(.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+PERF_RECORD_SWITCH(?:_CPU_WIDE)?\s+"
                    r"(OUT|IN)\s*(preempt)?\s+(?:next|prev) pid/tid:\s*\d+/(\d+)")

Switch = collections.namedtuple("Switch", "cpu time prev prev_comm prev_state next next_comm")

# Seconds at the start of the record left out of the counts: perf's own
# start-up runs on the cores for tens of milliseconds, and the computing
# threads' waits in that time are its doing (on the machine of
# docs/benchmarks.md, every time a bare loop's two threads shared a core).
SKIP = 0.5


def parse(lines):
    """The switches among `lines`, in order: one for each OUT record, and one
    for each IN record from the idle task (tid 0), which records no OUT; other
    lines are skipped. prev_state is "R" for a thread preempted, "S" otherwise."""
    records, comms = [], {0: "idle"}
    for line in lines:
        m = RECORD.match(line)
        if m:
            comm, tid, cpu, t, kind, preempt, other = m.groups()
            comms[int(tid)] = comm
            records.append((int(cpu), float(t), kind, int(tid), bool(preempt), int(other)))
    out = []
    for cpu, t, kind, tid, preempt, other in records:
        if kind == "OUT":
            out.append(Switch(cpu, t, tid, comms[tid], "R" if preempt else "S", other,
                              comms.get(other, str(other))))
        elif other == 0:
            out.append(Switch(cpu, t, 0, "idle", "R", tid, comms[tid]))
    return out


def on_core(switches, since=0.0):
    """{tid: seconds on a core} from `since` to the record's end (from each
    switch in to the switch out)."""
    running, total = {}, collections.Counter()
    for s in switches:
        if s.cpu in running:
            tid, t0 = running[s.cpu]
            if tid == s.prev and s.time > since:
                total[tid] += s.time - max(t0, since)
        running[s.cpu] = (s.next, s.time)
    return total


def analyse(switches, threads, process, count, since=0.0):
    """The computing threads, and what took their cores.

    `threads`: {tid: (pid, role, comm)} of the job. Preemptions before
    `since` (a time of the record) are not counted. Returns (computing tids,
    {taker: [times, seconds]}, {what the other cores ran: times}); a taker is
    (role, comm), or ("outside", comm) for a thread not of the job, and the
    idle task is "idle".
    """
    busy = on_core(switches, since)
    candidates = [tid for tid, (_, role, _) in threads.items() if process in ("", role)]
    computing = sorted(candidates, key=lambda tid: -busy[tid])[:count]
    computing = [tid for tid in computing if busy[tid] > 0]
    chosen = set(computing)

    def name(tid, comm):
        if tid == 0:
            return "idle"
        if tid in chosen:
            return f"{threads[tid][1]}/{threads[tid][2]} (computing)"
        if tid in threads:
            return f"{threads[tid][1]}/{threads[tid][2]}"
        return f"outside/{comm}" if comm != str(tid) else f"outside/tid {tid}"

    current = {}  # cpu -> (tid, comm) running there
    preempted = {}  # computing tid -> (when, taker)
    takers = collections.defaultdict(lambda: [0, 0.0])
    beside = collections.Counter()
    for s in switches:
        current[s.cpu] = (s.next, s.next_comm)
        if s.next in preempted:
            t0, taker = preempted.pop(s.next)
            takers[taker][0] += 1
            takers[taker][1] += s.time - t0
        if s.prev in chosen and s.prev_state.startswith("R") and s.time >= since:
            preempted[s.prev] = (s.time, name(s.next, s.next_comm))
            if s.next in chosen and threads[s.next][0] == threads[s.prev][0]:
                for cpu, (tid, comm) in current.items():
                    if cpu != s.cpu:
                        beside[name(tid, comm)] += 1
    return computing, dict(takers), beside


def job_threads(root):
    """{tid: (pid, role, comm)} of every thread of the job now."""
    out = {}
    for pid in job_cpu.descendants(root):
        try:
            role = job_cpu.role(pid)
            for tid in os.listdir(f"/proc/{pid}/task"):
                out[int(tid)] = (pid, role, job_cpu.read(f"/proc/{pid}/task/{tid}/comm").strip())
        except OSError:
            continue  # ended meanwhile
    return out


def record(seconds, path):
    """The window's switches, recorded into `path`; exits naming what perf said when it cannot."""
    made = subprocess.run(["perf", "record", "-q", "--switch-events", "-e", "dummy", "-a", "-m",
                           "16M", "-o", path, "--", "sleep", str(seconds)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit("perf record --switch-events -a failed (root, or "
                 f"kernel.perf_event_paranoid <= -1, is needed): {made.stderr.strip()}")
    script = subprocess.run(["perf", "script", "-i", path, "--show-switch-events", "-F",
                             "comm,tid,cpu,time"], capture_output=True, text=True)
    if script.returncode != 0:
        sys.exit(f"perf script -i {path} failed: {script.stderr.strip()}")
    return parse(script.stdout.splitlines())


def report(computing, takers, beside, threads, busy, seconds):
    print(f"window {seconds:.1f} s")
    for tid in computing:
        pid, role, comm = threads[tid]
        print(f"computing: {role} {pid} {comm} {tid}: on a core {1e3 * busy[tid]:.0f} ms")
    times = sum(n for n, _ in takers.values())
    waited = sum(w for _, w in takers.values())
    print(f"preempted {times} times, {1e3 * waited:.1f} ms until they ran again "
          f"({1e3 * waited / seconds:.1f} ms a second)")
    print(f"{'what took the core':<40} {'times':>6} {'ms':>8} {'ms each':>8}")
    for taker, (n, w) in sorted(takers.items(), key=lambda kv: -kv[1][1]):
        print(f"{taker:<40} {n:6d} {1e3 * w:8.1f} {1e3 * w / n:8.2f}")
    if beside:
        print(f"one computing thread on another's core ({sum(beside.values())} times); "
              "the other cores ran:")
        for what, n in beside.most_common():
            print(f"  {what:<38} {n:6d}")


def main():
    parser = job_cpu.window_parser(__doc__, settle=8.0, window=6.0)
    parser.add_argument("--process", default="worker",
                        help="role of the processes whose threads compute ('' for any)")
    parser.add_argument("--count", type=int, default=2, help="how many computing threads")
    args = parser.parse_args()
    if args.count < 1 or args.window <= 0:
        parser.error("--count must be at least 1 and --window positive")
    job = job_cpu.start_settled(parser, args)
    threads = job_threads(job.pid)
    with tempfile.TemporaryDirectory() as scratch:
        switches = record(args.window + SKIP, os.path.join(scratch, "switches.data"))
    for tid, named in job_threads(job.pid).items():
        threads.setdefault(tid, named)  # started inside the window
    status = job.wait()
    if not switches:
        sys.exit("the record holds no context switch")
    since = switches[0].time + SKIP
    seconds = switches[-1].time - since
    computing, takers, beside = analyse(switches, threads, args.process, args.count, since)
    if not computing:
        sys.exit(f"no thread of a '{args.process}' process ran in the window")
    report(computing, takers, beside, threads, on_core(switches, since), seconds)
    sys.exit(status)


if __name__ == "__main__":
    main()
