"""Scenario tests: a lone worker gives each of its LibTorch threads a core.

A job of one worker with two threads runs on two CPUs (the client, and so the
whole job, started under `taskset`): the worker may run on exactly as many
CPUs as it has threads, its MNIST pipeline keeps ahead of the model, and so
it binds its training thread and the team's other thread to a core each
(src/worker/team_binding.h, README "Cores"). The tests watch the worker's
threads' CPU sets through /proc while the job trains: with the default
flags the two computing threads are seen on a CPU each, one apiece; with
--bind_workers=false the training thread keeps both CPUs throughout. ctest
runs this file alone (RUN_SERIAL): beside other tests' processes the
pipeline, at nice +19, may fall behind, and a worker whose pipeline makes
the model wait leaves its threads to the scheduler.

Environment: as job_test.py (ELASTICDL_BIN, ELASTICDL_CACHE_DIR).
"""
import os
import time
import unittest

import job_test


class TeamBindingTest(job_test.JobTestCase):

    def setUp(self):
        super().setUp()
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest(f"needs two CPUs; this process may run on {cpus}")
        self.cpus = cpus[:2]

    def watch(self, bind_flags):
        """Runs a 1 x 2 job on self.cpus and polls its worker's threads until the job
        ends. Returns [(training thread's CPUs, {tid: CPU} of the other threads on
        one CPU)] per poll that found the worker."""
        job_dir = self.job_dir("bind")
        # Three epochs of 4000 records: 24 tasks of 8 minibatches, binding
        # decided before each from the second on.
        args = self.train_args(job_dir, num_workers=1, num_threads=2, num_epochs=3,
                               validation_data=None) + bind_flags
        job = job_test.Job(args, prefix=("taskset", "-c", ",".join(map(str, self.cpus))))
        self._jobs.append(job)
        (pid, argv), = self.wait_for_workers(job, job_dir).items()
        # The worker may run where its client may (one worker: no --cpus).
        self.assertEqual(sorted(os.sched_getaffinity(pid)), self.cpus, argv)
        polls = []
        while job.proc.poll() is None:
            seen = job_test.thread_cpus(pid)
            if pid in seen:
                polls.append((seen.pop(pid),
                              {t: c[0] for t, c in seen.items() if len(c) == 1}))
            time.sleep(0.02)
        self.assertEqual(job.wait(job_test.JOB_TIMEOUT), 0, job.describe())
        self.assertSucceeded(job)
        self.assertNoProcessesLeft(job_dir)
        self.assertTrue(polls, f"the worker was never seen running:\n{job.describe()}")
        return polls, job

    def test_a_lone_workers_two_threads_take_a_core_each(self):
        polls, job = self.watch([])
        # Bound: the training thread on one CPU, the team's other thread on
        # the other; the threads beside the team (gRPC's, the pipeline's)
        # keep both.
        bound = [(main, others) for main, others in polls
                 if len(main) == 1 and list(others.values()) == [c for c in self.cpus
                                                                 if c != main[0]]]
        self.assertTrue(bound, f"in {len(polls)} looks at the worker's threads, never the "
                        f"training thread on one CPU and one other thread on the other; the "
                        f"last: {polls[-1]}\n{job.describe()}")

    def test_bind_workers_false_leaves_them_to_the_scheduler(self):
        polls, job = self.watch(["--bind_workers=false"])
        self.assertEqual([p for p in polls if p[0] != self.cpus or p[1]], [],
                         f"threads on one CPU with --bind_workers=false\n{job.describe()}")


if __name__ == "__main__":
    unittest.main()
