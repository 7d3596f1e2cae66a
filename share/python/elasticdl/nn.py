"""Layers whose weights live on ElasticDL's parameter servers."""
import torch

import _elasticdl


def _describe_optimizer(optimizer):
    if optimizer is None:
        return None
    from elasticdl._runtime import describe_optimizer
    return describe_optimizer(optimizer)


class Embedding(torch.nn.Module):
    """An embedding table on the parameter servers, used like torch.nn.Embedding inside
    any torch.nn.Module:

        self.factors = elasticdl.nn.Embedding("factors", 8, initializer=("normal", 0, 0.01),
            optimizer=functools.partial(torch.optim.Adagrad, lr=0.05))
        ...
        v = self.factors(ids)            # ids: int64 of any shape -> [..., 8]

    Its rows are keyed by int64 id (any id, or [0, num_rows) when num_rows is given)
    and live on the parameter servers, spread by id: the table is never whole in a
    worker. A forward looks up the unique ids of its batch; in training the rows'
    gradient goes to the servers as a sparse gradient, and they step only those rows.

    name: identifies the table across the job (checkpoints, trained models); unique in
        the model. Two layers of one name share the table.
    initializer: a row's initial values, a function of (job seed, table, id):
        ("uniform", low, high) (the default: -0.05, 0.05), ("normal", mean, stddev),
        "zeros", or ("constant", value).
    optimizer: the table's own update rule, as optimizer() returns one
        (functools.partial(torch.optim.Adagrad, lr=0.05), or elasticdl.optim.Ftrl),
        which keeps its lr under a learning_rate_schedule(); None: the model's
        optimizer, and its schedule.
    combiner: None, or "sum", "mean", "sqrtn": forward(ids [batch, n], mask=None)
        combines each example's n rows into one [batch, dim], leaving out the
        positions where the bool mask is false.
    num_rows: ids must lie in [0, num_rows) (a vocabulary); None: any int64.
    admit_after: a row is created at the k-th minibatch that trains it; until then it
        reads unadmitted_value and its gradients are dropped.
    evict_after_versions: rows not updated for this many model versions are dropped.
    max_rows_per_server: at most this many rows per server, least recently updated
        dropped first.
    dtype: torch.float32 (the default) or torch.float64.
    """

    def __init__(self, name, embedding_dim, *, initializer=("uniform", -0.05, 0.05),
                 optimizer=None, combiner=None, num_rows=None, admit_after=0,
                 unadmitted_value=0.0, evict_after_versions=0, max_rows_per_server=0,
                 dtype=torch.float32):
        super().__init__()
        if isinstance(initializer, str):
            initializer = (initializer,)
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"Embedding {name!r}: dtype must be torch.float32 or "
                             f"torch.float64, not {dtype}")
        self.name = name
        self.embedding_dim = embedding_dim
        self.table = _elasticdl.EmbeddingTable(
            name, int(embedding_dim), tuple(initializer), _describe_optimizer(optimizer),
            combiner or "", int(num_rows or 0), int(admit_after), float(unadmitted_value),
            int(evict_after_versions), int(max_rows_per_server),
            "float64" if dtype == torch.float64 else "float32")

    def forward(self, ids, mask=None):
        return self.table.forward(ids, mask)

    def extra_repr(self):
        return f"{self.name!r}, {self.embedding_dim}"

