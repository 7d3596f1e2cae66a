"""Click-through-rate models over Criteo-shaped data (`elasticdl data criteo` writes it:
label, integer features I1..I13, categorical C1..C26), in PyTorch:

  DeepFM       Guo et al. 2017: a factorization machine (first-order weights and
               pairwise interactions of latent vectors) and a deep network sharing
               the latent vectors.
  WideAndDeep  Cheng et al. 2016: a linear model over the categorical ids and a deep
               network over their embeddings.

Every categorical value is hashed with its field into one id space
(elasticdl.hash_bucket), so a single table per kind of weight holds all 26 fields; the
tables live on the parameter servers (elasticdl.nn.Embedding) and grow with the values
seen. Integer features enter as log(1 + max(x, 0)). The output is the click
probability. The C++ twin is model_zoo/deepfm/deepfm.cc.

--params: embedding_dim (default 8), hidden_units (default [400, 400]).
"""
import functools

import torch
from torch import nn

import elasticdl
from elasticdl import Mode

INTEGERS = 13
CATEGORIES = 26


# The tables' rows: Adagrad, whose per-row step sizes suit ids seen a few times as
# well as ids seen in every minibatch (the dense layers keep the model's Adam).
def _table_optimizer():
    return functools.partial(torch.optim.Adagrad, lr=0.05)


def _tower(inputs, hidden_units):
    """The deep part: ReLU layers of hidden_units, then one output."""
    layers = []
    for units in hidden_units:
        layers += [nn.Linear(inputs, units), nn.ReLU()]
        inputs = units
    return nn.Sequential(*layers, nn.Linear(inputs, 1))


class DeepFM(nn.Module):
    def __init__(self, embedding_dim=8, hidden_units=(400, 400)):
        super().__init__()
        self.weights = elasticdl.nn.Embedding("weights", 1, initializer="zeros",
                                              optimizer=_table_optimizer())
        self.factors = elasticdl.nn.Embedding("factors", embedding_dim,
                                              initializer=("normal", 0, 0.01),
                                              optimizer=_table_optimizer())
        self.numbers = nn.Linear(INTEGERS, 1)
        self.deep = _tower(CATEGORIES * embedding_dim + INTEGERS, hidden_units)

    def forward(self, features):
        ids, numbers = features["ids"], features["numbers"]  # [batch, 26], [batch, 13]
        first = self.weights(ids).sum((1, 2)) + self.numbers(numbers).squeeze(1)
        v = self.factors(ids)  # [batch, 26, dim]
        # Pairwise interactions: (sum v)^2 - sum v^2, halved.
        second = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)
        deep = self.deep(torch.cat([v.flatten(1), numbers], 1)).squeeze(1)
        return torch.sigmoid(first + second + deep).unsqueeze(1)


class WideAndDeep(nn.Module):
    def __init__(self, embedding_dim=8, hidden_units=(400, 400)):
        super().__init__()
        self.wide = elasticdl.nn.Embedding(
            "wide", 1, initializer="zeros",
            optimizer=functools.partial(elasticdl.optim.Ftrl, lr=0.05))
        self.embeddings = elasticdl.nn.Embedding("embeddings", embedding_dim,
                                                 initializer=("normal", 0, 0.01))
        self.deep = _tower(CATEGORIES * embedding_dim + INTEGERS, hidden_units)

    def forward(self, features):
        ids, numbers = features["ids"], features["numbers"]
        wide = self.wide(ids).sum((1, 2))
        deep = self.deep(torch.cat([self.embeddings(ids).flatten(1), numbers], 1)).squeeze(1)
        return torch.sigmoid(wide + deep).unsqueeze(1)


def dataset_fn(dataset, mode):
    spec = {f"I{i}": elasticdl.FixedLenFeature([1], torch.int64, default_value=0)
            for i in range(1, INTEGERS + 1)}
    spec.update({f"C{c}": elasticdl.FixedLenFeature([1], bytes, default_value=b"")
                 for c in range(1, CATEGORIES + 1)})
    if mode != Mode.PREDICTION:
        spec["label"] = elasticdl.FixedLenFeature([1], torch.int64)

    def _parse(record):
        r = elasticdl.parse_example(record, spec)
        numbers = torch.cat([r[f"I{i}"] for i in range(1, INTEGERS + 1)])
        # A missing value (b"") is a value of its own in each field.
        ids = torch.tensor([elasticdl.hash_bucket(r[f"C{c + 1}"][0], 0, c)
                            for c in range(CATEGORIES)])
        features = {"ids": ids, "numbers": elasticdl.log_normalize(numbers)}
        if mode == Mode.PREDICTION:
            return features
        return features, r["label"].to(torch.float32)

    parsed = dataset.map(_parse)
    if mode == Mode.TRAINING:
        parsed = parsed.shuffle(1024)
    return parsed


def loss(labels, predictions):
    return nn.functional.binary_cross_entropy(predictions.clamp(1e-7, 1 - 1e-7),
                                              labels.view_as(predictions))


def optimizer():
    return functools.partial(torch.optim.Adam, lr=1e-3)


def eval_metrics_fn():
    def log_loss(labels, predictions):
        p = predictions.to(torch.float64).flatten().clamp(1e-7, 1 - 1e-7)
        y = labels.to(torch.float64).flatten()
        return -(y * p.log() + (1 - y) * (1 - p).log())
    return {"auc": elasticdl.metrics.AUC(num_thresholds=1000), "log_loss": log_loss}
