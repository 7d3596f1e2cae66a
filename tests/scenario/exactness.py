"""Exact data accounting for scenario tests, with tests/zoo/exactness.

The exactness model has one parameter, rows [N, 1], starting at 0; training
on the record with int64 feature "id" = r lowers rows[r] by exactly 1 (SGD,
lr 1, loss = sum of outputs). After E epochs every row must be exactly -E: a
row above it names a record lost, a row below it a record trained twice. Its
evaluation metrics (means of id, id^2, id^3 over the validation ids and of the
predictions) likewise reveal validation records counted twice or never.

This module writes such records (tf.train.Example in RecordIO or TFRecord,
encoded by tests/compat/make_compat_files.py, not by ElasticDL), reads the
trained model that `elasticdl train --output DIR` writes (decoding the
protobuf wire format by hand: python3-protobuf is not installed), checks it,
and reads the job's event log (<job_dir>/events.jsonl).
"""
import json
import os
import re
import signal
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import crc32c  # noqa: E402
from make_compat_files import NONE, example, recordio_chunk, tfrecord  # noqa: E402
from read_files import unmasked  # noqa: E402

# A zoo of test models, apart from the users' model_zoo.
MODEL_ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo")
MODEL_DEF = "exactness.exactness.Exactness"


# -- data --------------------------------------------------------------------

def id_example(record_id):
    """The serialized Example of one record: int64 feature "id" = record_id."""
    return example([("id", "int64", [record_id])])


def write_records(path, ids, fmt="recordio", records_per_chunk=256):
    """Writes one Example per id, in order, to path (written whole, then renamed).

    fmt is "recordio" (uncompressed chunks of records_per_chunk records) or
    "tfrecord".
    """
    records = [id_example(i) for i in ids]
    if fmt == "recordio":
        data = b"".join(recordio_chunk(records[i:i + records_per_chunk], NONE)
                        for i in range(0, len(records), records_per_chunk))
    elif fmt == "tfrecord":
        data = tfrecord(records)
    else:
        raise ValueError(f"unknown record format {fmt!r}")
    with open(path + ".partial", "wb") as f:
        f.write(data)
    os.replace(path + ".partial", path)


def model_params(num_records, sleep_ms=0):
    """The --params value of the exactness model."""
    return f"num_records={num_records}, sleep_ms={sleep_ms}"


# -- the protobuf wire format ------------------------------------------------

def _varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than ten bytes")


def wire_fields(data):
    """The fields of one message: a list of (number, wire_type, value).

    value is an int for varint (0), fixed64 (1) and fixed32 (5) fields and
    bytes for length-delimited (2) ones. Groups are refused.
    """
    fields = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _varint(data, pos)
        elif wire_type == 1:
            value, pos = struct.unpack_from("<Q", data, pos)[0], pos + 8
        elif wire_type == 2:
            n, pos = _varint(data, pos)
            if pos + n > len(data):
                raise ValueError(f"field {number}: {n} bytes past the end")
            value, pos = bytes(data[pos:pos + n]), pos + n
        elif wire_type == 5:
            value, pos = struct.unpack_from("<I", data, pos)[0], pos + 4
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire_type}")
        fields.append((number, wire_type, value))
    if pos != len(data):
        raise ValueError("message runs past its end")
    return fields


# elasticdl.proto DataType -> struct format letter, element size (bfloat16: its bits).
_DTYPES = {1: ("f", 4), 2: ("d", 8), 3: ("q", 8), 4: ("i", 4), 5: ("?", 1), 6: ("B", 1),
           7: ("b", 1), 8: ("h", 2), 9: ("e", 2), 10: ("H", 2)}


def decode_tensor(data):
    """An elasticdl.proto Tensor: (name, shape, values as a flat list)."""
    name, dtype, shape, content = "", 0, [], b""
    for number, wire_type, value in wire_fields(data):
        if number == 1 and wire_type == 2:
            name = value.decode("utf-8")
        elif number == 2 and wire_type == 0:
            dtype = value
        elif number == 3 and wire_type == 2:  # packed
            pos = 0
            while pos < len(value):
                dim, pos = _varint(value, pos)
                shape.append(dim)
        elif number == 3 and wire_type == 0:  # unpacked
            shape.append(value)
        elif number == 4 and wire_type == 2:
            content = value
    if dtype not in _DTYPES:
        raise ValueError(f"tensor {name!r}: unsupported dtype {dtype}")
    letter, size = _DTYPES[dtype]
    count = 1
    for dim in shape:
        count *= dim
    if len(content) != count * size:
        raise ValueError(f"tensor {name!r} of shape {shape}: {len(content)} bytes of content, "
                         f"expected {count * size}")
    return name, shape, list(struct.unpack(f"<{count}{letter}", content))


def read_model_values(path, field=2):
    """A ModelValues file: (version, {parameter name: (shape, values)}); field=3: the
    buffers instead of the parameters."""
    with open(path, "rb") as f:
        data = f.read()
    version, tensors = 0, {}
    for number, wire_type, value in wire_fields(data):
        if number == 1 and wire_type == 0:
            version = value
        elif number == field and wire_type == 2:
            name, shape, values = decode_tensor(value)
            tensors[name] = (shape, values)
    return version, tensors


def check_trained_counts(output_dir, num_records, epochs):
    """"" when the trained exactness model's buffer `trained` counts every record
    `epochs` times (a step applies what each of its minibatches added); else what
    differs."""
    path = os.path.join(output_dir, "parameters.pb")
    try:
        _, buffers = read_model_values(path, field=3)
    except (OSError, ValueError) as e:
        return f"cannot read {path}: {e}"
    if "trained" not in buffers:
        return f"{path} has no buffer 'trained' (has {sorted(buffers)})"
    shape, values = buffers["trained"]
    if shape != [num_records]:
        return f"{path}: 'trained' has shape {shape}, expected [{num_records}]"
    wrong = [(r, v) for r, v in enumerate(values) if v != epochs]
    if wrong:
        return (f"{path}: {len(wrong)} of {num_records} records counted other than {epochs} "
                f"times in the buffer 'trained', e.g. (record, count) {wrong[:10]}")
    return ""


def _packed_varints(value):
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def checkpoint_frames(data, name):
    """The frames of a checkpoint file (ps/checkpoint.cc: magic, then frames of length,
    masked CRC32C, payload), the header first; ValueError naming `name` when the file is
    not whole: cut short, a CRC that fails, row blocks missing."""
    if data[:8] != b"EDLCKPT1":
        raise ValueError(f"{name}: not a checkpoint file ({len(data)} bytes)")
    pos, frames = 8, []
    while pos < len(data):
        if len(data) - pos < 12:
            raise ValueError(f"{name}: a frame header cut short at {pos}")
        length, masked = struct.unpack_from("<QI", data, pos)
        payload = data[pos + 12:pos + 12 + length]
        if len(payload) != length:
            raise ValueError(f"{name}: frame at {pos} holds {len(payload)} of {length} bytes")
        if crc32c.crc32c(payload) != unmasked(masked):
            raise ValueError(f"{name}: frame at {pos} fails its CRC")
        frames.append(payload)
        pos += 12 + length
    if not frames:
        raise ValueError(f"{name}: no frames")
    blocks = next((v for n, t, v in wire_fields(frames[0]) if n == 10 and t == 0), 0)
    if blocks != len(frames) - 1:
        raise ValueError(f"{name}: {blocks} row blocks declared, {len(frames) - 1} found")
    return frames


def read_embedding_rows(directory, table):
    """Rows of embedding table `table` in a trained model's embeddings/
    directory (one checkpoint file per parameter server, ps/checkpoint.h):
    {id: [values]} of float32 rows. Rows no server holds are left out.
    """
    versions = [d for d in os.listdir(directory) if d.startswith("version-")]
    if len(versions) != 1:
        raise ValueError(f"{directory}: expected one version directory, found {versions}")
    version_dir = os.path.join(directory, versions[0])
    rows = {}
    for name in sorted(os.listdir(version_dir)):
        with open(os.path.join(version_dir, name), "rb") as f:
            frames = checkpoint_frames(f.read(), name)
        for frame in frames[1:]:
            block_rows = next(v for n, t, v in wire_fields(frame) if n == 1)
            fields = wire_fields(block_rows)
            if next(v for n, t, v in fields if n == 1).decode() != table:
                continue
            ids = []
            for n, t, v in fields:
                if n == 2:
                    ids.extend(_packed_varints(v) if t == 2 else [v])
            values = next((v for n, t, v in fields if n == 3), b"")
            dim = len(values) // 4 // max(1, len(ids))
            flat = struct.unpack(f"<{len(ids) * dim}f", values)
            for i, row_id in enumerate(ids):
                if row_id in rows:
                    raise ValueError(f"row {row_id} of {table!r} is held twice")
                rows[row_id] = list(flat[i * dim:(i + 1) * dim])
    return rows


# -- checks --------------------------------------------------------------------

def _ranges(rows):
    """'3, 5-9, 12' for a sorted list of ints."""
    out = []
    start = prev = None
    for r in rows:
        if start is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    if start is not None:
        out.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def describe_rows(values, epochs):
    """'' when every value is exactly -epochs, else what differs, grouped by value.

    E.g. "rows 256-511: -3 (1 extra: trained twice); rows 40: -1 (1 missing)".
    """
    wrong = {}
    for r, v in enumerate(values):
        if v != -epochs:
            wrong.setdefault(v, []).append(r)
    parts = []
    for v in sorted(wrong, key=lambda v: wrong[v][0]):
        rows = wrong[v]
        times = -v
        if times == int(times):
            delta = int(times) - epochs
            why = (f"{delta} extra: trained {int(times)} times" if delta > 0 else
                   f"{-delta} missing: trained {int(times)} times")
        else:
            why = "not a whole number of trainings"
        parts.append(f"{len(rows)} row(s) {_ranges(rows)}: {v:g} ({why})")
    if not parts:
        return ""
    return (f"expected every row to be {-epochs} after {epochs} epoch(s); "
            + "; ".join(parts))


def check_rows(output_dir, num_records, epochs):
    """'' when the trained model in output_dir counts every record exactly epochs times.

    Otherwise a precise description: the rows that differ, their values and
    what those mean (records missed or trained more than once).
    """
    embeddings = os.path.join(output_dir, "embeddings")
    if os.path.isdir(embeddings):
        # The embedding model: row r of table "records", 0 where never trained.
        try:
            rows = read_embedding_rows(embeddings, "records")
        except (OSError, ValueError, StopIteration) as e:
            return f"cannot read the embedding rows in {embeddings}: {e!r}"
        stray = sorted(r for r in rows if not 0 <= r < num_records)
        if stray:
            return f"{embeddings}: rows outside 0..{num_records - 1}: {stray[:10]}"
        return describe_rows([rows.get(r, [0.0])[0] for r in range(num_records)], epochs)
    path = os.path.join(output_dir, "parameters.pb")
    try:
        _, parameters = read_model_values(path)
    except (OSError, ValueError) as e:
        return f"cannot read {path}: {e}"
    if "rows" not in parameters:
        return f"{path} has no parameter 'rows' (has {sorted(parameters)})"
    shape, values = parameters["rows"]
    if shape != [num_records, 1]:
        return f"{path}: 'rows' has shape {shape}, expected [{num_records}, 1]"
    return describe_rows(values, epochs)


METRIC_LINE = re.compile(r"^(\w+): (-?[0-9.]+|nan|-?inf) \(model version (\d+)\)$", re.M)


def expected_metrics(num_validation, epochs):
    """The exact metrics of the exactness model over validation ids 0..M-1 after E epochs."""
    m = num_validation
    return {
        "mean_id": (m - 1) / 2,
        "mean_id_squared": (m - 1) * (2 * m - 1) / 6,
        "mean_id_cubed": m * (m - 1) ** 2 / 4,
        "mean_prediction": float(-epochs),
    }


def parse_metrics(stdout):
    """{name: value} of the `name: value (model version V)` lines a job printed."""
    return {name: float(value) for name, value, _ in METRIC_LINE.findall(stdout)}


def check_metrics(stdout, num_validation, epochs):
    """'' when the printed metrics are exactly those of validation ids 0..M-1 after E epochs.

    The client prints six decimals; the expected values are multiples of 1/4,
    so the printed text must match to the last digit.
    """
    got = parse_metrics(stdout)
    want = expected_metrics(num_validation, epochs)
    problems = []
    for name, value in want.items():
        if name not in got:
            problems.append(f"{name}: missing")
        elif f"{got[name]:.6f}" != f"{value:.6f}":
            problems.append(f"{name}: {got[name]:.6f}, expected {value:.6f}")
    for name in sorted(set(got) - set(want)):
        problems.append(f"{name}: unexpected metric")
    return "; ".join(problems)


# -- the event log ---------------------------------------------------------------

def read_events(job_dir):
    """The objects of <job_dir>/events.jsonl, in order; [] while there is none.

    A last line still being written (no newline yet) is left out.
    """
    path = os.path.join(job_dir, "events.jsonl")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    events = []
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            events.append(json.loads(line))
    return events


def is_training(event):
    """Whether a task_dispatched event (or any event naming a type) is about a training task."""
    return str(event.get("type", "")).lower().startswith("train")


class Throttle:
    """Slows a process down, as a straggler: SIGSTOP, `stop_s` seconds, SIGCONT, `run_s`
    seconds, over and over on a thread, from `with` until its end (the process is left
    running) or the process's."""

    def __init__(self, pid, stop_s, run_s):
        self.pid, self.stop_s, self.run_s = pid, stop_s, run_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        stopped = False
        while not self._done.is_set():
            try:
                os.kill(self.pid, signal.SIGCONT if stopped else signal.SIGSTOP)
            except ProcessLookupError:
                return
            stopped = not stopped
            self._done.wait(self.stop_s if stopped else self.run_s)
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


class JobEnded(Exception):
    """The job ended while a test was waiting for one of its events."""


class EventLog:
    """Follows <job_dir>/events.jsonl while its job runs (see read_events).

    `events` holds every complete line read so far; poll() reads what was
    appended since. The state accessors below fold the events read so far.
    Not thread-safe.
    """

    def __init__(self, job_dir):
        self.path = os.path.join(job_dir, "events.jsonl")
        self.events = []
        self._offset = 0
        self._partial = b""
        self._types = {}  # task -> type, from its latest task_dispatched

    def poll(self):
        """Reads the lines appended since the last poll; returns their events."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        new = [json.loads(line) for line in lines if line.strip()]
        for e in new:
            if e.get("event") == "task_dispatched":
                self._types[e.get("task")] = str(e.get("type", ""))
        self.events.extend(new)
        return new

    def wait(self, predicate, timeout, what, alive=None):
        """The first event (old or new) satisfying predicate; see until()."""
        checked = [0]

        def find():
            for event in self.events[checked[0]:]:
                if predicate(event):
                    return event
            checked[0] = len(self.events)
            return None
        return self.until(find, timeout, what, alive)

    def until(self, condition, timeout, what, alive=None, poll_seconds=0.02):
        """Polls the log until condition() returns something truthy; returns that.

        Raises TimeoutError after timeout seconds, and JobEnded when alive()
        turns false first (after reading what the job wrote last). The
        messages name `what` and the last events read.
        """
        deadline = time.monotonic() + timeout
        while True:
            ended = alive is not None and not alive()
            self.poll()
            found = condition()
            if found:
                return found
            if ended:
                raise JobEnded(f"the job ended while waiting for {what}; {self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout} s; {self.tail()}")
            time.sleep(poll_seconds)

    def tail(self, n=8):
        if not self.events:
            return f"{self.path}: no events (is the event log implemented?)"
        return "last events:\n" + "\n".join(json.dumps(e) for e in self.events[-n:])

    def of(self, kind, **fields):
        """The events read so far of this kind whose fields equal `fields`."""
        return [e for e in self.events
                if e.get("event") == kind and all(e.get(k) == v for k, v in fields.items())]

    def live_workers(self):
        """{worker: pid} of workers started and neither lost nor gone since."""
        live = {}
        for e in self.events:
            kind = e.get("event")
            if kind == "worker_started":
                live[e["worker"]] = e["pid"]
            elif kind in ("worker_lost", "worker_left"):
                live.pop(e["worker"], None)
        return live

    def live_ps(self):
        """{ps: pid} of parameter servers started and not lost since."""
        live = {}
        for e in self.events:
            kind = e.get("event")
            if kind == "ps_started":
                live[e["ps"]] = e["pid"]
            elif kind == "ps_lost":
                live.pop(e["ps"], None)
        return live

    def master_pid(self):
        """The pid of the latest master_started, or None."""
        started = self.of("master_started")
        return started[-1]["pid"] if started else None

    def holders(self):
        """{worker: task_dispatched event} of the training task each worker is inside.

        A task handed out ahead (`ahead_of`) waits behind the one it was handed out
        ahead of; the worker is inside it from when that one's end was recorded (it
        begins it about then), which is then its `t`.
        A worker lost or gone holds nothing any more, nor one whose attempt another
        attempt of the task overtook (backups: task_done's `overtook`).
        """
        current, queued = {}, {}
        for e in self.events:
            kind = e.get("event")
            if kind == "task_dispatched":
                worker = e["worker"]
                if ("ahead_of" in e and
                        current.get(worker, {}).get("task") == e["ahead_of"]):
                    queued[worker] = e
                else:
                    current[worker] = e
                    queued.pop(worker, None)
            elif kind in ("task_done", "task_stopped"):
                for worker in [e["worker"]] + e.get("overtook", []):
                    # A task handed out ahead may be handed back before it begins.
                    if queued.get(worker, {}).get("task") == e["task"]:
                        del queued[worker]
                    if current.get(worker, {}).get("task") != e["task"]:
                        continue
                    del current[worker]
                    if worker in queued:
                        current[worker] = dict(queued.pop(worker), t=e["t"])
            elif kind in ("worker_lost", "worker_left"):
                current.pop(e["worker"], None)
                queued.pop(e["worker"], None)
        return {worker: e for worker, e in current.items() if is_training(e)}

    def task_type(self, task):
        """The type of a task, from the latest task_dispatched of it read so far ("" if none)."""
        return self._types.get(task, "")

    def is_training_task(self, event):
        """Whether an event (task_done, which may not name its type) is about a training task."""
        if "type" in event:
            return is_training(event)
        return self.task_type(event.get("task")).lower().startswith("train")

    def training_done(self, after=None):
        """How many training task_done events were read (with t >= after, if given)."""
        return sum(1 for e in self.of("task_done")
                   if self.is_training_task(e) and (after is None or e["t"] >= after))
