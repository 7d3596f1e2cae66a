"""Unit tests of bench/preemptions.py on scheduler records written here."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preemptions  # noqa: E402

# The job: a worker (pid 100) with its training thread, a second computing
# thread, its pipeline and a thread that barely runs; a master (pid 200).
THREADS = {
    100: (100, "worker", "elasticdl-torch"),
    102: (100, "worker", "elasticdl-torch"),
    103: (100, "worker", "edl-pipeline"),
    104: (100, "worker", "heartbeat"),
    200: (200, "master", "elasticdl"),
    201: (200, "master", "grpcpp_sync_ser"),
}
COMMS = {999: "Web Content"}


def comm(tid):
    return THREADS[tid][2] if tid in THREADS else COMMS[tid]


def switch(cpu, t, prev, state, nxt):
    """The lines of `perf script --show-switch-events -F comm,tid,cpu,time`
    for one switch: the OUT record of `prev` and the IN record of `nxt`,
    neither of them for the idle task (tid 0)."""
    lines = []
    if prev != 0:
        lines.append(f"{comm(prev):>16} {prev:5d} [{cpu:03d}] {t:.6f}: PERF_RECORD_SWITCH_CPU_WIDE "
                     f"OUT {'preempt ' if state == 'R' else '        '}next pid/tid: "
                     f"{nxt:5d}/{nxt:<5d}")
    if nxt != 0:
        lines.append(f"{comm(nxt):>16} {nxt:5d} [{cpu:03d}] {t + 1e-6:.6f}: "
                     f"PERF_RECORD_SWITCH_CPU_WIDE IN          prev pid/tid: {prev:5d}/{prev:<5d}")
    return lines


RECORD = sum([
    switch(0, 1.000, 0, "R", 100),
    switch(1, 1.000, 0, "R", 102),
    # The master's thread takes the second computing thread's core for 0.5 ms.
    switch(1, 1.010, 102, "R", 201),
    switch(1, 1.0105, 201, "S", 102),
    # That thread sleeps; woken, it lands on the training thread's core while
    # the other core is idle, and the training thread waits 1 ms for it.
    switch(1, 1.019, 102, "S", 0),
    switch(0, 1.020, 100, "R", 102),
    switch(0, 1.021, 102, "S", 100),
    # A process outside the job, whose thread's name has a space, takes 2 ms.
    switch(0, 1.030, 100, "R", 999),
    switch(0, 1.032, 999, "S", 100),
    # Sleeping is not being preempted; the heartbeat runs a little.
    switch(0, 1.040, 100, "S", 104),
    switch(0, 1.041, 104, "S", 100),
    # The master's main thread runs longest of all, on the other core.
    switch(1, 1.050, 0, "R", 200),
    switch(1, 1.100, 200, "S", 0),
    switch(0, 1.100, 100, "S", 0),
], []) + ["some line perf printed that is not a switch"]
SWITCHES = 14  # the calls above


class PreemptionsTest(unittest.TestCase):
    def setUp(self):
        self.switches = preemptions.parse(RECORD)

    def test_parses_every_switch_and_skips_other_lines(self):
        self.assertEqual(len(self.switches), SWITCHES)
        s = self.switches[7]
        self.assertEqual((s.cpu, s.prev, s.prev_state, s.next, s.next_comm),
                         (0, 100, "R", 999, "Web Content"))
        self.assertAlmostEqual(s.time, 1.030)

    def test_time_on_a_core_adds_up_each_threads_stretches(self):
        busy = preemptions.on_core(self.switches)
        # 1.000-1.020, 1.021-1.030, 1.032-1.040, 1.041-1.100
        self.assertAlmostEqual(busy[100], 0.020 + 0.009 + 0.008 + 0.059, delta=1e-5)
        self.assertAlmostEqual(busy[102], 0.010 + 0.0085 + 0.001, delta=1e-5)
        self.assertAlmostEqual(busy[200], 0.050, delta=1e-5)

    def test_charges_what_took_a_computing_threads_core_until_it_ran_again(self):
        computing, takers, beside = preemptions.analyse(self.switches, THREADS, "worker", 2)
        # The master's main thread ran longer, but is not a worker's.
        self.assertEqual(computing, [100, 102])
        self.assertEqual(set(takers), {"master/grpcpp_sync_ser", "outside/Web Content",
                                       "worker/elasticdl-torch (computing)"})
        self.assertEqual(takers["master/grpcpp_sync_ser"][0], 1)
        self.assertAlmostEqual(takers["master/grpcpp_sync_ser"][1], 0.0005)
        self.assertAlmostEqual(takers["worker/elasticdl-torch (computing)"][1], 0.001)
        self.assertAlmostEqual(takers["outside/Web Content"][1], 0.002)
        # Stacked once, with the other core idle.
        self.assertEqual(dict(beside), {"idle": 1})

    def test_counts_from_since_on(self):
        busy = preemptions.on_core(self.switches, since=1.015)
        self.assertAlmostEqual(busy[100], 0.005 + 0.009 + 0.008 + 0.059, delta=1e-5)
        self.assertAlmostEqual(busy[102], 0.004 + 0.001, delta=1e-5)
        _, takers, beside = preemptions.analyse(self.switches, THREADS, "worker", 2, since=1.015)
        # The master's thread took its core before then.
        self.assertEqual(set(takers), {"outside/Web Content", "worker/elasticdl-torch (computing)"})
        self.assertEqual(dict(beside), {"idle": 1})

    def test_any_process_and_fewer_threads(self):
        computing, takers, _ = preemptions.analyse(self.switches, THREADS, "", 1)
        self.assertEqual(computing, [100])
        self.assertEqual(set(takers), {"worker/elasticdl-torch", "outside/Web Content"})

    def test_no_thread_of_the_process_ran(self):
        computing, takers, beside = preemptions.analyse(self.switches, THREADS, "ps", 2)
        self.assertEqual((computing, takers, dict(beside)), ([], {}, {}))


if __name__ == "__main__":
    unittest.main()
