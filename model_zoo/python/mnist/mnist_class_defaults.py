"""MNIST as a model class that carries its defaults (seed 003): default_loss,
default_optimizer, default_input and default_eval_metrics.

`--model_def=mnist.mnist_class_defaults.MnistModel` alone trains it; --params are the
constructor's keyword arguments (`--params="conv1_channels=16, dropout=0.5"`), and
--input_fn, --loss and --optimizer replace the defaults, e.g.
`--input_fn=shuffled_input --optimizer=sgd_optimizer`. The C++ twin is
model_zoo/mnist/mnist_class_defaults.cc.
"""
import functools

import torch
from torch import nn

import elasticdl
from elasticdl import Mode

# Fashion-MNIST's pixel mean and standard deviation (0-1 scale).
MEAN = 0.2860
STD = 0.3530


class MnistModel(nn.Module):
    def __init__(self, conv1_channels=32, conv2_channels=64, dropout=0.25):
        super().__init__()
        self.conv1 = nn.Conv2d(1, conv1_channels, kernel_size=3)
        self.conv2 = nn.Conv2d(conv1_channels, conv2_channels, kernel_size=3)
        self.batch_norm = nn.BatchNorm2d(conv2_channels)
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(conv2_channels * 12 * 12, 10)

    def forward(self, image):
        x = image.reshape(-1, 1, 28, 28)
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = self.batch_norm(x)
        x = nn.functional.max_pool2d(x, 2)
        x = self.dropout(x)
        return self.dense(x.flatten(1))

    @staticmethod
    def default_loss(labels, predictions):
        return nn.functional.cross_entropy(predictions, labels.flatten())

    @staticmethod
    def default_optimizer():
        return functools.partial(torch.optim.Adam, lr=1e-3)

    # One record (`elasticdl data mnist`'s image and label) in, one example out.
    @staticmethod
    def default_input(record, mode):
        spec = {"image": elasticdl.FixedLenFeature([28, 28], torch.float32)}
        if mode != Mode.PREDICTION:
            spec["label"] = elasticdl.FixedLenFeature([1], torch.int64)
        r = elasticdl.parse_example(record, spec)
        features = {"image": (r["image"] / 255.0 - MEAN) / STD}
        return features if mode == Mode.PREDICTION else (features, r["label"])

    @staticmethod
    def default_eval_metrics():
        return {"accuracy": elasticdl.metrics.Accuracy()}


# What the command line may choose instead of the defaults.

# default_input's examples, shuffled within each task.
def shuffled_input(dataset, mode):
    examples = dataset.map(lambda record: MnistModel.default_input(record, mode))
    if mode == Mode.TRAINING:
        examples = examples.shuffle(1024)
    return examples


def sgd_optimizer():
    return functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)
