"""exactness.cc's models as a Python model file: the chaos suite's row-exact jobs with
a Python model, a Python dataset_fn that shuffles, and an elasticdl.nn.Embedding table.

Exactness has one parameter, rows [num_records, 1], starting at 0; a record's output is
rows[id] and the loss is the sum of the outputs, so each trained record adds exactly 1
to its own row's gradient. With plain SGD at lr=1 (asynchronous training), or with
unit_step_optimizer (Adam with betas 0: every step moves a row by exactly lr, whatever
the number of gradients it averages), E epochs end with every row at -E: a row above
names a record lost, a row below one trained twice; the buffer `trained` counts the same
(every training forward adds 1 at its records' ids). EmbeddingExactness keeps the same
counts in a table on the parameter servers. See exactness.cc for the whole argument,
and tests/scenario/exactness.py for the checks.

--params: num_records (required), sleep_ms (default 0: milliseconds every training
forward sleeps, to keep a short job running while faults land in it).
"""
import functools
import time

import torch

import elasticdl
from elasticdl import Mode


class Exactness(torch.nn.Module):
    def __init__(self, num_records, sleep_ms=0):
        super().__init__()
        self.sleep = sleep_ms / 1000
        self.rows = torch.nn.Parameter(torch.zeros(num_records, 1))
        self.register_buffer("trained", torch.zeros(num_records, dtype=torch.int64))

    def forward(self, ids):
        if self.training and self.sleep > 0:
            time.sleep(self.sleep)
        ids = ids.flatten()
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.rows.shape[0]):
            raise ValueError(f"exactness: an id is outside 0..num_records-1 (num_records="
                             f"{self.rows.shape[0]}); set --params num_records")
        if self.training:
            self.trained.index_add_(0, ids, torch.ones_like(ids))
        return self.rows.index_select(0, ids)


class CumulativeNormExactness(Exactness):
    """Exactness with a BatchNorm of the ids that averages cumulatively (momentum=None):
    its running_mean is the mean over every trained minibatch of the minibatch's mean id,
    however the minibatches are shared among workers and steps (num_batches_tracked counts
    them). Its output is Exactness's, so the rows count as they do."""

    def __init__(self, num_records, sleep_ms=0):
        super().__init__(num_records, sleep_ms)
        self.norm = torch.nn.BatchNorm1d(1, momentum=None, affine=False)

    def forward(self, ids):
        rows = super().forward(ids)
        if self.training:
            self.norm(ids.reshape(-1, 1).to(torch.float32))
        return rows


class EmbeddingExactness(torch.nn.Module):
    def __init__(self, num_records, sleep_ms=0):
        super().__init__()
        self.sleep = sleep_ms / 1000
        self.records = elasticdl.nn.Embedding("records", 1, initializer="zeros",
                                              num_rows=num_records)

    def forward(self, ids):
        if self.training and self.sleep > 0:
            time.sleep(self.sleep)
        return self.records(ids.flatten())  # [batch, 1]


def _parse_id(record):
    r = elasticdl.parse_example(record, {"id": elasticdl.FixedLenFeature([1], torch.int64)})
    return {"id": r["id"]}, r["id"]


def _parse(dataset, mode, buffer_size):
    parsed = dataset.map(_parse_id)
    return parsed if mode == Mode.PREDICTION else parsed.shuffle(buffer_size)


def dataset_fn(dataset, mode):
    return _parse(dataset, mode, 64)


def wide_shuffle_dataset_fn(dataset, mode):
    return _parse(dataset, mode, 1000)


def loss(labels, predictions):
    return predictions.sum()  # every output's gradient is exactly 1


def optimizer():
    return functools.partial(torch.optim.SGD, lr=1.0)


def unit_step_optimizer():
    return functools.partial(torch.optim.Adam, lr=1.0, betas=(0.0, 0.0), eps=1e-30)


def eval_metrics_fn():
    def power(p):
        return lambda labels, predictions: labels.to(torch.float64).flatten().pow(p)
    return {
        "mean_id": power(1),
        "mean_id_squared": power(2),
        "mean_id_cubed": power(3),
        "mean_prediction": lambda labels, predictions: predictions.to(torch.float64).flatten(),
    }
