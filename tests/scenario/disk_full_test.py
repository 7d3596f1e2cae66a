"""A full disk under a running job's journal.

The job directory lies on a small file system the test mounts (tmpfs) and
removes. Once training is under way the test fills it: the master's next
journal write fails, and the job fails with a message naming the journal and
the error. Then the test frees the space and runs the same command on the same
job directory: its master resumes from the journal and the parameter servers
from their checkpoints, and every record is applied once per epoch over both runs.
"""
import errno
import os
import subprocess
import tempfile
import unittest

import job_test
from exact_jobs import ExactJobCase
from exactness import EventLog


def mount_tmpfs(path, size):
    """Mounts a tmpfs of `size` at `path`; None, or why it cannot."""
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                            capture_output=True, text=True)
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")


def fill(directory):
    """Writes a file in `directory` until the file system is full; returns its path."""
    path = os.path.join(directory, "filler")
    block = b"\0" * (1 << 16)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        # The last bytes a block did not fit.
        for size in (4096, 512, 1):
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return path


class DiskFullTest(ExactJobCase):
    TRAIN_RECORDS = 2000
    SLEEP_MS = 40

    def setUp(self):
        super().setUp()
        self.mount = tempfile.mkdtemp(prefix="disk-", dir=self._tmp.name)
        why = mount_tmpfs(self.mount, "64m")
        if why is not None:
            self.skipTest(f"cannot mount a tmpfs (as root, or with CAP_SYS_ADMIN): {why}")

    def tearDown(self):
        super().tearDown()
        subprocess.run(["umount", "-l", self.mount], check=False)

    def test_a_full_disk_fails_the_job_naming_the_journal_and_it_resumes_exactly(self):
        job_dir = os.path.join(self.mount, "job")
        output = os.path.join(self.dir, "model")
        args = self._args(job_dir, output, num_epochs=2, num_workers=3, max_master_restarts=0)
        self._job_dirs.append(job_dir)
        job = job_test.Job(args)
        self._jobs.append(job)
        log = EventLog(job_dir)
        self.until(job, log, lambda: log.training_done() >= 3, "three finished training tasks")
        first_master = log.master_pid()
        filler = fill(self.mount)

        code = job.wait(self.EVENT_TIMEOUT)
        self.assertIsNotNone(code, f"the job went on with a full disk\n{self.describe(job, log)}")
        self.assertNotEqual(code, 0, self.describe(job, log))
        errors = [line for line in job.stderr.splitlines() if line.startswith("error:")]
        journal = os.path.join(job_dir, "journal.log")
        self.assertEqual(len(errors), 1, self.describe(job, log))
        self.assertIn(f"cannot write the job's journal: {journal}: write failed: "
                      "No space left on device", errors[0])
        self.assertNothingLeft(job_dir)
        # Whole lines only, though the disk filled in the middle of one.
        log.poll()

        os.remove(filler)
        again = job_test.Job(args)
        self._jobs.append(again)
        resumed = self.wait_event(again, log, lambda e: e.get("event") == "master_started" and
                                  e.get("pid") != first_master, "the second master started")
        self.assertTrue(resumed.get("resumed"), self.describe(again, log))
        self.assertExact(again, job_dir, output, log)

if __name__ == "__main__":
    unittest.main()
