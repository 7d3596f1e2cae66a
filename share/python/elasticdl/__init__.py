"""The module that ElasticDL's workers give Python model files.

A model file is plain Python that imports torch and elasticdl, as seed 001's
files import tensorflow:

    import functools
    import torch
    import elasticdl
    from elasticdl import Mode

    def custom_model():
        return torch.nn.Sequential(...)          # any torch.nn.Module

    def dataset_fn(dataset, mode):               # dataset: records (bytes)
        def _parse_data(record):
            r = elasticdl.parse_example(record, {
                "image": elasticdl.FixedLenFeature([28, 28], torch.float32),
                "label": elasticdl.FixedLenFeature([1], torch.int64)})
            return {"image": r["image"] / 255.0}, r["label"]
        dataset = dataset.map(_parse_data)
        if mode != Mode.PREDICTION:
            dataset = dataset.shuffle(buffer_size=1024)
        return dataset

    def loss(labels, predictions):
        return torch.nn.functional.cross_entropy(predictions, labels.flatten())

    def optimizer(lr=0.1):
        return functools.partial(torch.optim.SGD, lr=lr)

    def eval_metrics_fn():
        return {"accuracy": lambda labels, predictions:
                predictions.argmax(1) == labels.flatten()}

The worker batches what dataset_fn yields, calls model.train(mode) and then
model(features) (a dict of one feature is passed as that tensor alone),
computes loss(labels, predictions), and sends the gradients to the parameter
servers, which apply optimizer()'s optimizer. Everything but these entries
(the master, the servers, the networking, the accounting of records) is
ElasticDL's C++ runtime.
"""
import enum
import functools

import torch  # noqa: F401  (loads LibTorch's Python bindings before ours)

import _elasticdl
from elasticdl import metrics, nn, optim  # noqa: F401
from elasticdl.dataset import Dataset  # noqa: F401

__all__ = ["Mode", "Dataset", "FixedLenFeature", "VarLenFeature", "parse_example",
           "hash_bucket", "log_normalize", "DataError", "metrics", "nn", "optim"]

# A record file that cannot be read (corrupt, truncated): raised by the records a
# dataset_fn iterates. The job reports it as the data's fault, not the model file's.
DataError = _elasticdl.DataError


class Mode(enum.Enum):
    """What a dataset_fn prepares data for (seed 001's Mode)."""
    TRAINING = "TRAINING"
    EVALUATION = "EVALUATION"
    PREDICTION = "PREDICTION"


def _dtype_name(dtype):
    if dtype in (bytes, str):
        return "bytes"
    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    raise TypeError(f"a feature's dtype is torch.float32, torch.int64 or bytes, not {dtype!r}")


def FixedLenFeature(shape, dtype, default_value=None):  # noqa: N802 (tf's name)
    """A feature of a fixed shape (tf.io.FixedLenFeature): float32 values from a
    float_list, int64 from an int64_list, bytes from a bytes_list. default_value
    (one value, or one per element) stands in when a record lacks the feature."""
    if default_value is None:
        return _spec(tuple(shape), _dtype_name(dtype), True)
    return _elasticdl.FeatureSpec(list(shape), _dtype_name(dtype), True, default_value)


def VarLenFeature(dtype):  # noqa: N802 (tf's name)
    """Any number of values (tf.io.VarLenFeature): a 1-D tensor per record (of
    bytes: a list)."""
    return _spec((), _dtype_name(dtype), False)


@functools.lru_cache(maxsize=256)
def _spec(shape, dtype_name, fixed):
    """A spec without a default, made once: dataset_fns build their feature
    descriptions per record, as seed 001's does."""
    return _elasticdl.FeatureSpec(list(shape), dtype_name, fixed, None)


def parse_example(record, features):
    """The features of one tf.train.Example record (tf.io.parse_single_example):
    {name: tensor} for numeric features, {name: [bytes, ...]} for bytes ones.
    A record that lacks a feature without a default, or holds the wrong kind or
    number of values, raises ValueError naming the feature."""
    return _elasticdl.parse_example(record, features)


def hash_bucket(value, num_buckets=0, salt=0):
    """A stable id of `value` (bytes, str or int): the same on every machine and run,
    mixed with `salt` so that equal values of different features differ; in
    [0, num_buckets) when num_buckets > 0, else any non-negative int64 (an id for an
    elasticdl.nn.Embedding table without a range)."""
    if isinstance(value, str):
        value = value.encode()
    return _elasticdl.hash_bucket(value, num_buckets, salt)


def log_normalize(x):
    """log(1 + max(x, 0)) in float32: a heavy-tailed count brought to a trainable scale."""
    return torch.log1p(torch.clamp(torch.as_tensor(x, dtype=torch.float32), min=0))
