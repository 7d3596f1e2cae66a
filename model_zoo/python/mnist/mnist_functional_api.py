"""MNIST with the functional API: seed 001's mnist_functional_api.py in PyTorch.

The layers of the seed's Keras model in a torch.nn.Sequential; the C++ twin is
model_zoo/mnist/mnist_functional_api.cc.
"""
import functools

import torch
from torch import nn

import elasticdl
from elasticdl import Mode


def custom_model():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28)),  # Reshape((28, 28, 1)), channels first
        nn.Conv2d(1, 32, kernel_size=3),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=3),
        nn.ReLU(),
        nn.BatchNorm2d(64),
        nn.MaxPool2d(kernel_size=2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(9216, 10),
    )


def dataset_fn(dataset, mode):
    def _parse_data(record):
        if mode == Mode.PREDICTION:
            feature_description = {
                "image": elasticdl.FixedLenFeature([28, 28], torch.float32)
            }
        else:
            feature_description = {
                "image": elasticdl.FixedLenFeature([28, 28], torch.float32),
                "label": elasticdl.FixedLenFeature([1], torch.int64),
            }
        r = elasticdl.parse_example(record, feature_description)
        features = {"image": r["image"] / 255.0}
        if mode == Mode.PREDICTION:
            return features
        else:
            return features, r["label"]

    dataset = dataset.map(_parse_data)

    if mode != Mode.PREDICTION:
        dataset = dataset.shuffle(buffer_size=1024)
    return dataset


# The main job's recipe (scripts/main_job.sh --python: --dataset_fn=standardized_dataset_fn
# --optimizer=adam_optimizer), as in the C++ twin: pixels standardized with Fashion-MNIST's
# mean and standard deviation, and Adam, train steadily for any number of workers.
def standardized_dataset_fn(dataset, mode):
    def _standardize(example):
        if mode == Mode.PREDICTION:
            return {"image": (example["image"] - 0.2860) / 0.3530}
        features, labels = example
        return {"image": (features["image"] - 0.2860) / 0.3530}, labels

    return dataset_fn(dataset, mode).map(_standardize)


def loss(labels, predictions):
    return nn.functional.cross_entropy(predictions, labels.flatten())


def optimizer(lr=0.1):
    return functools.partial(torch.optim.SGD, lr=lr)


def adam_optimizer():
    return functools.partial(torch.optim.Adam, lr=1e-3)


def eval_metrics_fn():
    return {
        "accuracy": lambda labels, predictions: torch.eq(
            torch.argmax(predictions, 1), labels.flatten()
        )
    }


def top3_eval_metrics_fn():
    """Other metrics (--eval_metrics_fn=mnist.mnist_functional_api.top3_eval_metrics_fn), which
    evaluate and predict may name for a model trained with eval_metrics_fn: whether the label
    is the class rated highest, or among the three rated highest."""
    metrics = eval_metrics_fn()
    metrics["top3_accuracy"] = lambda labels, predictions: torch.eq(
        torch.topk(predictions, 3, 1).indices, labels.reshape(-1, 1)
    ).any(1)
    return metrics
