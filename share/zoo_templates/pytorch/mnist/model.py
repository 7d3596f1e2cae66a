"""A small CNN for Fashion-MNIST, in PyTorch, on the records `elasticdl data mnist` writes
(image: float [28, 28] holding 0-255; label: int64 [1], the class 0-9). One epoch over
2000 images takes seconds and reaches about 0.7 accuracy.

A model file defines the functions (and the model class) a job names:

  Model            the model: --model_def=mnist.model.Model (a torch.nn.Module class,
                   or a function that returns a module)
  dataset_fn       a task's records -> examples (features and labels)
  loss             (labels, predictions) -> one value to minimize
  optimizer        what the parameter servers apply to the gradients
  eval_metrics_fn  what evaluation reports

--dataset_fn, --loss, --optimizer and --eval_metrics_fn default to these names; give one
of them to use another function (e.g. --optimizer=sgd_optimizer, below). Edit this file
and train again: nothing is compiled.
"""
import functools

import torch
from torch import nn

import elasticdl
from elasticdl import Mode

# Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
MEAN = 0.2860
STD = 0.3530


class Model(nn.Module):
    """forward gets the batched feature "image" ([batch, 28, 28]; a dataset of several
    features passes their dict) and returns one logit per class. Keyword arguments are
    hyperparameters: --params="channels=32" sets them."""

    def __init__(self, channels=16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=3),             # [channels, 26, 26]
            nn.ReLU(),
            nn.MaxPool2d(2),                                     # [channels, 13, 13]
            nn.Conv2d(channels, 2 * channels, kernel_size=3),  # [2 * channels, 11, 11]
            nn.ReLU(),
            nn.MaxPool2d(2),                                     # [2 * channels, 5, 5]
        )
        self.classify = nn.Linear(2 * channels * 5 * 5, 10)

    def forward(self, image):
        x = self.features(image.unsqueeze(1))  # one channel
        return self.classify(x.flatten(1))


def dataset_fn(dataset, mode):
    """Called once per task with its records; returns one example per record (the
    worker batches them). In PREDICTION records have no label."""

    def parse(record):
        spec = {"image": elasticdl.FixedLenFeature([28, 28], torch.float32)}
        if mode != Mode.PREDICTION:
            spec["label"] = elasticdl.FixedLenFeature([1], torch.int64)
        r = elasticdl.parse_example(record, spec)
        features = {"image": (r["image"] / 255.0 - MEAN) / STD}
        return features if mode == Mode.PREDICTION else (features, r["label"])

    dataset = dataset.map(parse)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=1024)  # seeded per task from --seed
    return dataset


def loss(labels, predictions):
    return nn.functional.cross_entropy(predictions, labels.flatten())


def optimizer():
    return functools.partial(torch.optim.Adam, lr=3e-3)


def sgd_optimizer():
    """Another optimizer, for --optimizer=sgd_optimizer."""
    return functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)


def eval_metrics_fn():
    """Metrics are means over the evaluation data, merged exactly across workers: a
    function gives one value per example."""
    return {"accuracy": lambda labels, predictions: predictions.argmax(1) == labels.flatten()}
