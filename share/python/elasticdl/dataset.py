"""elasticdl.Dataset: the records a dataset_fn receives, and what it makes of them.

A Dataset is a lazy stream, consumed once, as tf.data's datasets are in a
dataset_fn: map, filter and shuffle return new stages. Randomness is seeded:
the worker seeds the records of every task from the job's --seed, the epoch
and the task, and each stage derives its own seed from its input's, so that
every attempt of a task (after a worker was killed, say) yields the same
elements in the same order, and two runs with one --seed train the same model.
A map function that takes two arguments gets, as its second, a torch.Generator
seeded from the stage and the element's position: draw its random choices
(augmentations, masks) from it.

Each element remembers the record it came from, so that an exception in a map
or filter function names the record's file and index.
"""
import inspect
import os

import torch

import _elasticdl

# What each kind of stage mixes into its input's seed.
_MAP, _FILTER, _SHUFFLE = 1, 2, 3


def _random_seed():
    return int.from_bytes(os.urandom(8), "little")


def _takes_generator(fn):
    """Whether fn takes (element, generator): two parameters without defaults."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False  # a builtin without a signature: one argument
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    return len(positional) >= 2


def _mark(exc, origin):
    """Records on exc the element's origin (the innermost stage's, which is the first
    to see it)."""
    if getattr(exc, "_elasticdl_origin", None) is None:
        try:
            exc._elasticdl_origin = origin
        except AttributeError:
            pass  # an exception type that takes no attributes


class Dataset:
    """A stream of elements, each tagged with the record it came from."""

    def __init__(self, tagged, seed=None):
        """tagged: an iterable of (origin, element) pairs, consumed once; seed: this
        stage's seed (None: unseeded; the stages built on it draw seeds from the
        operating system)."""
        self._tagged = tagged
        self._seed = seed

    @classmethod
    def from_records(cls, records, seed=None):
        """A Dataset of `records` (bytes), e.g. to try a dataset_fn on a laptop; an
        element's origin is its position."""
        return cls(enumerate(records), seed)

    @property
    def seed(self):
        return self._seed

    def _derive(self, kind):
        if self._seed is None:
            return None
        return _elasticdl.seed_mix(self._seed, kind)

    def map(self, fn):
        """fn(element) for every element, in order; fn(element, generator) when fn takes
        two arguments (see the module's doc)."""
        if not callable(fn):
            raise TypeError(f"Dataset.map takes a function, not {type(fn).__name__}")
        seed = self._derive(_MAP)
        base = seed if seed is not None else _random_seed()
        with_generator = _takes_generator(fn)

        def mapped(tagged):
            for position, (origin, element) in enumerate(tagged):
                try:
                    if with_generator:
                        generator = torch.Generator()
                        generator.manual_seed(_elasticdl.seed_mix(base, position))
                        result = fn(element, generator)
                    else:
                        result = fn(element)
                except Exception as e:
                    _mark(e, origin)
                    raise
                yield origin, result
        return Dataset(mapped(self._tagged), seed)

    def filter(self, predicate):
        """The elements for which predicate(element) is true."""
        if not callable(predicate):
            raise TypeError(f"Dataset.filter takes a function, not {type(predicate).__name__}")

        def kept(tagged):
            for origin, element in tagged:
                try:
                    keep = predicate(element)
                except Exception as e:
                    _mark(e, origin)
                    raise
                if keep:
                    yield origin, element
        return Dataset(kept(self._tagged), self._derive(_FILTER))

    def shuffle(self, buffer_size, seed=None):
        """Shuffles through a buffer of buffer_size elements, as tf.data does: each
        output is drawn at random from the buffer and replaced by the next input. A
        buffer as large as the data gives a uniform shuffle. The order follows the
        pipeline's seed, or `seed` when given, and is the order the C++ Dataset's
        shuffle gives the same elements from the same seed."""
        buffer_size = int(buffer_size)
        if buffer_size < 1:
            raise ValueError(f"Dataset.shuffle: buffer_size must be at least 1, not {buffer_size}")
        own = self._derive(_SHUFFLE)
        chosen = seed if seed is not None else (own if own is not None else _random_seed())

        def shuffled(tagged):
            # Dataset::shuffle's algorithm and draws (elasticdl/data/dataset.h): fill the
            # buffer, take a random element, put the last in its place; so a Python file
            # shuffles a task's records as its C++ twin does from the same seed.
            draws = _elasticdl.ShuffleDraws(chosen)
            source = iter(tagged)
            buffer = []
            exhausted = False
            while True:
                while not exhausted and len(buffer) < buffer_size:
                    try:
                        buffer.append(next(source))
                    except StopIteration:
                        exhausted = True
                if not buffer:
                    return
                i = draws.pick(len(buffer))
                item = buffer[i]
                buffer[i] = buffer[-1]
                buffer.pop()
                yield item
        return Dataset(shuffled(self._tagged), own)

    def __iter__(self):
        """The elements (without their origins)."""
        return (element for _, element in self._tagged)

    def _tagged_elements(self):
        """The (origin, element) pairs: what the worker reads."""
        return iter(self._tagged)
