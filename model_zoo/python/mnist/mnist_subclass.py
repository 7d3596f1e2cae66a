"""MNIST by subclassing torch.nn.Module: seed 001's mnist_subclass.py in PyTorch.

Keras's call(inputs, training) is PyTorch's forward(inputs) with self.training, which the
worker sets (model.train(mode)) before every forward. The C++ twin is
model_zoo/mnist/mnist_subclass.cc.
"""
import functools

import torch
from torch import nn

import elasticdl
from elasticdl import Mode


class CustomModel(nn.Module):
    def __init__(self):
        super(CustomModel, self).__init__()
        self._reshape = nn.Unflatten(1, (1, 28))
        self._conv1 = nn.Conv2d(1, 32, kernel_size=3)
        self._conv2 = nn.Conv2d(32, 64, kernel_size=3)
        self._batch_norm = nn.BatchNorm2d(64)
        self._maxpooling = nn.MaxPool2d(kernel_size=2)
        self._dropout = nn.Dropout(0.25)
        self._flatten = nn.Flatten()
        self._dense = nn.Linear(9216, 10)

    def forward(self, inputs):
        x = self._reshape(inputs)
        x = torch.relu(self._conv1(x))
        x = torch.relu(self._conv2(x))
        x = self._batch_norm(x)
        x = self._maxpooling(x)
        if self.training:
            x = self._dropout(x)
        x = self._flatten(x)
        x = self._dense(x)
        return x


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


def loss(labels, predictions):
    return nn.functional.cross_entropy(predictions, labels.flatten())


def optimizer(lr=0.1):
    return functools.partial(torch.optim.SGD, lr=lr)


def eval_metrics_fn():
    return {
        "accuracy": lambda labels, predictions: torch.eq(
            torch.argmax(predictions, 1), labels.flatten()
        )
    }
