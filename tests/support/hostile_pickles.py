"""Hand-made pickle streams and torch files for the hostile-dump tests.

The opcodes and ``op_*`` builders write a pickle stream byte by byte; the dump
contents are a benign traced sample (which must always load) and a hostile one
with a slot (``HOSTILE``) where a test puts its payload; the writers wrap a stream
as a torch zip, torch's legacy non-zip file or its pre-0.4 tar. ``benign_spans``
tells whether the benign sample came through, ``dag`` builds a value of 2**depth
leaves in a few hundred pickled bytes and ``time_limit`` turns a hang into a
failure.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import signal
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

from slime_trace_widget.frames import TraceFrames

# --------------------------------------------------------------------------- pickle opcodes

PROTO2, STOP, MARK, TUPLE, TUPLE2 = b"\x80\x02", b".", b"(", b"t", b"\x86"
EMPTY_DICT, EMPTY_LIST, NONE, NEWTRUE, NEWFALSE = b"}", b"]", b"N", b"\x88", b"\x89"
SETITEM, SETITEMS, APPENDS, REDUCE, BUILD, BINPERSID = b"s", b"u", b"e", b"R", b"b", b"Q"
HOSTILE = object()  # where a template takes the vector's opcodes


def op_text(value: str) -> bytes:
    """BINUNICODE: a str whatever protocol the stream claims."""
    data = value.encode()
    return b"X" + len(data).to_bytes(4, "little") + data


def op_global(module: str, name: str) -> bytes:
    """GLOBAL, the protocol-0 form every unpickler accepts."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def op_stack_global(module: str, name: str) -> bytes:
    """STACK_GLOBAL (protocol 4), names pushed as SHORT_BINUNICODE."""
    return b"".join(b"\x8c" + bytes([len(part)]) + part.encode() for part in (module, name)
                    ) + b"\x93"


def op_call(func: bytes, *args: bytes) -> bytes:
    """``func(*args)`` as REDUCE."""
    return func + MARK + b"".join(args) + TUPLE + REDUCE


def op_value(value: object) -> bytes:
    """A plain value as opcodes (its memo puts are never read back)."""
    return pickle.dumps(value, protocol=2)[2:-1]


def op_tree(template: object, hostile: bytes) -> bytes:
    """Opcodes for a dict/list template, with ``hostile`` wherever it holds HOSTILE."""
    if template is HOSTILE:
        return hostile
    if isinstance(template, dict):
        items = b"".join(op_tree(k, hostile) + op_tree(v, hostile) for k, v in template.items())
        return EMPTY_DICT + (MARK + items + SETITEMS if items else b"")
    if isinstance(template, list):
        items = b"".join(op_tree(v, hostile) for v in template)
        return EMPTY_LIST + (MARK + items + APPENDS if items else b"")
    return op_value(template)


class Reduce:
    """Pickles as ``func(*args)``, the way a malicious object's ``__reduce__`` does."""

    def __init__(self, func: Callable, *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple:
        return (self.func, self.args)


# --------------------------------------------------------------------------- dump contents


def record(kind: str, name: object, ts: float, span_id: str | None = None,
           parent: str | None = None, attrs: object = None) -> dict:
    out: dict = {"type": kind, "name": name, "ts": 1_700_000_000.0 + ts, "trace_id": "t",
                 "attempt": 0}
    if span_id is not None:
        out["span_id"] = span_id
    if parent is not None:
        out["parent_span_id"] = parent
    if attrs is not None:
        out["attrs"] = attrs
    return out


BENIGN_SPANS = {"benign_generate", "benign_reward"}


def benign_sample() -> dict:
    """The sample every hostile file also holds; it must load."""
    events = [record("span_start", "benign_generate", 0.0, "b1"),
              record("span_start", "benign_reward", 1.0, "b2", parent="b1"),
              record("span_end", "benign_reward", 2.0, "b2", attrs={"score": 1.0}),
              record("span_end", "benign_generate", 3.0, "b1")]
    return {"index": 0, "group_index": 0, "status": "completed", "reward": 1.0,
            "metadata": {"source": "math"}, "trace": {"version": 1, "trace_id": "b" * 32,
                                                     "attempt": 0, "events": events}}


def hostile_sample(where: str) -> dict:
    """A traced sample with HOSTILE at ``where`` (or nowhere for ``"none"``)."""
    start = record("span_start", "hostile_span", 10.0, "h1",
                   attrs={"payload": HOSTILE} if where == "span_start_attrs" else None)
    event = record("event", HOSTILE if where == "event_name" else "hostile_event", 10.5,
                   attrs={"deep": [{"payload": HOSTILE}]} if where == "event_attrs" else None)
    end = record("span_end", "hostile_span", 11.0, "h1",
                 attrs={"payload": HOSTILE, "ok": 1} if where == "span_end_attrs" else None)
    fields: dict = {"index": 1, "group_index": 0, "status": "completed", "reward": 0.5,
                    "label": "x", "metadata": {"source": "code"}}
    for name in ("label", "reward", "status", "group_index"):
        if where == name:
            fields[name] = HOSTILE
    if where == "metadata":
        fields["metadata"] = {"source": "code", "extra": HOSTILE}
    trace = {"version": 1, "trace_id": HOSTILE if where == "trace_id" else "h" * 32,
             "attempt": 0, "events": [start, event, end]}
    return {**fields, "trace": trace}


def dump_template(where: str) -> dict:
    return {"rollout_id": HOSTILE if where == "rollout_id" else 7,
            "samples": [benign_sample(), hostile_sample(where)]}


def dump_stream(hostile: bytes, where: str) -> bytes:
    """The whole data.pkl: the dump dict with the vector at ``where``."""
    return PROTO2 + op_tree(dump_template(where), hostile) + STOP


# --------------------------------------------------------------------------- file writers

TENSOR_BASE = {"samples": [{"t": torch.arange(3.0)}]}  # gives the zip a data/0 storage
STORAGE_PID = (MARK + op_text("storage") + op_global("torch", "FloatStorage") + op_text("0")
               + op_text("cpu") + b"K\x03" + TUPLE + BINPERSID)


def write_zip(path: Path, stream: bytes) -> None:
    """A valid torch zip (written by torch.save) with its data.pkl replaced by ``stream``."""
    buffer = io.BytesIO()
    torch.save(TENSOR_BASE, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            target.writestr(info.filename,
                            stream if info.filename.endswith("/data.pkl") else data)


def write_legacy(path: Path, stream: bytes, sys_info_extra: bytes = NONE) -> None:
    """torch's non-zip format by hand: magic, protocol, sys_info, data, storage keys."""
    sys_info = (PROTO2 + EMPTY_DICT + MARK + op_text("protocol_version")
                + op_value(PROTOCOL_VERSION) + op_text("little_endian") + NEWTRUE
                + op_text("note") + sys_info_extra + SETITEMS + STOP)
    path.write_bytes(pickle.dumps(MAGIC_NUMBER, 2) + pickle.dumps(PROTOCOL_VERSION, 2)
                     + sys_info + stream + pickle.dumps([], 2))


def write_tar(path: Path, stream: bytes) -> None:
    """torch's pre-0.4 tar format: storages, tensors and the pickle as members."""
    members = {"storages": pickle.dumps(0, 2) + pickle.dumps([], 2),
               "tensors": pickle.dumps(0, 2), "pickle": stream}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


# --------------------------------------------------------------------------- checks and guards


def benign_spans(frames: TraceFrames) -> set[str]:
    spans = frames.spans
    row = frames.samples.index[frames.samples["sample_index"] == 0]
    return set(spans.loc[spans["sample_row"].isin(row), "name"].astype(str))


def dag(depth: int) -> list:
    """A list of lists sharing each half: pickled in a few hundred bytes, 2**depth leaves."""
    node: list = [0]
    for _ in range(depth):
        node = [node, node]
    return node


class _TimeUp(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """SIGALRM guard so a regression fails instead of hanging the suite."""

    def expire(signum: int, frame: object) -> None:
        raise _TimeUp(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- loading apart

#: Loads a dump with the safe loader (worker and in-process) and shows its samples, as a
#: notebook would, a line per way: ``REFUSED <isolate> <error>`` or ``LOADED <isolate>
#: <repr of the samples>``. A crash shows as the return code.
TOUCH = """
import sys
from slime_trace_widget import DumpError
from slime_trace_widget.sources.loading import load_dump
for isolate in (True, False):
    try:
        dump = load_dump(sys.argv[1], isolate=isolate)
    except DumpError as exc:
        print("REFUSED", isolate, exc, flush=True)
        continue
    print("LOADED", isolate, repr(dump.samples)[:2000], flush=True)
"""
_ROOT = Path(__file__).resolve().parents[2]


def touched(path: Path, outcome: str) -> list[str]:
    """:data:`TOUCH`'s two lines for ``path``, run in a fresh interpreter, so this process
    survives a file that crashes the loader on any code (the timeout is a hang guard,
    generous); the caller must survive it, and both ways end in ``outcome``
    (``"LOADED"`` or ``"REFUSED"``)."""
    env = dict(os.environ, PYTHONPATH=str(_ROOT), PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run([sys.executable, "-c", TOUCH, str(path)], capture_output=True,
                         text=True, timeout=600, env=env, cwd=_ROOT)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"the caller died (return code {run.returncode}):\n{output}"
    lines = run.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[outcome, "True"], [outcome, "False"]], \
        output
    return lines
