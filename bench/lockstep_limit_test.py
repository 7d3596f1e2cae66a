"""Unit tests of bench/lockstep_limit.py on traces written here."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockstep_limit  # noqa: E402


def write_trace(directory, name, minibatches, start=100.0, data_ms=0.0):
    """A trace of minibatches of the given compute milliseconds, 64 samples each."""
    path = os.path.join(directory, name)
    t = start
    with open(path, "w") as f:
        f.write(f"{t:.6f} 0.000 0.000 0\n")
        for compute_ms in minibatches:
            t += (compute_ms + data_ms) / 1e3
            f.write(f"{t:.6f} {data_ms:.3f} {compute_ms:.3f} 64\n")
    return path


class LockstepLimitTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def replay(self, a, b):
        return lockstep_limit.lockstep(lockstep_limit.read_trace(a), lockstep_limit.read_trace(b))

    def test_cores_of_one_speed_lose_nothing(self):
        a = write_trace(self.dir.name, "a", [50.0] * 400)
        b = write_trace(self.dir.name, "b", [50.0] * 400)
        factor, skew = self.replay(a, b)
        self.assertAlmostEqual(factor, 1.0, places=2)
        self.assertAlmostEqual(skew, 0.0, places=6)

    def test_data_time_is_added_once_per_step(self):
        a = write_trace(self.dir.name, "a", [40.0] * 400, data_ms=10.0)
        b = write_trace(self.dir.name, "b", [40.0] * 400, data_ms=10.0)
        factor, _ = self.replay(a, b)
        self.assertAlmostEqual(factor, 1.0, places=2)

    def test_a_core_at_half_speed_half_the_time(self):
        # Core B alternates a second at 50 ms a minibatch and a second at
        # 100 ms; core A stays at 50. On their own the loops make 40 + 30
        # minibatches every 2 s; in lockstep, 20 steps in the fast second and
        # 10 in the slow one, two minibatches each: 60 of 70.
        a = write_trace(self.dir.name, "a", [50.0] * 400)
        slow_fast = []
        while sum(slow_fast) < 20000:
            slow_fast += [50.0] * 20 + [100.0] * 10
        b = write_trace(self.dir.name, "b", slow_fast)
        factor, skew = self.replay(a, b)
        self.assertAlmostEqual(factor, 60 / 70, delta=0.01)
        self.assertAlmostEqual(skew, 50.0 / 3, delta=1.0)  # a third of the steps 50 ms apart

    def test_a_line_of_the_wrong_shape_names_its_file_and_line(self):
        path = os.path.join(self.dir.name, "bad")
        with open(path, "w") as f:
            f.write("100.0 0.000 0.000 0\n100.05 0.1 50.0\n")
        with self.assertRaises(SystemExit) as raised:
            lockstep_limit.read_trace(path)
        self.assertIn(f"{path}:2: expected 4 fields", str(raised.exception))

    def test_traces_apart_in_time_are_refused(self):
        a = write_trace(self.dir.name, "a", [50.0] * 100, start=100.0)
        b = write_trace(self.dir.name, "b", [50.0] * 100, start=200.0)
        with self.assertRaises(SystemExit) as raised:
            self.replay(a, b)
        self.assertIn("do not overlap", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
