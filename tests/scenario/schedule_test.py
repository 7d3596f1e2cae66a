"""Training that follows a learning-rate schedule and stops early, through a master kill.

Jobs of tests/zoo/exactness (see exact_jobs.py), asynchronous, with its
unit_step_optimizer: every step lowers the row of each record of its
minibatch by exactly the step's learning rate. With 2048 records in tasks of
four minibatches of 32, every step holds 32 records, so the trained rows say
how many steps the job took and at which rates:

  - the zoo's learning-rate schedule with --max_steps=40: the rows sum to -32 * sum(lr(v) for v
    in 0..39) however the master's kill falls, the model ends at version 40,
    and the job says it stopped there with 40 * 32 records trained;
  - --early_stopping on mean_id (a metric of the validation ids alone, so it
    never improves after the first evaluation) with patience 2: training
    stops after the third evaluation, with the master killed after the first,
    and the records the job says it trained are exactly those in the rows.
"""
import os
import re
import signal
import unittest

import exactness
import job_test
from exact_jobs import ExactJobCase

MAX_STEPS = 40
# The zoo's warmup_step_schedule: warmup=4,step=10,gamma=0.5.
SCHEDULE_ENTRY = "warmup_step_schedule"
STOPPED = re.compile(r"^training stopped early \((.*)\) after (\d+) of the (\d+) records", re.M)


def scheduled_lr(version):
    """The schedule's rate at `version` for the optimizer's lr of 1."""
    if version < 4:
        return (version + 1) / 4
    return 0.5 ** ((version - 4) // 10)


def rows_sum(output):
    _, parameters = exactness.read_model_values(os.path.join(output, "parameters.pb"))
    return sum(parameters["rows"][1])


class ScheduleTest(ExactJobCase):
    TRAIN_RECORDS = 2048
    VALIDATION_RECORDS = 256
    SLEEP_MS = 100
    FLAGS = {"use_async": "true"}

    def kill_master(self, job, job_dir, log):
        pid = log.master_pid()
        self.assertIn(pid, job_test.job_processes(job_dir), self.describe(job, log))
        os.kill(pid, signal.SIGKILL)
        return self.wait_event(job, log, lambda e: e.get("event") == "master_started" and
                               e.get("resumed") and e.get("pid") != pid,
                               "the master restarted and resumed")

    def finished(self, job, log):
        code = job.wait(self.JOB_TIMEOUT)
        if code is None:
            self.fail(f"still running after {self.JOB_TIMEOUT} s\n{self.describe(job, log)}")
        log.poll()
        self.assertEqual(code, 0, self.describe(job, log))
        trained = job_test.TRAINED.findall(job.stdout)
        self.assertEqual(len(trained), 1, self.describe(job, log))
        stopped = STOPPED.findall(job.stdout)
        self.assertEqual(len(stopped), 1, self.describe(job, log))
        records, version = (int(x) for x in trained[0])
        reason, said_records, total = stopped[0]
        self.assertEqual(int(said_records), records, self.describe(job, log))
        self.assertEqual(int(total), 2 * self.TRAIN_RECORDS, self.describe(job, log))
        return records, version, reason

    def test_schedule_and_max_steps_survive_a_master_kill(self):
        job, job_dir, output, log = self.start("max-steps", num_epochs=2, max_steps=MAX_STEPS,
                                               learning_rate_schedule=SCHEDULE_ENTRY)
        self.until(job, log, lambda: log.training_done() >= 1, "a finished training task")
        resumed = self.kill_master(job, job_dir, log)
        records, version, reason = self.finished(job, log)
        stop = log.of("training_stopped")
        self.assertEqual(len(stop), 1, self.describe(job, log))
        self.assertGreater(stop[0]["t"], resumed["t"], "the limit was reached before the kill")
        self.assertEqual(version, MAX_STEPS, self.describe(job, log))
        self.assertEqual(reason, f"max_steps: the model reached version {MAX_STEPS}")
        self.assertEqual(records, 32 * MAX_STEPS, self.describe(job, log))
        want = -32 * sum(scheduled_lr(v) for v in range(MAX_STEPS))
        self.assertAlmostEqual(rows_sum(output), want, places=3, msg=self.describe(job, log))
        # Each finished task's last step was taken at its scheduled rate.
        for e in log.of("task_done"):
            if "learning_rate" in e:
                self.assertAlmostEqual(e["learning_rate"], scheduled_lr(e["model_version"] - 1),
                                       msg=str(e))
        self.assertNothingLeft(job_dir)

    def test_early_stopping_survives_a_master_kill(self):
        job, job_dir, output, log = self.start(
            "early-stop", num_epochs=2, evaluation_steps=8,
            early_stopping="metric=mean_id,mode=max,patience=2")
        first = self.wait_event(job, log, lambda e: e.get("event") == "evaluation",
                                "the first evaluation")
        self.kill_master(job, job_dir, log)
        records, version, reason = self.finished(job, log)
        self.assertRegex(
            reason, r"^early stopping: mean_id has not risen by more than 0 for 2 evaluations; "
            rf"best 127.5 at model version {first['model_version']}$")
        self.assertEqual(len(log.of("training_stopped")), 1, self.describe(job, log))
        # Three evaluations during training (a restarted master that forgot
        # the first would need a fourth), then the final one.
        self.assertEqual(len(log.of("evaluation")), 4, self.describe(job, log))
        self.assertLess(records, 2 * self.TRAIN_RECORDS)
        # Every record the job says it trained moved its row by 1: no more, no less.
        self.assertAlmostEqual(rows_sum(output), -records, places=3,
                               msg=self.describe(job, log))
        self.assertNothingLeft(job_dir)


if __name__ == "__main__":
    unittest.main()
