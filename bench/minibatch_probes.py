"""Where each minibatch's time goes, timed by probes on our own functions.

Runs COMMAND (an `elasticdl train` job, or bench/train_bench's bare loop) with
uprobes on the functions every minibatch passes through, records them for the
whole run (`perf record -e 'edlmb:*' -a`; root, since uprobes are set through
tracefs), and splits each training thread's minibatches into

  forward      ZooProgram::Forward entered, to ZooProgram::Loss entered
  backward     Loss entered, to the end of the backward: a worker's
               ShardedModel::FillPush entered, the bare loop's optimizer step
               entered (torch::optim::<Optimizer>::step)
  between      that end, to the next minibatch's Forward: a worker's push and
               the values into its model (and any pull); the bare loop's step,
               zero_grad and the next minibatch's data

A job with one worker whose server answers through shared memory (one machine,
rpc/shared_tensors.h) also has `between` split along the push, in the order
its parts run: the hand-over to the push thread (FillPush entered to
PsClient::PushFrom entered), the tensors into the region (to
SharedTensorRegion::SendCall), the server's wake-up (to PsService::PushShared
entered), its decode and check (to ParameterStore::StepLocked entered), the
optimizer's step (to its return), the values out (to PushShared's return), the
answer back (to AwaitAnswer's return), the values into the model
(ShardedModel::Apply entered to its return), and the training thread's return
to its next Forward (PushFrom's return to Forward).

A synchronous job of several workers has each worker's `between` split at its
step's last push (the latest end of a backward among the minibatches the
server's step takes, found by that step's StepLocked): the wait for the other
workers' pushes, and after the last one, the server's step (from that push to
StepLocked entered, then the step), the values out and the answer back (to
the first AwaitAnswer's return after the step: a worker that pushed before the
others has its push answered at once and waits in a pull), the values into the
model and the return to the next Forward. Over the minibatches whose push was
its step's last, that push to the server's step is split further: the
hand-over and the tensors into the region (to SendCall), the server's wake-up
(to PushShared), its decode and check (to ParameterStore::FlushPendingLocked
entered) and the sum of the step's pushes (to StepLocked).

A worker's `between` is also given over the minibatches that asked the
master for the next task in it (Worker::AskForNext entered on the training
thread), those that began a task in it (Worker::Train entered) and the
others: what the task's hand-outs and reports cost its training thread.

Prints the median and mean milliseconds of each part over the minibatches
after the first SKIP_FIRST and before the last SKIP_LAST of each thread, and
exits with COMMAND's status. The probes are taken out again at the end.

  sudo /usr/bin/python3 bench/minibatch_probes.py -- build/bin/elasticdl train ... \\
      --num_workers=1 ...
  sudo env GLIBC_TUNABLES=... /usr/bin/python3 bench/minibatch_probes.py -- build/bin/train_bench \\
      --data=DIR --threads=2 --only=bare
"""
import argparse
import bisect
import collections
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

GROUP = "edlmb"
TRACEFS = "/sys/kernel/tracing"
SKIP_FIRST = 30  # start-up: LibTorch's first calls, the zoo's first pulls
SKIP_LAST = 10   # the job's end: the last task's report, the final pulls

# Probes on the binary that runs the model (elasticdl-torch or train_bench):
# (event, kind, prefix of the mangled symbol). "p" fires on entry, "r" on return.
PROBES = [
    ("fw", "p", "_ZNK9elasticdl10ZooProgram7ForwardE"),
    ("lo", "p", "_ZNK9elasticdl10ZooProgram4LossE"),
    ("fp", "p", "_ZNK9elasticdl6worker12ShardedModel8FillPushE"),
    ("pf", "p", "_ZN9elasticdl3rpc8PsClient8PushFromE"),
    ("pfr", "r", "_ZN9elasticdl3rpc8PsClient8PushFromE"),
    ("sc", "p", "_ZN9elasticdl3rpc18SharedTensorRegion8SendCallE"),
    ("awr", "r", "_ZNK9elasticdl3rpc18SharedTensorRegion11AwaitAnswer"),
    ("ps", "p", "_ZN9elasticdl2ps9PsService10PushSharedE"),
    ("psr", "r", "_ZN9elasticdl2ps9PsService10PushSharedE"),
    ("fl", "p", "_ZN9elasticdl2ps14ParameterStore18FlushPendingLockedE"),
    ("st", "p", "_ZN9elasticdl2ps14ParameterStore10StepLockedE"),
    ("str", "r", "_ZN9elasticdl2ps14ParameterStore10StepLockedE"),
    ("ap", "p", "_ZN9elasticdl6worker12ShardedModel5ApplyE"),
    ("apr", "r", "_ZN9elasticdl6worker12ShardedModel5ApplyE"),
    ("af", "p", "_ZN9elasticdl6worker6Worker10AskForNextE"),
    ("tr", "p", "_ZN9elasticdl6worker6Worker5TrainE"),
]
# The bare loop's step, in libtorch_cpu: any of LibTorch's optimizers.
OPTIMIZER_STEP = re.compile(r"^_ZN5torch5optim(\d+)([A-Za-z]+)4stepESt8functionIFN2at6TensorEvEE$")

# The push's parts: (name, from event, to event), in the order they run.
PUSH_PARTS = [
    ("hand-over to the push thread", "fp", "pf"),
    ("tensors into the region", "pf", "sc"),
    ("the server wakes", "sc", "ps"),
    ("the server decodes and checks", "ps", "st"),
    ("the optimizer's step", "st", "str"),
    ("the values out", "str", "psr"),
    ("the answer back", "psr", "awr"),
    ("the values into the model", "ap", "apr"),
    ("back to the next forward", "pfr", "next"),
]

# A synchronous step of several workers, seen by one of them: from the end of
# its backward to the step's last push ("last", join_steps), then on.
STEP_PARTS = [
    ("waiting for the other workers' pushes", "end", "last"),
    ("after the step's last push", "last", "next"),
    ("  the last push to the server's step", "last", "st"),
    ("  the optimizer's step", "st", "str"),
    ("  the values out and the answer back", "str", "step_awr"),
    ("  the values into the model", "step_ap", "step_apr"),
    ("  back to the next forward", "step_apr", "next"),
]
# The last push of a step, seen by the worker that made it (its minibatches
# whose end is their step's last), from the end of its backward on.
LAST_PUSH_PARTS = [
    ("    its hand-over and the tensors into the region", "end", "sc"),
    ("    the server wakes", "sc", "ps"),
    ("    the server decodes and checks", "ps", "fl"),
    ("    the sum of the step's pushes", "fl", "st"),
]

# `between`, over the minibatches by what their training thread did in it
# besides: (name, event on that thread, or None for neither).
TASK_PARTS = [
    ("between, the minibatches that asked for the next task", "af"),
    ("between, the minibatches that began a task", "tr"),
    ("between, the other minibatches", None),
]

# Where the events happen: on the training thread, on the worker's push
# thread (its own process), and in the server (any process).
TRAINING_THREAD_EVENTS = ("af", "tr")
PUSH_THREAD_EVENTS = ("pf", "pfr", "sc", "awr", "ap", "apr")
SERVER_EVENTS = ("ps", "fl", "st", "str", "psr")

Event = collections.namedtuple("Event", "pid tid time name")


def load_segments(path):
    """(vaddr, memsz, offset) of each PT_LOAD segment of the ELF file `path`."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            raise SystemExit(f"{path}: not a 64-bit ELF file")
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segments = []
    for i in range(phnum):
        kind, _, offset, vaddr, _, _, memsz, _ = struct.unpack_from("<IIQQQQQQ", table,
                                                                    i * phentsize)
        if kind == 1:  # PT_LOAD
            segments.append((vaddr, memsz, offset))
    return segments


def file_offset(segments, address):
    """Where in the file the code at `address` lies (what a uprobe names)."""
    for vaddr, memsz, offset in segments:
        if vaddr <= address < vaddr + memsz:
            return address - vaddr + offset
    raise ValueError(f"address {address:#x} is in no loaded segment")


def symbols(path, dynamic=False):
    """Mangled name -> address of the functions `path` defines."""
    out = subprocess.run(["nm", "--defined-only"] + (["-D"] if dynamic else []) + [path],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt":
            found.setdefault(parts[2], int(parts[0], 16))
    return found


def probe_lines(binary, libtorch):
    """tracefs uprobe_events lines for `binary` (and the optimizers' steps in
    `libtorch`, when given). Exits when the binary has no Forward to probe."""
    lines = []
    table, segments = symbols(binary), load_segments(binary)
    for event, kind, prefix in PROBES:
        name = next((s for s in sorted(table) if s.startswith(prefix)), None)
        if name is not None:
            lines.append(f"{kind}:{GROUP}/{event} {binary}:{file_offset(segments, table[name]):#x}")
    if not any("/fw " in line for line in lines):
        raise SystemExit(f"{binary} has no ZooProgram::Forward to probe")
    if libtorch:
        table, segments = symbols(libtorch, dynamic=True), load_segments(libtorch)
        for name, address in sorted(table.items()):
            match = OPTIMIZER_STEP.match(name)
            if match:
                event = "step_" + match.group(2).lower()
                lines.append(f"p:{GROUP}/{event} {libtorch}:{file_offset(segments, address):#x}")
    return lines


def parse(lines):
    """The events among `perf script -F pid,tid,time,event` lines, in order."""
    pattern = re.compile(rf"^\s*(\d+)/(\d+)\s+([\d.]+):\s+{GROUP}:(\w+):")
    events = []
    for line in lines:
        m = pattern.match(line)
        if m:
            events.append(Event(int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4)))
    events.sort(key=lambda e: e.time)
    return events


def minibatches(events):
    """By training thread (the threads that enter Forward), its minibatches in
    order, each a dict from event name to the time of its first occurrence
    from that Forward on: fw, lo, the end of the backward ("end": FillPush on
    the same thread, or an optimizer's step), "next" (the next Forward), and
    the push's events of the same process (its push thread; the server's, of
    any process) between the end and the next Forward."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.name == "fw":
            by_thread[e.tid].append(e)
    steps = sorted({e.name for e in events if e.name.startswith("step_")})
    times = collections.defaultdict(list)  # (name, tid), (name, "pid", pid), (name, None)
    for e in events:
        times[(e.name, e.tid)].append(e.time)
        times[(e.name, "pid", e.pid)].append(e.time)
        times[(e.name, None)].append(e.time)

    def first(key, after, before):
        ts = times.get(key, [])
        i = bisect.bisect_left(ts, after)
        return ts[i] if i < len(ts) and ts[i] < before else None

    out = {}
    for tid, forwards in by_thread.items():
        pid = forwards[0].pid
        rows = []
        for k in range(len(forwards) - 1):
            start, following = forwards[k].time, forwards[k + 1].time
            row = {"fw": start, "next": following}
            row["lo"] = first(("lo", tid), start, following)
            if row["lo"] is None:
                continue
            row["fp"] = first(("fp", tid), row["lo"], following)
            ends = [row["fp"]] + [first((name, tid), row["lo"], following) for name in steps]
            ends = [t for t in ends if t is not None]
            if not ends:
                continue
            row["end"] = min(ends)
            for name in TRAINING_THREAD_EVENTS:
                row[name] = first((name, tid), row["end"], following)
            for name in PUSH_THREAD_EVENTS:
                row[name] = first((name, "pid", pid), row["end"], following)
            for name in SERVER_EVENTS:
                row[name] = first((name, None), row["end"], following)
            # A synchronous step answers a worker that pushed before the others
            # at once, and its pull waits for the step: what follows the step
            # is looked for after it.
            if row["str"] is not None:
                for name in ("awr", "ap", "apr"):
                    row["step_" + name] = first((name, "pid", pid), row["str"], following)
            rows.append(row)
        out[tid] = rows
    return out


def join_steps(by_thread):
    """Gives each minibatch of a synchronous job of several workers the end of
    its step's last backward ("last"): the minibatches whose first server step
    after their backward is the same StepLocked are that step's. Minibatches
    without a server step (the bare loops), or alone in theirs, get none."""
    by_step = collections.defaultdict(list)
    for rows in by_thread.values():
        for row in rows:
            if row.get("st") is not None:
                by_step[row["st"]].append(row)
    for rows in by_step.values():
        if len(rows) > 1:
            last = max(row["end"] for row in rows)
            for row in rows:
                row["last"] = last
    return by_thread


def parts(rows, single_worker):
    """(name, milliseconds of each minibatch) of every part the rows have."""
    split = [(name, a, b, rows) for name, a, b in
             [("forward", "fw", "lo"), ("backward", "lo", "end"), ("between", "end", "next")]]
    if single_worker:
        split += [("  " + name, a, b, rows) for name, a, b in PUSH_PARTS]
    elif any("last" in r for r in rows):
        pushed_last = [r for r in rows if r.get("last") == r["end"]]
        for name, a, b in STEP_PARTS:
            split.append(("  " + name, a, b, rows))
            if (a, b) == ("last", "st"):  # that push, split where this worker made it
                split += [("  " + sub, c, d, pushed_last) for sub, c, d in LAST_PUSH_PARTS]
    if any(r.get(e) is not None for r in rows for e in TRAINING_THREAD_EVENTS):
        for name, event in TASK_PARTS:
            if event is None:
                of = [r for r in rows if all(r.get(e) is None for e in TRAINING_THREAD_EVENTS)]
            else:
                of = [r for r in rows if r.get(event) is not None]
            split.append((name, "end", "next", of))
    result = []
    for name, a, b, of in split:
        values = [1e3 * (r[b] - r[a]) for r in of
                  if r.get(a) is not None and r.get(b) is not None and r[b] >= r[a]]
        if values:
            result.append((name, values))
    return result


def report(by_thread):
    """Prints each training thread's parts; returns how many threads it found."""
    kept = {tid: rows[SKIP_FIRST:len(rows) - SKIP_LAST] for tid, rows in by_thread.items()}
    kept = {tid: rows for tid, rows in kept.items() if rows}
    single = len(kept) == 1
    for tid, rows in sorted(kept.items()):
        total = len(by_thread[tid])
        print(f"training thread {tid}: {len(rows)} of its {total} minibatches "
              f"(the first {SKIP_FIRST} and the last {SKIP_LAST} left out)")
        split = parts(rows, single)
        width = max(len(name) for name, _ in split)
        print(f"{'part':<{width}} {'median ms':>10} {'mean ms':>10} {'minibatches':>12}")
        for name, values in split:
            print(f"{name:<{width}} {statistics.median(values):10.3f} "
                  f"{statistics.mean(values):10.3f} {len(values):12d}")
    return len(kept)


def append_probe(line):
    """Adds (or, with "-:", removes) one probe through tracefs."""
    fd = os.open(os.path.join(TRACEFS, "uprobe_events"), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def set_probes(lines):
    if not os.path.exists(os.path.join(TRACEFS, "uprobe_events")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    clear_probes()
    for line in lines:
        append_probe(line)


def clear_probes():
    events = os.path.join(TRACEFS, "uprobe_events")
    if not os.path.exists(events):
        return
    with open(events) as f:
        ours = [line.split()[0].split(":", 1)[1] for line in f if f":{GROUP}/" in line]
    for name in ours:
        append_probe(f"-:{name}")


def libtorch_of(binary):
    """The libtorch_cpu that `binary` loads."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    m = re.search(r"libtorch_cpu\.so\S*\s+=>\s+(\S+)", out)
    return m.group(1) if m else None


def model_binary(command):
    """The binary that runs the model: elasticdl-torch beside an `elasticdl`,
    else COMMAND's own."""
    found = command[0] if os.path.sep in command[0] else shutil.which(command[0])
    first = os.path.realpath(found) if found else command[0]
    if os.path.basename(first) == "elasticdl":
        return os.path.join(os.path.dirname(first), "elasticdl-torch")
    return first


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND given")
    if os.geteuid() != 0:
        sys.exit("uprobes are set through tracefs: run as root")
    binary = model_binary(command)
    if not os.path.exists(binary):
        sys.exit(f"{binary}: no such file (the binary that runs the model)")
    set_probes(probe_lines(binary, libtorch_of(binary)))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            data = os.path.join(scratch, "probes.data")
            status = subprocess.run(["perf", "record", "-q", "-e", f"{GROUP}:*", "-a", "-o", data,
                                     "--"] + command).returncode
            script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,time,event"],
                                    capture_output=True, text=True)
    finally:
        clear_probes()
    if report(join_steps(minibatches(parse(script.stdout.splitlines())))) == 0:
        sys.exit(f"no minibatch was seen (status of COMMAND: {status})")
    sys.exit(status)


if __name__ == "__main__":
    main()
