"""What two loops run side by side would make in lockstep: the limit of a synchronous job.

A synchronous step waits for the slower of its workers. Two independent loops on
two cores (L2) never wait for each other, so L2 overstates what any synchronous
job of two workers can make whenever the cores' speeds differ from moment to
moment. This replays the two loops' traces (train_bench --trace, written while
they ran side by side) as one synchronous job: from the moment both windows are
open, each step takes, on each core, the compute time of the minibatch that
core's loop was computing at that moment, and waits for the slower; each step
adds the loops' mean data time per minibatch once (a synchronous job's workers
start their tasks on the same step, so their data is read side by side), and
every step trains one minibatch per loop. Communication is free: what is left is
the cost of the barrier alone.

  /usr/bin/python3 bench/lockstep_limit.py A.trace B.trace
  # prints: lockstep_factor=F skew_ms=S   (F: lockstep samples/s / the loops' own)

F is the synchronous job's share of L2 that the machine allows; L2 * F is the
most a synchronous 2 x 1 job could make in that run, and S the mean difference
between the two cores' compute time of a minibatch (what the faster worker waits).
"""
import bisect
import sys


def read_trace(path):
    """(ends, compute_ms, data_ms, samples) of the timed minibatches; opened: the window's start."""
    ends, compute, data, samples = [], [], [], []
    opened = None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) != 4:
                raise SystemExit(f"{path}:{number}: expected 4 fields "
                                 f"(end_s data_ms compute_ms samples), got {line.strip()!r}")
            end, data_ms, compute_ms, n = float(fields[0]), float(fields[1]), float(fields[2]), int(fields[3])
            if n == 0:
                if opened is None:
                    opened = end
                continue
            ends.append(end)
            compute.append(compute_ms)
            data.append(data_ms)
            samples.append(n)
    if opened is None or len(ends) < 10:
        raise SystemExit(f"{path}: too few timed minibatches to replay")
    return opened, ends, compute, data, samples


def lockstep(a, b):
    opened = max(a[0], b[0])
    closed = min(a[1][-1], b[1][-1])
    if closed <= opened:
        raise SystemExit("the two traces do not overlap in time: run the loops side by side")

    def at(trace, t):  # the minibatch being computed at time t
        _, ends, compute, _, samples = trace
        i = min(bisect.bisect_right(ends, t), len(ends) - 1)
        return compute[i], samples[i]

    def own(trace):  # the loop's own samples and data ms inside the window
        _, ends, _, data, samples = trace
        inside = [i for i, e in enumerate(ends) if opened < e <= closed]
        return sum(samples[i] for i in inside), sum(data[i] for i in inside) / max(len(inside), 1)

    (own_a, data_a), (own_b, data_b) = own(a), own(b)
    data_ms = (data_a + data_b) / 2
    t, samples, skew, steps = opened, 0, 0.0, 0
    while True:
        (ca, na), (cb, nb) = at(a, t), at(b, t)
        step = (max(ca, cb) + data_ms) / 1e3
        if t + step > closed:
            break
        t += step
        samples += na + nb
        skew += abs(ca - cb)
        steps += 1
    if steps == 0:
        raise SystemExit("the window is shorter than one step")
    loops = (own_a + own_b) / (closed - opened)
    return (samples / (t - opened)) / loops, skew / steps


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: lockstep_limit.py A.trace B.trace")
    factor, skew = lockstep(read_trace(sys.argv[1]), read_trace(sys.argv[2]))
    print(f"lockstep_factor={factor:.4f} skew_ms={skew:.2f}")
