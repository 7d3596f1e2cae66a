"""Optimizers the parameter servers apply that torch.optim lacks.

An optimizer() entry returns PyTorch's own idiom, a factory of an optimizer over
parameters: functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9). The
parameter servers apply SGD (with momentum, dampening, Nesterov, weight decay),
Adam and AdamW (amsgrad too), Adagrad and RMSprop with those keyword arguments, to the
parameters they hold. Embedding tables (elasticdl.nn.Embedding) may also use
FTRL: optimizer=functools.partial(elasticdl.optim.Ftrl, lr=0.05, l1=1.0).
"""


class Ftrl:
    """FTRL-proximal (McMahan et al. 2013), for the rows of embedding tables. Its
    keyword arguments are what the parameter servers apply; it does not run in
    Python."""

    def __init__(self, params=None, lr=0.05, lr_power=-0.5, l1=0.0, l2=0.0,
                 initial_accumulator_value=0.1):
        raise RuntimeError("elasticdl.optim.Ftrl is applied by the parameter servers to "
                           "embedding tables: name it in elasticdl.nn.Embedding(optimizer=...)")
