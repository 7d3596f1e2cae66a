"""What ElasticDL's C++ runtime calls to run a zoo's Python entries. Not for model
files: the entries see only the elasticdl module."""
import contextlib
import functools
import importlib
import inspect
import io
import math
import operator
import os
import sys
import threading
import traceback
import warnings
import weakref

import torch
from torch.optim.optimizer import required as _REQUIRED  # SGD's lr=<required parameter>

import elasticdl
from elasticdl.dataset import Dataset

# The zoo roots whose modules may be imported, newest first.
_roots = []
# The elasticdl package's frames (this glue, the Dataset's stages, thin wrappers) and the
# import machinery's are left out of the tracebacks shown to users.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _hidden(filename):
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen importlib")


def activate(root):
    """Makes `root` the zoo that `import` reads: first on sys.path, and the modules
    imported from another zoo root forgotten (their objects stay alive), so that a
    process that opens a second zoo gets its modules, not the first's."""
    if _roots and _roots[0] == root:
        return
    others = [r for r in _roots if r != root]
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        search = list(getattr(module, "__path__", None) or [])
        if any(path.startswith(r + "/") or any(p.startswith(r) for p in search) for r in others):
            del sys.modules[name]
    for r in _roots:
        while r in sys.path:
            sys.path.remove(r)
    if root in _roots:
        _roots.remove(root)
    _roots.insert(0, root)
    sys.path.insert(0, root)
    importlib.invalidate_caches()


def import_module(root, module):
    activate(root)
    return importlib.import_module(module)


def public_names(module):
    """'name (kind)' of the module's own functions and classes, for messages."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value):
            kind = "model class" if issubclass(value, torch.nn.Module) else "class"
        elif callable(value):
            kind = "function"
        else:
            continue
        names.append(f"{name} ({kind})")
    return sorted(names)


def describe_value(value):
    if inspect.isclass(value):
        return f"the class {value.__module__}.{value.__qualname__}"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(value, torch.nn.Module):
        return f"{article} {name} instance"
    return f"{article} {name}"


def _relative(path):
    for root in _roots:
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
    return path


def describe_exception(exc, tb=None):
    """'Type: message' on the first line, then the traceback (exc's, else tb), with the
    zoo's files named relative to the zoo and the runtime's own frames left out."""
    if exc.__traceback__ is None and tb is not None:
        exc = exc.with_traceback(tb)
    te = traceback.TracebackException.from_exception(exc)
    for t in _chain(te):
        frames = [f for f in t.stack if not _hidden(f.filename)]
        for f in frames:
            f.filename = _relative(f.filename)
        t.stack = traceback.StackSummary.from_list(frames)
        if t.exc_type is not None and issubclass(t.exc_type, SyntaxError) and t.filename:
            t.filename = _relative(t.filename)
    # The line naming the type: a SyntaxError's last, after the code it
    # points at; a message of several lines' first.
    summary = "".join(te.format_exception_only()).strip().splitlines()
    name = type(exc).__qualname__
    if type(exc).__module__ not in ("__main__", "builtins"):
        name = type(exc).__module__ + "." + name
    heads = [line for line in summary if line == name or line.startswith(name + ":")]
    head = heads[0] if heads else summary[-1] if summary else name
    return head + "\n" + "".join(te.format()).rstrip()


def where(threads, frames=8):
    """Where the first of `threads` (their idents) that is in Python code is, for a call
    that does not return: the last `frames` frames of its stack, the zoo's files named
    relative to the zoo and the runtime's own frames left out; "" when none is."""
    current = sys._current_frames()
    for ident in threads:
        frame = current.get(ident)
        stack = [f for f in traceback.extract_stack(frame) if not _hidden(f.filename)] \
            if frame is not None else []
        if stack:
            for f in stack:
                f.filename = _relative(f.filename)
            return "".join(traceback.format_list(stack[-frames:])).rstrip()
    return ""


def _chain(te):
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        yield te
        for linked in (te.__cause__, te.__context__):
            if linked is not None:
                yield from _chain(linked)
        te = None


def origin_of(exc):
    """The record position an exception of a dataset stage was marked with, or None."""
    return getattr(exc, "_elasticdl_origin", None)


# -- models ------------------------------------------------------------------

def make_model(factory, kwargs, where):
    """The nn.Module of a model entry: a torch.nn.Module subclass constructed with the
    job's --params as keyword arguments, or a function called with them."""
    if isinstance(factory, torch.nn.Module):
        raise TypeError(f"{where} is {describe_value(factory)}: name a torch.nn.Module class "
                        "or a function that builds one (every worker builds its own, seeded "
                        "by --seed)")
    if not callable(factory):
        raise TypeError(f"{where} is {describe_value(factory)}, not a torch.nn.Module class "
                        "nor a function that builds one")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None  # a builtin: its call says what is wrong
    if signature is not None:
        try:
            signature.bind(**kwargs)
        except TypeError as e:
            given = ", ".join(sorted(kwargs)) or "none"
            raise TypeError(f"{where} cannot build the model: {e} (the model entry is called "
                            f"with --params as keyword arguments, here {given}, and returns a "
                            "torch.nn.Module)") from None
    model = factory(**kwargs)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where} returned {describe_value(model)}, expected a torch.nn.Module")
    return model


def mirror(model):
    """What the C++ worker mirrors of a model: one tuple per submodule (the model first),
    parents before children: (qualified name, class name, [(name, parameter)],
    [(name, buffer)], running statistics (None, or (momentum,) with None for a
    cumulative average), the EmbeddingTable of an elasticdl.nn.Embedding or None).
    A tensor shared by several modules appears once, under its first name, as in
    model.named_parameters()."""
    seen = set()
    out = []
    watched = []
    for qualified, module in model.named_modules():
        params, buffers = [], []
        for name, p in module.named_parameters(recurse=False):
            if id(p) not in seen:
                _check_initialized(qualified, module, name, p, "parameter")
                seen.add(id(p))
                params.append((name, p))
        non_persistent = getattr(module, "_non_persistent_buffers_set", set())
        for name, b in module.named_buffers(recurse=False):
            if name not in non_persistent and id(b) not in seen:
                _check_initialized(qualified, module, name, b, "buffer")
                seen.add(id(b))
                buffers.append((name, b))
                watched.append((_qualify(qualified, name), weakref.ref(module), name, b))
        stats = None
        if (isinstance(module, torch.nn.modules.batchnorm._NormBase) and
                module.track_running_stats):
            stats = (module.momentum,)
        table = module.table if isinstance(module, elasticdl.nn.Embedding) else None
        kind = f"{type(module).__module__}.{type(module).__qualname__}"
        out.append((qualified, kind, params, buffers, stats, table))
    _mirrored[id(model)] = _Mirrored(watched, seen)
    weakref.finalize(model, _mirrored.pop, id(model), None)
    return out


def _qualify(qualified, name):
    return f"{qualified}.{name}" if qualified else name


def _describe_tensor(t):
    dtype = str(t.dtype).replace("torch.", "")
    return f"{'an' if dtype.startswith('int') else 'a'} {dtype} tensor of shape {list(t.shape)}"


def _check_initialized(qualified, module, name, tensor, kind):
    if isinstance(tensor, torch.nn.parameter.UninitializedTensorMixin):
        raise TypeError(
            f"{kind} {_qualify(qualified, name)!r} of {describe_value(module)} is not "
            "initialized: a torch.nn.Lazy module makes its parameters in its first forward, "
            "and what is trained and saved is what the model is built with; give the layer "
            "its input size (torch.nn.Linear(784, 32) for torch.nn.LazyLinear(32)), or run "
            "a forward on an example input in __init__")


class _Mirrored:
    """What forward keeps of a model mirrored in C++: its buffers (qualified name, a weak
    reference to the module, name, tensor), and the ids of its tensors, which the first
    forward must not add to."""

    def __init__(self, buffers, ids):
        self.buffers = buffers
        self.ids = ids
        self.checked = False


# id(model) -> _Mirrored of each model mirror() was given, until the model is freed.
_mirrored = {}


def _replaced_buffers(state):
    """(qualified name, module, name, mirrored tensor, what the module holds now) of each
    buffer the module holds another tensor for."""
    out = []
    for qualified, ref, name, tensor in state.buffers:
        module = ref()
        if module is not None and module._buffers.get(name) is not tensor:
            out.append((qualified, module, name, tensor, module._buffers.get(name)))
    return out


def _put_back(replaced):
    for _, module, name, tensor, _ in replaced:
        module._buffers[name] = tensor


def _copy_back(replaced):
    with torch.no_grad():
        for _, module, name, tensor, now in replaced:
            tensor.copy_(now)
            module._buffers[name] = tensor


def _keep_mirrored(model, out):
    """A buffer that forward replaced (self.steps = self.steps + 1, where += would update
    it in place) is copied into the tensor the worker mirrors, which is put back, so that
    what is trained and saved holds the model's value. The copy waits for the end of the
    backward pass that follows, if any: the old tensor may be saved for it. Parameters
    the first forward made (a layer built there) are refused, as is a buffer replaced by
    another shape or type."""
    state = _mirrored.get(id(model))
    if state is None:
        return
    replaced = _replaced_buffers(state)
    for qualified, _, _, tensor, now in replaced:
        if (isinstance(now, torch.Tensor) and now.shape == tensor.shape and
                now.dtype == tensor.dtype):
            continue
        got = (_describe_tensor(now) if isinstance(now, torch.Tensor) else
               "None" if now is None else describe_value(now))
        _put_back(replaced)  # the next attempt begins from the model's values
        raise TypeError(f"forward replaced buffer {qualified!r}, {_describe_tensor(tensor)}, "
                        f"with {got}: a buffer keeps the shape and type the model was built "
                        "with, which is what is trained and saved")
    if not state.checked:
        # Until a forward passes: the layers made stay, and fail each attempt.
        made = [n for n, p in model.named_parameters() if id(p) not in state.ids]
        state.checked = not made
        if made:
            _put_back(replaced)
            raise TypeError(f"forward made parameters the model was not built with "
                            f"({', '.join(made)}): build every layer in __init__ (what is "
                            "trained and saved is what the model is built with)")
    if not replaced:
        return
    if torch.is_grad_enabled() and out.requires_grad:
        def at_end_of_backward(grad):
            torch.autograd.Variable._execution_engine.queue_callback(
                lambda: _copy_back(replaced))
            return grad
        out.register_hook(at_end_of_backward)
    else:
        _copy_back(replaced)


# What indexing or calling a tensor as a dict raises.
_AS_A_DICT = ("too many indices for tensor", "(got str)", "invalid data type 'str'",
              "'Tensor' object has no attribute 'items'",
              "'Tensor' object has no attribute 'keys'",
              "'Tensor' object has no attribute 'values'",
              "'Tensor' object has no attribute 'get'")


def forward(model, features):
    """model(features): a dict of one feature as that tensor alone."""
    state = _mirrored.get(id(model))
    if state is not None:
        # Buffers a forward replaced whose backward never ran: its step was not taken.
        _put_back(_replaced_buffers(state))
    try:
        if len(features) == 1:
            (name, arg), = features.items()
            try:
                out = model(arg)
            except (TypeError, IndexError, AttributeError) as e:
                if any(text in str(e) for text in _AS_A_DICT) and hasattr(e, "add_note"):
                    e.add_note(f"(forward is given the one feature, {name!r}, as that tensor "
                               f"alone, not as a dict: index it as a tensor, not as "
                               f"features[{name!r}])")
                raise
        else:
            out = model(features)
    except BaseException:
        if state is not None:
            _put_back(_replaced_buffers(state))  # the next attempt begins from the model's
        raise
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {describe_value(out)}, expected a torch.Tensor of "
                        "predictions")
    _keep_mirrored(model, out)
    return out


def set_training(model, on):
    model.train(on)


# -- data ----------------------------------------------------------------------

class Records:
    """The records of a task as dataset_fn receives them: (position, bytes) pairs
    pulled from the C++ reader. A record file that cannot be read raises
    elasticdl.DataError."""

    def __init__(self, next_record):
        self._next = next_record

    def __iter__(self):
        return self

    def __next__(self):
        item = self._next()
        if item is None:
            raise StopIteration
        return item


def _to_tensor(value, what):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (bytes, str)) or (isinstance(value, list) and value and
                                           isinstance(value[0], (bytes, str))):
        raise TypeError(f"{what} holds bytes: map them to numbers in dataset_fn "
                        "(elasticdl.hash_bucket, a vocabulary)")
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{what} is {describe_value(value)}, not a tensor") from e


def _example(element, prediction):
    """(features dict, labels or None) of one element of a dataset_fn's dataset."""
    # The common case, quickly: ({name: tensor, ...}, tensor).
    if type(element) is tuple and len(element) == 2 and not prediction:
        features, labels = element
        if (type(features) is dict and type(labels) is torch.Tensor and features and
                all(type(k) is str and type(v) is torch.Tensor for k, v in features.items())):
            return features, labels
    if isinstance(element, tuple) and len(element) == 2:
        features, labels = element
    elif prediction and not isinstance(element, tuple):
        features, labels = element, None
    else:
        raise TypeError(
            "dataset_fn's dataset yielded " + describe_value(element) + (
                " of " + str(len(element)) + " items" if isinstance(element, tuple) else "") +
            ": expected (features, labels)" + (", or features alone" if prediction else ""))
    if isinstance(features, dict):
        if not features:
            raise TypeError("dataset_fn's dataset yielded no features (an empty dict)")
        features = {str(k): _to_tensor(v, f"feature {k!r}") for k, v in features.items()}
    else:
        try:
            features = {"features": _to_tensor(features, "the features")}
        except TypeError:
            # Several inputs as (x1, x2): what a TensorDataset yields.
            if (isinstance(features, (tuple, list)) and
                    any(isinstance(v, torch.Tensor) for v in features)):
                raise TypeError(
                    f"dataset_fn's dataset yielded features as a {type(features).__name__} of "
                    f"{len(features)} tensors: yield a dict of named features instead, "
                    "({'x1': ..., 'x2': ...}, labels), which forward receives as that dict, "
                    "batched") from None
            raise
    if labels is not None:
        labels = _to_tensor(labels, "the labels")
    return features, None if prediction else labels


def examples(dataset, mode_name):
    """(origin, features, labels) of each element of a dataset_fn's result; a result
    that is not a Dataset raises at once."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset_fn returned {describe_value(dataset)}: return the "
                        "elasticdl.Dataset it was given, transformed with map, filter and "
                        "shuffle")
    return _examples(dataset, mode_name == "PREDICTION")


def _examples(dataset, prediction):
    for origin, element in dataset._tagged_elements():
        try:
            features, labels = _example(element, prediction)
        except Exception as e:
            e._elasticdl_origin = origin
            raise
        yield origin, features, labels


def pipeline(dataset_fn, next_record, mode_name, seed):
    """dataset_fn(records, mode) over a task's records, as examples(); seed: the task's
    (None: unseeded)."""
    records = Dataset(Records(next_record), seed)
    return examples(dataset_fn(records, elasticdl.Mode[mode_name]), mode_name)


def input_pipeline(default_input, next_record, mode_name, seed):
    """A model class's default_input(record, mode), one record to one example."""
    mode = elasticdl.Mode[mode_name]
    records = Dataset(Records(next_record), seed)
    return examples(records.map(lambda record: default_input(record, mode)), mode_name)


# -- optimizers and metrics ----------------------------------------------------

def _factory_class(value):
    return value.func if isinstance(value, functools.partial) else value


def _plain(v):
    """A tensor's or a NumPy array's numbers as a list (one of none: its number), a NumPy
    number as Python's; any other value as it is."""
    if isinstance(v, torch.Tensor) or getattr(v, "ndim", 0) > 0:
        return v.tolist()
    if getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return v.item()  # a NumPy number or an array of none: float, int or bool
    if hasattr(v, "__index__") and not isinstance(v, (bool, int)):
        return int(v)  # a NumPy integer
    if hasattr(v, "__float__") and not isinstance(v, (bool, int, float)):
        return float(v)
    return v


def _factory_arguments(value, where, family, kind, skipped):
    """(class, {argument: value}) of a factory of a `kind` ("optimizer"): a
    functools.partial of a class of `family` (a module's name, for messages), or the
    class itself; every argument of the class's constructor but `skipped` (what the
    factory is later called with), with its default unless given."""
    cls, args, kwargs = _factory_class(value), (), {}
    if isinstance(value, functools.partial):
        args, kwargs = value.args, dict(value.keywords)
    signature = inspect.signature(cls)
    parameters = [p for p in signature.parameters.values() if p.name != skipped]
    if args:
        first = parameters[0].name if parameters else "name"
        raise TypeError(f"{where}: functools.partial({cls.__name__}, ...) has positional "
                        f"arguments; give the {kind}'s arguments by keyword "
                        f"(functools.partial({family}.{cls.__name__}, {first}=...))")
    unknown = sorted(set(kwargs) - {p.name for p in parameters})
    if unknown:
        raise TypeError(f"{where}: {family}.{cls.__name__} has no argument {unknown[0]!r}")
    out = {}
    for p in parameters:
        if p.name in kwargs:
            out[p.name] = kwargs[p.name]
        elif p.default is not p.empty and p.default is not _REQUIRED:
            out[p.name] = p.default
        elif p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        else:
            raise TypeError(f"{where}: {family}.{cls.__name__} needs {p.name!r}: "
                            f"functools.partial({family}.{cls.__name__}, {p.name}=...)")
    return cls, {name: _plain(v) for name, v in out.items()}


def describe_optimizer(value, where="optimizer()"):
    """(class name, {argument: value}) of an optimizer factory: a
    functools.partial of a torch.optim (or elasticdl.optim) class, or the class
    itself; every argument of the class's constructor but `params`, with its default
    unless given."""
    cls = _factory_class(value)
    if not inspect.isclass(cls) or not (issubclass(cls, torch.optim.Optimizer) or
                                        cls is elasticdl.optim.Ftrl):
        raise TypeError(f"{where} returned {describe_value(value)}: expected a factory of a "
                        "torch.optim optimizer, e.g. functools.partial(torch.optim.SGD, lr=0.1)")
    family = "elasticdl.optim" if cls is elasticdl.optim.Ftrl else "torch.optim"
    cls, out = _factory_arguments(value, where, family, "optimizer", "params")
    return cls.__name__, out


_LR = torch.optim.lr_scheduler
_SCHEDULER_BASE = getattr(_LR, "LRScheduler", _LR._LRScheduler)
_SCHEDULE_EXAMPLES = ("a schedule in --lr_schedule's form, e.g. 'warmup=100,step=1000,"
                      "gamma=0.5', a factory of a torch.optim.lr_scheduler scheduler, e.g. "
                      "functools.partial(torch.optim.lr_scheduler.StepLR, step_size=1000, "
                      "gamma=0.5), or a function of the optimizer that builds one, e.g. "
                      "lambda optimizer: SequentialLR(optimizer, [LinearLR(optimizer, "
                      "start_factor=0.01, total_iters=100), CosineAnnealingLR(optimizer, "
                      "T_max=900)], milestones=[100])")
_SCHEDULERS = (_LR.StepLR, _LR.MultiStepLR, _LR.ExponentialLR, _LR.CosineAnnealingLR,
               _LR.LinearLR, _LR.ConstantLR, _LR.PolynomialLR)


def _check_followed(cls, where):
    if cls not in _SCHEDULERS and cls is not _LR.SequentialLR:
        raise TypeError(f"{where}: {cls.__module__}.{cls.__qualname__}: the parameter "
                        "servers follow torch.optim.lr_scheduler.StepLR, MultiStepLR, "
                        "ExponentialLR, CosineAnnealingLR, LinearLR, ConstantLR, PolynomialLR "
                        "and a SequentialLR of them, or a schedule in --lr_schedule's form, "
                        "e.g. 'warmup=100,cosine=2000,min_lr=0.0001'")


def _whole(m):
    """An int or NumPy's, or a float of a whole number (not a bool), as an int; TypeError
    otherwise."""
    if isinstance(m, bool):
        raise TypeError(m)
    if isinstance(m, float) and m.is_integer():
        return int(m)
    return operator.index(m)


def schedule_text(value, where="learning_rate_schedule()"):
    """The --lr_schedule form of what a learning_rate_schedule() entry returned: that
    text, a factory of a PyTorch scheduler (a functools.partial of its class), or a
    function that builds one on the optimizer it is given, stepped once a step as the
    model version counts steps: StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
    LinearLR, ConstantLR, PolynomialLR, or a SequentialLR of them, which the parameter
    servers follow."""
    if isinstance(value, str):
        return value
    cls = _factory_class(value)
    if not inspect.isclass(cls) and callable(value):
        # Built twice, on optimizers of lr 1 and 2: settings taken from the optimizer's lr
        # (an eta_min of a hundredth of it, say) would be those of a probe, not the model's.
        texts = [_phases_text(_built_phases(value, lr, where)) for lr in (1.0, 2.0)]
        if texts[0] != texts[1]:
            raise TypeError(f"{where}: the scheduler the function builds depends on the "
                            f"optimizer's lr ('{texts[0]}' for an lr of 1, '{texts[1]}' for 2): "
                            "give its settings as numbers")
        return texts[0]
    if not inspect.isclass(cls) or not issubclass(cls, (_SCHEDULER_BASE, _LR.ReduceLROnPlateau)):
        raise TypeError(f"{where} returned {describe_value(value)}: expected "
                        f"{_SCHEDULE_EXAMPLES}")
    _check_followed(cls, where)
    if cls is _LR.SequentialLR:
        raise TypeError(f"{where}: torch.optim.lr_scheduler.SequentialLR takes schedulers "
                        "built on the optimizer: return a function of the optimizer that "
                        "builds it, e.g. lambda optimizer: SequentialLR(optimizer, "
                        "[LinearLR(optimizer, ...), StepLR(optimizer, ...)], milestones=[...])")
    cls, args = _factory_arguments(value, where, "torch.optim.lr_scheduler", "scheduler",
                                   "optimizer")
    if args.get("last_epoch", -1) != -1:
        raise TypeError(f"{where}: torch.optim.lr_scheduler.{cls.__name__}(last_epoch="
                        f"{args['last_epoch']!r}): the schedule follows the model's version, "
                        "which a resumed job carries on from")
    return _phases_text(_scheduler_phases(cls, args, where))


def _built_phases(build, lr, where):
    """The phases of the scheduler `build` makes of an optimizer of its own, of `lr`."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    try:
        inspect.signature(build).bind(optimizer)
    except TypeError as e:
        raise TypeError(f"{where} returned a function that cannot be called with an optimizer "
                        f"({e}): expected a function of the optimizer that builds a scheduler "
                        "on it") from None
    except ValueError:
        pass  # no signature to read (a builtin): the call tells
    # What the schedulers print (verbose=True) would be the probe's rates, not the model's.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        scheduler = build(optimizer)

    def started(s, family):
        # A scheduler's step count after construction is 0; one built with last_epoch or
        # stepped before it was returned starts elsewhere than the model's version 0.
        if s.last_epoch != 0:
            raise TypeError(f"{where}: the function's {family} is at step {s.last_epoch}, not "
                            "0 (built with last_epoch, or stepped before it was returned): the "
                            "schedule follows the model's version, which a resumed job carries "
                            "on from")

    def phases(s, inside):
        if not isinstance(s, (_SCHEDULER_BASE, _LR.ReduceLROnPlateau)):
            raise TypeError(f"{where}: the function returned {describe_value(s)}"
                            f"{' in a SequentialLR' if inside else ''}: expected a "
                            "torch.optim.lr_scheduler scheduler of the optimizer it is given")
        cls = type(s)
        family = f"torch.optim.lr_scheduler.{cls.__name__}"
        _check_followed(cls, where)
        if s.optimizer is not optimizer:
            raise TypeError(f"{where}: the function's {family} steps an optimizer other than "
                            "the one the function is given: build it on that one")
        if not inside:
            started(s, family)
        if cls is _LR.SequentialLR:
            if inside:
                raise TypeError(f"{where}: a SequentialLR in a SequentialLR: give its "
                                "schedulers and milestones to the outer one")
            if len({id(x) for x in s._schedulers}) != len(s._schedulers):
                raise TypeError(f"{where}: a SequentialLR given the same scheduler twice: "
                                "build one for each place")
            if s._schedulers:  # the first runs on from its own step count, the others from 0
                started(s._schedulers[0],
                        f"torch.optim.lr_scheduler.{type(s._schedulers[0]).__name__}")
            return _sequence_phases(s._milestones, [phases(x, True) for x in s._schedulers],
                                    where)
        args = {key: _plain(v) for key, v in vars(s).items()}
        if cls is _LR.MultiStepLR:  # a Counter of them: each as many times as given
            args["milestones"] = list(s.milestones.elements())
        return _scheduler_phases(cls, args, where)

    out = phases(scheduler, False)
    # Only the returned scheduler is read: the optimizer's lr must be what it sets at step 0,
    # not that of another scheduler built on the optimizer or of a change made to its lr.
    first = scheduler._schedulers[0] if isinstance(scheduler, _LR.SequentialLR) else scheduler
    group = optimizer.param_groups[0]
    expected = first._get_closed_form_lr()[0]
    if not (group.get("initial_lr") == lr and first.base_lrs[0] == lr and
            math.isclose(group["lr"], expected, rel_tol=1e-12)):
        raise TypeError(f"{where}: the function leaves the optimizer's lr at {group['lr']!r}, "
                        f"where the scheduler it returns sets {expected!r} (on an lr of {lr!r}): "
                        "a scheduler built on the optimizer and not returned, or a change to "
                        "its lr, which the servers would not follow; return the one scheduler "
                        "that sets the rate (a SequentialLR of several)")
    return out


def _sequence_phases(milestones, schedulers, where):
    """The phases of a SequentialLR: its schedulers' phases (`schedulers`, one list of
    each), each scheduler's from its milestone on, until the next milestone."""
    try:
        at = [_whole(m) for m in milestones]
    except TypeError:
        at = None
    if at is None or any(m < 1 for m in at) or at != sorted(at):
        raise TypeError(f"{where}: torch.optim.lr_scheduler.SequentialLR(milestones="
                        f"{milestones!r}): expected ascending whole numbers >= 1 (of steps)")
    out = []
    for start, end, phases in zip([0] + at, at + [None], schedulers):
        out.extend((start + a, text) for a, text in phases if end is None or start + a < end)
    return out


def _phases_text(phases):
    """The text of [(at, a phase's text), ...], the first at 0."""
    text = phases[0][1]
    for at, phase in phases[1:]:
        text += f";at={at}" + ("" if phase == "constant" else f",{phase}")
    return text


def _scheduler_phases(cls, args, where):
    """[(at, text), ...] of a scheduler of class `cls` (one of _SCHEDULERS) constructed
    with `args` (every argument of its constructor but the optimizer)."""
    family = f"torch.optim.lr_scheduler.{cls.__name__}"

    def count(key):
        v = args[key]
        try:  # StepLR(optimizer, 1.0) as PyTorch's tutorials write it
            n = _whole(v)
        except TypeError:
            n = 0
        if n < 1:
            raise TypeError(f"{where}: {family}({key}={v!r}): expected a whole number >= 1 "
                            "(of steps)")
        return n

    def number(key, valid, expected):
        v = args[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise TypeError(f"{where}: {family}({key}={v!r}): expected a finite number")
        if not valid(v):
            raise TypeError(f"{where}: {family}({key}={v!r}): the parameter servers' schedules "
                            f"take {key} {expected}")
        return repr(float(v))

    def factor(key):
        return number(key, lambda f: 0 < f <= 1, "in (0, 1]")

    if cls is _LR.StepLR:
        return [(0, f"step={count('step_size')},gamma={factor('gamma')}")]
    if cls is _LR.MultiStepLR:
        try:  # in any order; an array of them is a list by now
            milestones = sorted(map(_whole, args["milestones"]))
        except TypeError:
            milestones = None
        if milestones is None or any(m < 0 for m in milestones):
            raise TypeError(f"{where}: {family}(milestones={args['milestones']!r}): expected "
                            "whole numbers >= 0 (of steps)")
        if not milestones:
            return [(0, "constant")]  # MultiStepLR(milestones=[]) keeps lr0
        return [(0, f"milestones={':'.join(map(str, milestones))},gamma={factor('gamma')}")]
    if cls is _LR.ExponentialLR:
        return [(0, f"exponential=1,rate={factor('gamma')}")]
    if cls is _LR.CosineAnnealingLR:
        eta_min = number("eta_min", lambda m: m >= 0, ">= 0")
        return [(0, f"cosine={count('T_max')},min_lr={eta_min},periodic=true")]
    if cls is _LR.LinearLR:
        end = number("end_factor", lambda f: 0 <= f <= 1, "in [0, 1]")
        return [(0, f"linear={count('total_iters')},start_factor={factor('start_factor')},"
                    f"end_factor={end}")]
    if cls is _LR.ConstantLR:  # lr0 * factor until total_iters, lr0 from there
        total, f = count("total_iters"), factor("factor")
        return [(0, f"linear={total},start_factor={f},end_factor={f}"), (total, "constant")]
    power = number("power", lambda p: p > 0, "above 0")
    return [(0, f"polynomial={count('total_iters')},power={power}")]


def metric_kind(value):
    """('auc', num_thresholds), ('accuracy', 0), ... for a built-in metric; ('mean', 0)
    for a per-example function."""
    builtin = getattr(value, "_elasticdl_metric", None)
    if builtin is not None and not inspect.isclass(value):
        return builtin()
    if inspect.isclass(value) and issubclass(value, elasticdl.metrics._Builtin):
        return value()._elasticdl_metric()
    if callable(value):
        return ("mean", 0)
    raise TypeError(f"is {describe_value(value)}: a metric is a function of (labels, "
                    "predictions) giving one value per example, or an elasticdl.metrics one")


def metrics_of(value):
    """(name, kind, num_thresholds, metric) of each metric eval_metrics_fn returned."""
    if not isinstance(value, dict):
        raise TypeError(f"returned {describe_value(value)}, expected a dict of {{name: metric}}")
    out = []
    for name, metric in value.items():
        try:
            kind, thresholds = metric_kind(metric)
        except TypeError as e:
            raise TypeError(f"metric {name!r} {e}") from None
        out.append((str(name), kind, thresholds, metric))
    return out


class _LabelledLines(io.TextIOBase):
    """A text stream that writes whole lines to `stream`, each begun with `prefix`: what a
    model file prints reaches the job's log labelled like the process's own lines, and
    each line in one write, so that the lines of processes sharing the log do not mix."""

    def __init__(self, stream, prefix):
        super().__init__()
        self._stream = stream
        self._prefix = prefix
        # Threads of the model's own print too; reentrant, for a print from a __del__ or
        # a signal handler that runs inside a write.
        self._lock = threading.RLock()
        self._pending = ""  # the line begun and not ended yet
        self._continued = False  # its beginning already went out (flush)

    def relabel(self, prefix):
        with self._lock:
            self._prefix = prefix

    def writable(self):
        return True

    def write(self, text):
        with self._lock:
            pending = self._pending + text
            end = pending.rfind("\n")
            if end >= 0:
                self._pending = pending[end + 1:]
                self._emit(pending[:end + 1])
            else:
                self._pending = pending
        return len(text)

    def flush(self):
        with self._lock:
            if self._pending:
                self._emit(self._pending)
                self._pending = ""
                self._continued = True
            self._stream.flush()

    def _emit(self, text):
        """Writes `text` (whole lines, or a line's beginning at a flush), each line begun
        with the prefix but one whose beginning went out before."""
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
            ends = "\n"
        else:
            ends = ""
        out = "\n".join(line if i == 0 and self._continued else self._prefix + line
                        for i, line in enumerate(lines)) + ends
        self._continued = False
        self._stream.write(out)
        self._stream.flush()

    @property
    def encoding(self):
        return self._stream.encoding

    def fileno(self):
        return self._stream.fileno()

    def isatty(self):
        return self._stream.isatty()


def label_output(prefix):
    """Begins every line that print(), warnings and tracebacks write with `prefix`."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, _LabelledLines):
            stream.relabel(prefix)
        elif stream is not None:
            setattr(sys, name, _LabelledLines(stream, prefix))


def metric_values(fn, labels, predictions):
    values = fn(labels, predictions)
    if not isinstance(values, torch.Tensor):
        values = torch.as_tensor(values)
    return values


def loss(fn, labels, predictions):
    value = fn(labels, predictions)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"returned {describe_value(value)}, expected a torch.Tensor holding one "
                        "floating-point value")
    return value


# -- export --------------------------------------------------------------------

def forward_argument(features):
    """What forward receives for a batch's features: a dict of one feature as that tensor
    alone."""
    return next(iter(features.values())) if len(features) == 1 else dict(features)


def to_torchscript(model, example, path):
    """Writes `model` (in eval mode) to `path` as TorchScript: torch.jit.script, or
    torch.jit.trace on `example` (forward's argument for a batch; None: none) where
    scripting fails. Returns (method, why scripting failed, or "")."""
    model.eval()
    why = ""
    try:
        module = torch.jit.script(model)
        method = "torch.jit.script"
    except Exception as e:  # scripting fails in many ways (unsupported Python, types)
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if example is None:
            raise RuntimeError(
                f"torch.jit.script failed ({why}); give --data=FILE, a record file of the "
                "model's input, to trace the model on its first records instead") from None
        with torch.no_grad():
            module = torch.jit.trace(model, (example,), strict=False)
        method = "torch.jit.trace"
    partial = path + ".partial"
    module.save(partial)
    os.replace(partial, path)
    return method, why
