"""Unit tests of bench/minibatch_probes.py on probe records written here."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minibatch_probes as mp  # noqa: E402

WORKER, TRAINING, PUSHER = 100, 100, 105
SERVER, REGION = 200, 201


def line(pid, tid, ms, name):
    """One line of `perf script -F pid,tid,time,event` (times in milliseconds)."""
    return f" {pid:5d}/{tid:<5d} {ms / 1e3 + 1000:.6f}:  {mp.GROUP}:{name}: "


def worker_minibatch(t0):
    """A worker's minibatch from its Forward at t0 ms: forward 20, backward 17,
    then the push along the region, ending 1.0 ms after the backward."""
    ours = [(0, "fw"), (20, "lo"), (37, "fp")]
    pusher = [(37.1, "pf"), (37.2, "sc"), (37.75, "awr"), (37.76, "ap"), (37.8, "apr"),
              (37.81, "pfr")]
    server = [(37.25, "ps"), (37.35, "st"), (37.45, "str"), (37.7, "psr")]
    return ([line(WORKER, TRAINING, t0 + t, n) for t, n in ours] +
            [line(WORKER, PUSHER, t0 + t, n) for t, n in pusher] +
            [line(SERVER, REGION, t0 + t, n) for t, n in server])


def synchronous_step(t0):
    """One step of two workers from t0 ms: worker 100's backward ends at 37,
    worker 110's at 39. The server answers 100's push at once (100 then waits
    in a pull), steps once 110's push is in, and answers both."""
    lines = []
    for pid, end, answer in [(100, 37.0, 39.75), (110, 39.0, 39.8)]:
        lines += [line(pid, pid, t0, "fw"), line(pid, pid, t0 + 20, "lo"),
                  line(pid, pid, t0 + end, "fp")]
        push = [(end + 0.1, "pf"), (end + 0.2, "sc")]
        if pid == 100:
            push += [(end + 0.5, "awr"), (end + 0.55, "pfr"), (end + 0.6, "sc")]
        push += [(answer, "awr"), (answer + 0.01, "ap"), (answer + 0.05, "apr"),
                 (answer + 0.06, "pfr")]
        lines += [line(pid, pid + 5, t0 + t, n) for t, n in push]
        lines.append(line(SERVER, REGION, t0 + end + 0.25, "ps"))
    lines += [line(SERVER, REGION, t0 + t, n)
              for t, n in [(39.3, "fl"), (39.35, "st"), (39.45, "str")]]
    return lines


class MinibatchProbesTest(unittest.TestCase):
    def test_a_worker_minibatch_is_split_along_its_push(self):
        lines = ["not a probe", "  5/5  1.0:  sched:sched_switch: "]
        for k in range(4):
            lines += worker_minibatch(38.0 * k)
        by_thread = mp.minibatches(mp.parse(lines))
        self.assertEqual(list(by_thread), [TRAINING])
        rows = by_thread[TRAINING]
        self.assertEqual(len(rows), 3)  # the last Forward has no next one
        got = {name.strip(): values for name, values in mp.parts(rows, single_worker=True)}
        for name, ms in [("forward", 20), ("backward", 17), ("between", 1.0),
                         ("hand-over to the push thread", 0.1), ("tensors into the region", 0.1),
                         ("the server wakes", 0.05), ("the server decodes and checks", 0.1),
                         ("the optimizer's step", 0.1), ("the values out", 0.25),
                         ("the answer back", 0.05), ("the values into the model", 0.04),
                         ("back to the next forward", 0.19)]:
            self.assertEqual(len(got[name]), 3, name)
            for v in got[name]:
                self.assertAlmostEqual(v, ms, places=3, msg=name)

    def test_between_is_given_by_what_the_training_thread_did_in_it(self):
        # Minibatch 1 asks the master for the next task and its next Forward
        # comes 3 ms late; minibatch 2 begins a task, 1 ms late. An ask on
        # another thread (the push thread) is not the training thread's.
        lines = []
        for t0 in [0.0, 38.0, 79.0, 118.0, 156.0]:
            lines += worker_minibatch(t0)
        lines += [line(WORKER, TRAINING, 75.05, "af"), line(WORKER, TRAINING, 116.9, "tr"),
                  line(WORKER, PUSHER, 155.5, "af")]
        rows = mp.minibatches(mp.parse(lines))[TRAINING]
        got = dict(mp.parts(rows, single_worker=True))
        for name, ms in [("between, the minibatches that asked for the next task", [4.0]),
                         ("between, the minibatches that began a task", [2.0]),
                         ("between, the other minibatches", [1.0, 1.0])]:
            self.assertEqual(len(got[name]), len(ms), name)
            for v, want in zip(got[name], ms):
                self.assertAlmostEqual(v, want, places=3, msg=name)
        # Without those events, no such rows.
        plain = mp.minibatches(mp.parse(worker_minibatch(0) + worker_minibatch(38)))[TRAINING]
        names = [name for name, _ in mp.parts(plain, single_worker=True)]
        self.assertFalse([n for n in names if n.startswith("between,")], names)

    def test_without_a_region_only_the_parts_seen_are_given(self):
        # Over the socket: no SendCall, no answer through the region, and the
        # server's PushShared is never entered.
        lines = []
        for k in range(3):
            lines += [l for l in worker_minibatch(38.0 * k)
                      if not any(f":{n}:" in l for n in ("sc", "awr", "ps", "psr"))]
        rows = mp.minibatches(mp.parse(lines))[TRAINING]
        names = [name.strip() for name, _ in mp.parts(rows, single_worker=True)]
        self.assertIn("the optimizer's step", names)
        self.assertNotIn("tensors into the region", names)
        self.assertNotIn("the answer back", names)

    def test_the_bare_loop_ends_its_backward_at_the_optimizers_step(self):
        lines = []
        for k in range(3):
            t0 = 40.0 * k
            lines += [line(7, 7, t0, "fw"), line(7, 7, t0 + 21, "lo"),
                      line(7, 7, t0 + 39.5, "step_sgd")]
        rows = mp.minibatches(mp.parse(lines))[7]
        got = dict(mp.parts(rows, single_worker=True))
        self.assertEqual([round(v, 3) for v in got["backward"]], [18.5, 18.5])
        self.assertEqual([round(v, 3) for v in got["between"]], [0.5, 0.5])
        self.assertNotIn("  hand-over to the push thread", got)

    def test_each_worker_of_a_job_is_its_own_training_thread(self):
        lines = worker_minibatch(0) + worker_minibatch(38)
        other = [line(300, 300, t, n) for t, n in [(5, "fw"), (30, "lo"), (50, "fp"), (55, "fw")]]
        by_thread = mp.minibatches(mp.parse(lines + other))
        self.assertEqual(sorted(by_thread), [TRAINING, 300])
        self.assertEqual(len(by_thread[300]), 1)
        self.assertAlmostEqual(by_thread[300][0]["end"] - by_thread[300][0]["lo"], 0.020)
        # Another process's push thread is not this worker's.
        self.assertIsNone(by_thread[300][0].get("pf"))

    def test_a_synchronous_step_is_split_at_its_last_push(self):
        lines = []
        for k in range(4):
            lines += synchronous_step(40.0 * k)
        by_thread = mp.join_steps(mp.minibatches(mp.parse(lines)))
        self.assertEqual(sorted(by_thread), [100, 110])
        # Worker 100 waits 2 ms for 110's push; both then see the same step.
        for tid, wait, answer, back in [(100, 2.0, 0.3, 0.2), (110, 0.0, 0.35, 0.15)]:
            got = {name.strip(): values
                   for name, values in mp.parts(by_thread[tid], single_worker=False)}
            for name, ms in [("between", wait + 1.0),
                             ("waiting for the other workers' pushes", wait),
                             ("after the step's last push", 1.0),
                             ("the last push to the server's step", 0.35),
                             ("the optimizer's step", 0.1),
                             ("the values out and the answer back", answer),
                             ("the values into the model", 0.04),
                             ("back to the next forward", back)]:
                self.assertEqual(len(got[name]), 3, (tid, name))
                for v in got[name]:
                    self.assertAlmostEqual(v, ms, places=3, msg=(tid, name))
            self.assertNotIn("hand-over to the push thread", got)
        # The last push, split over the minibatches of the worker that made it.
        last = {name.strip(): values
                for name, values in mp.parts(by_thread[110], single_worker=False)}
        for name, ms in [("its hand-over and the tensors into the region", 0.2),
                         ("the server wakes", 0.05),
                         ("the server decodes and checks", 0.05),
                         ("the sum of the step's pushes", 0.05)]:
            self.assertEqual(len(last[name]), 3, name)
            for v in last[name]:
                self.assertAlmostEqual(v, ms, places=3, msg=name)
        first = {name.strip() for name, _ in mp.parts(by_thread[100], single_worker=False)}
        self.assertNotIn("the sum of the step's pushes", first)

    def test_independent_loops_have_no_step_to_join(self):
        lines = []
        for pid in (7, 8):
            for k in range(3):
                lines += [line(pid, pid, 40.0 * k, "fw"), line(pid, pid, 40.0 * k + 21, "lo"),
                          line(pid, pid, 40.0 * k + 39.5, "step_sgd")]
        by_thread = mp.join_steps(mp.minibatches(mp.parse(lines)))
        names = [name.strip() for name, _ in mp.parts(by_thread[7], single_worker=False)]
        self.assertEqual(names, ["forward", "backward", "between"])

    def test_a_minibatch_without_its_loss_or_end_is_left_out(self):
        lines = [line(7, 7, 0, "fw"), line(7, 7, 10, "fw"), line(7, 7, 20, "lo"),
                 line(7, 7, 30, "fw"), line(7, 7, 40, "lo"), line(7, 7, 45, "step_adam"),
                 line(7, 7, 50, "fw")]
        rows = mp.minibatches(mp.parse(lines))[7]
        self.assertEqual([round(r["fw"] - 1000, 3) for r in rows], [0.03])

    def test_a_loaded_segment_maps_addresses_to_file_offsets(self):
        segments = [(0x0, 0x1000, 0x0), (0x401000, 0x5000, 0x1000)]
        self.assertEqual(mp.file_offset(segments, 0x400), 0x400)
        self.assertEqual(mp.file_offset(segments, 0x402345), 0x2345)
        with self.assertRaises(ValueError):
            mp.file_offset(segments, 0x9000)

    def test_the_model_runs_in_elasticdl_torch_beside_elasticdl(self):
        self.assertEqual(mp.model_binary(["/opt/edl/bin/elasticdl", "train"]),
                         "/opt/edl/bin/elasticdl-torch")
        self.assertEqual(mp.model_binary(["/opt/edl/bin/train_bench", "--only=bare"]),
                         "/opt/edl/bin/train_bench")


if __name__ == "__main__":
    unittest.main()
