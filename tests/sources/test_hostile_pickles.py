"""Hostile ``.pt`` files through every way a user opens one.

Each vector is a file that runs code when unpickled without restriction: it
creates a marker file. Every file also holds a benign traced sample. Each
vector goes through the three entry points, ``load_dump`` (plus the
flattening), ``TraceTimeline.from_dump`` and the CLI in a subprocess, and must
leave no marker behind; where the loader reads the file (rather than refusing
it) the benign sample's spans must come through. ``test_every_vector_is_live``
loads every file once more with ``torch.load(weights_only=False)`` in a
subprocess and checks that each marker *does* appear there: a vector that
would not run anyway proves nothing.

tests/sources/test_dump.py already covers some payloads against ``load_dump`` alone
(os.system, eval, exec, Popen and partial in trace attrs, double BUILD on an
OrderedDict, BUILD on the Counter class, protocol-0 ``__import__`` chains); the
vectors here use other encodings, placements and containers, so the table
adds to those rather than repeating them.

The last section holds the findings of this pass that are not code execution
but still let a file reach outside the loader: a tar member that opens a FIFO
(hangs), terminal escapes echoed in error messages, exponential and quadratic
inputs.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import resource
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

from slime_trace_widget import DumpError, TraceTimeline
from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.tables.carrier import RecordColumns, read_carrier
from slime_trace_widget.view.details import span_detail

ROOT = Path(__file__).resolve().parents[2]

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


def shell_touch(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def python_touch(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


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


# --------------------------------------------------------------------------- the vectors


@dataclass(frozen=True)
class Vector:
    """One way to run code from a dump.

    ``build(path, marker)`` writes the dump (and any helper file beside it);
    ``refused``: the safe loader rejects the whole file with a DumpError
    rather than reading it with the payload inert; ``blocked``: a global the
    loader must list in ``blocked_globals`` when it reads the file.
    """

    name: str
    build: Callable[[Path, Path], None]
    refused: bool = False
    blocked: str | None = None


def zipped(where: str, hostile: Callable[[Path, Path], bytes]) -> Callable[[Path, Path], None]:
    """A builder writing a torch zip whose data.pkl holds ``hostile(path, marker)`` at ``where``."""
    return lambda path, marker: write_zip(path, dump_stream(hostile(path, marker), where))


def touch_with(module: str, name: str, *, stack: bool = False) -> Callable[[Path, Path], bytes]:
    """``module.name("touch <marker>")``."""
    func = op_stack_global(module, name) if stack else op_global(module, name)
    return lambda path, marker: op_call(func, op_text(shell_touch(marker)))


def run_python(module: str, name: str) -> Callable[[Path, Path], bytes]:
    """``module.name("<python that creates the marker>")`` (eval, exec)."""
    return lambda path, marker: op_call(op_global(module, name), op_text(python_touch(marker)))


def import_os(importer: bytes) -> bytes:
    return op_call(importer, op_text("os"))


def getattr_call(obj: bytes, attr: str, *args: bytes) -> bytes:
    return op_call(op_call(op_global("builtins", "getattr"), obj, op_text(attr)), *args)


def helper_script(path: Path, marker: Path) -> Path:
    """A .py file beside the dump that creates the marker when run or imported."""
    script = path.with_name(f"{path.stem}_helper.py")
    script.write_text(python_touch(marker) + "\n")
    return script


def inner_dump(path: Path, marker: Path) -> Path:
    """A second dump beside this one whose unpickling creates the marker."""
    inner = path.with_name(f"{path.stem}_inner.pt")
    torch.save({"samples": [Reduce(os.system, shell_touch(marker))]}, inner)
    return inner


def nested_torch_bytes(path: Path, marker: Path) -> bytes:
    buffer = io.BytesIO()
    torch.save(Reduce(os.system, shell_touch(marker)), buffer)
    return op_call(op_global("torch.storage", "_load_from_bytes"), op_value(buffer.getvalue()))


def double_build_counter(path: Path, marker: Path) -> bytes:
    """BUILD plants ``__setstate__ = exec`` in a Counter; the second BUILD would call it."""
    counter = op_call(op_global("collections", "Counter"))
    plant = EMPTY_DICT + op_text("__setstate__") + op_global("builtins", "exec") + SETITEM
    return counter + plant + BUILD + op_text(python_touch(marker)) + BUILD


def tensor_ops(hooks: bytes = b"", metadata: bytes = b"") -> bytes:
    """``_rebuild_tensor_v2(storage 0, 0, (3,), (1,), False, hooks[, metadata])``."""
    hooks = hooks or op_call(op_global("collections", "OrderedDict"))
    return op_call(op_global("torch._utils", "_rebuild_tensor_v2"), STORAGE_PID, op_value(0),
                   op_value((3,)), op_value((1,)), NEWFALSE, hooks, metadata)


def touch_call(marker: Path) -> bytes:
    return op_call(op_global("posix", "system"), op_text(shell_touch(marker)))


def tensor_hook(path: Path, marker: Path) -> bytes:
    hooks = op_call(op_global("collections", "OrderedDict"),
                    EMPTY_LIST + MARK + op_value(0) + touch_call(marker) + TUPLE2 + APPENDS)
    return tensor_ops(hooks=hooks)


def tensor_metadata(path: Path, marker: Path) -> bytes:
    return tensor_ops(metadata=EMPTY_DICT + op_text("note") + touch_call(marker) + SETITEM)


def rebuild_from_type_func(path: Path, marker: Path) -> bytes:
    return op_call(op_global("torch._tensor", "_rebuild_from_type_v2"),
                   op_global("posix", "system"), op_global("torch", "Tensor"),
                   MARK + op_text(shell_touch(marker)) + TUPLE, EMPTY_DICT)


def rebuild_from_type_state(path: Path, marker: Path) -> bytes:
    """Tensor state planting hooks and attributes, each holding a payload."""
    state = (EMPTY_DICT + MARK + op_text("_backward_hooks") + EMPTY_DICT + op_value(0)
             + touch_call(marker) + SETITEM + op_text("note") + touch_call(marker) + SETITEMS)
    args = (MARK + STORAGE_PID + op_value(0) + op_value((3,)) + op_value((1,)) + NEWFALSE
            + op_call(op_global("collections", "OrderedDict")) + TUPLE)
    return op_call(op_global("torch._tensor", "_rebuild_from_type_v2"),
                   op_global("torch._utils", "_rebuild_tensor_v2"),
                   op_global("torch", "Tensor"), args, state)


def storage_class_setstate(path: Path, marker: Path) -> bytes:
    """BUILD on the class torch.UntypedStorage plants __setstate__ for every instance; a
    BUILD on a new storage then calls it. (torch.Tensor has its own __setstate__, which
    BUILD on the class would call unbound, so the storage class is the one to poison.)"""
    storage = op_global("torch", "UntypedStorage")
    poison = (storage + NONE + EMPTY_DICT + op_text("__setstate__")
              + op_global("posix", "system") + SETITEM + TUPLE2 + BUILD + b"0")  # POP the class
    return poison + op_call(storage, op_value(3)) + op_text(shell_touch(marker)) + BUILD


def hostile_storage_type(path: Path, marker: Path) -> bytes:
    pid = (MARK + op_text("storage") + touch_call(marker) + op_text("0") + op_text("cpu")
           + b"K\x03" + TUPLE + BINPERSID)
    return op_call(op_global("torch._utils", "_rebuild_tensor_v2"), pid, op_value(0),
                   op_value((3,)), op_value((1,)), NEWFALSE,
                   op_call(op_global("collections", "OrderedDict")))


def legacy_saved(path: Path, marker: Path) -> None:
    """torch.save(..., _use_new_zipfile_serialization=False) of an object with __reduce__."""
    hostile = hostile_sample("none")
    hostile["trace"]["events"][2]["attrs"] = {"payload": Reduce(eval, python_touch(marker))}
    torch.save({"rollout_id": 7, "samples": [benign_sample(), hostile]}, path,
               _use_new_zipfile_serialization=False)


def legacy_sys_info(path: Path, marker: Path) -> None:
    write_legacy(path, dump_stream(b"", "none"), sys_info_extra=touch_call(marker))


def legacy_module_patch(path: Path, marker: Path) -> None:
    """A legacy ``module`` persistent id: torch diffs the 'source' against the class and
    writes ``<class __name__>.patch``. BUILD renames an allowed function to the marker
    path and sets ``dump_patches``, so torch writes ``<marker>.patch``."""
    renamed = (op_global("copyreg", "_reconstructor") + NONE + EMPTY_DICT + MARK
               + op_text("dump_patches") + NEWTRUE + op_text("__name__") + op_text(str(marker))
               + SETITEMS + TUPLE2 + BUILD)
    pid = (MARK + op_text("module") + renamed + op_text("evil.py") + op_text("x = 1\n")
           + TUPLE + BINPERSID)
    write_legacy(path, dump_stream(pid, "metadata"))


def legacy_tar(path: Path, marker: Path) -> None:
    write_tar(path, dump_stream(touch_call(marker), "span_end_attrs"))


VECTORS: list[Vector] = [
    Vector("os.system via protocol-0 GLOBAL in span end attrs",
           zipped("span_end_attrs", touch_with("os", "system")), blocked="os.system"),
    Vector("posix.system via STACK_GLOBAL in sample metadata",
           zipped("metadata", touch_with("posix", "system", stack=True)),
           blocked="posix.system"),
    Vector("builtins.eval named __builtin__.eval in instant event attrs",
           zipped("event_attrs", run_python("__builtin__", "eval")), blocked="builtins.eval"),
    Vector("builtins.exec in the carrier's trace_id",
           zipped("trace_id", run_python("builtins", "exec")), blocked="builtins.exec"),
    Vector("builtins.__import__ + getattr in the top-level rollout_id",
           zipped("rollout_id", lambda p, m: getattr_call(
               import_os(op_global("builtins", "__import__")), "system",
               op_text(shell_touch(m)))), blocked="builtins.__import__"),
    Vector("subprocess.Popen in the sample label",
           zipped("label", lambda p, m: op_call(op_global("subprocess", "Popen"),
                                                op_value(["touch", str(m)]))),
           blocked="subprocess.Popen"),
    Vector("subprocess.run in the sample status",
           zipped("status", lambda p, m: op_call(op_global("subprocess", "run"),
                                                 op_value(["touch", str(m)]))),
           blocked="subprocess.run"),
    Vector("importlib.import_module + operator.attrgetter in the reward",
           zipped("reward", lambda p, m: op_call(op_call(
               op_call(op_global("operator", "attrgetter"), op_text("system")),
               import_os(op_global("importlib", "import_module"))), op_text(shell_touch(m)))),
           blocked="operator.attrgetter"),
    Vector("operator.methodcaller in span start attrs",
           zipped("span_start_attrs", lambda p, m: op_call(
               op_call(op_global("operator", "methodcaller"), op_text("system"),
                       op_text(shell_touch(m))),
               import_os(op_global("importlib", "import_module")))),
           blocked="operator.methodcaller"),
    Vector("functools.partial(os.system, ...)() as an event name",
           zipped("event_name", lambda p, m: op_call(op_call(
               op_global("functools", "partial"), op_global("os", "system"),
               op_text(shell_touch(m))))), blocked="functools.partial"),
    Vector("pickle.loads of an inner pickle in group_index",
           zipped("group_index", lambda p, m: op_call(
               op_global("pickle", "loads"),
               op_value(pickle.dumps(Reduce(os.system, shell_touch(m)), 2)))),
           blocked="pickle.loads"),
    Vector("torch.storage._load_from_bytes (nested torch.load) in span end attrs",
           zipped("span_end_attrs", nested_torch_bytes),
           blocked="torch.storage._load_from_bytes"),
    Vector("torch.serialization.load of a second file with pickle_module in metadata",
           zipped("metadata", lambda p, m: op_call(
               op_global("torch.serialization", "load"), op_text(str(inner_dump(p, m))),
               op_text("cpu"), op_call(op_global("importlib", "import_module"),
                                       op_text("pickle")))),
           blocked="torch.serialization.load"),
    Vector("torch._utils._import_dotted_name + getattr in metadata",
           zipped("metadata", lambda p, m: getattr_call(
               import_os(op_global("torch._utils", "_import_dotted_name")), "system",
               op_text(shell_touch(m)))), blocked="torch._utils._import_dotted_name"),
    Vector("torch.hub._import_module runs a .py file, in event attrs",
           zipped("event_attrs", lambda p, m: op_call(
               op_global("torch.hub", "_import_module"), op_text("stw_hostile_helper"),
               op_text(str(helper_script(p, m))))), blocked="torch.hub._import_module"),
    Vector("runpy.run_path runs a .py file, in the sample label",
           zipped("label", lambda p, m: op_call(op_global("runpy", "run_path"),
                                                op_text(str(helper_script(p, m))))),
           blocked="runpy.run_path"),
    Vector("double BUILD on a Counter instance (__setstate__ = exec) in metadata",
           zipped("metadata", double_build_counter), blocked="builtins.exec"),
    Vector("backward hook in _rebuild_tensor_v2, tensor in metadata",
           zipped("metadata", tensor_hook), blocked="posix.system"),
    Vector("_rebuild_tensor_v2 metadata dict holding a payload",
           zipped("metadata", tensor_metadata), refused=True),
    Vector("_rebuild_from_type_v2 with posix.system as the rebuild function",
           zipped("metadata", rebuild_from_type_func), blocked="posix.system"),
    Vector("_rebuild_from_type_v2 state planting _backward_hooks and attributes",
           zipped("metadata", rebuild_from_type_state), blocked="posix.system"),
    Vector("BUILD on the torch.UntypedStorage class, then BUILD on a storage",
           zipped("metadata", storage_class_setstate), refused=True),
    Vector("payload as the storage type of a persistent id",
           zipped("metadata", hostile_storage_type), refused=True),
    Vector("legacy non-zip file from torch.save, eval in span end attrs",
           legacy_saved, blocked="builtins.eval"),
    Vector("legacy non-zip file, payload in the sys_info header pickle",
           legacy_sys_info, blocked="posix.system"),
    Vector("legacy module persistent id makes torch write <name>.patch",
           legacy_module_patch),
    Vector("torch's pre-0.4 tar format, payload in the pickle member",
           legacy_tar, refused=True),
]

#: How many vectors this file tries (reported by the adversarial pass).
VECTORS_TRIED = len(VECTORS)
VECTOR_IDS = [v.name for v in VECTORS]


def test_vector_count() -> None:
    assert VECTORS_TRIED >= 12
    assert len(set(VECTOR_IDS)) == VECTORS_TRIED
    print(f"\nhostile pickle vectors tried: {VECTORS_TRIED}")


def side_effects(marker: Path) -> list[Path]:
    """What a vector leaves when it ran: its marker, or torch's ``<marker>.patch``."""
    return [p for p in (marker, Path(f"{marker}.patch")) if p.exists()]


def build_all(folder: Path, marker_folder: Path) -> dict[str, tuple[Path, Path]]:
    """Every vector's dump (and helpers) in its own subfolder: name -> (dump, marker)."""
    marker_folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for number, vector in enumerate(VECTORS):
        home = folder / f"v{number:02d}"
        home.mkdir(parents=True)
        path, marker = home / "rollout_7.pt", marker_folder / f"v{number:02d}"
        vector.build(path, marker)
        files[vector.name] = (path, marker)
    return files


# --------------------------------------------------------------------------- CLI runs


def run_cli(path: Path, out_dir: Path, cwd: Path) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "slime_trace_widget", str(path), "--no-serve",
         "--out-dir", str(out_dir)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("hostile")
    return build_all(base / "dumps", base / "markers")


@pytest.fixture(scope="module")
def cli_results(hostile_files: dict[str, tuple[Path, Path]],
                tmp_path_factory: pytest.TempPathFactory,
                ) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """The CLI on every vector, a few processes at a time (each imports torch)."""
    base = tmp_path_factory.mktemp("cli")

    def one(item: tuple[int, str]) -> tuple[str, tuple[subprocess.CompletedProcess, Path]]:
        number, name = item
        cwd = base / f"cwd{number:02d}"
        return name, (run_cli(hostile_files[name][0], base / f"out{number:02d}", cwd), cwd)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(one, enumerate(VECTOR_IDS)))


LIVE_RUNNER = """
import os, signal, sys, warnings
import torch
warnings.simplefilter("ignore")
for path in sys.argv[1:]:
    child = os.fork()
    if child == 0:
        signal.alarm(60)
        try:
            torch.load(path, map_location="cpu", weights_only=False)
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(child, 0)
"""


@pytest.fixture(scope="module")
def live_markers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Each vector loaded with torch's full unpickler (in a forked child each): what it left."""
    base = tmp_path_factory.mktemp("live")
    files = build_all(base / "dumps", base / "markers")
    subprocess.run([sys.executable, "-c", LIVE_RUNNER, *(str(p) for p, _ in files.values())],
                   capture_output=True, timeout=600, cwd=base, check=True)
    deadline = time.monotonic() + 10  # Popen'd children may still be running
    while time.monotonic() < deadline and not all(side_effects(m) for _, m in files.values()):
        time.sleep(0.1)
    return {name: side_effects(marker) for name, (_, marker) in files.items()}


# --------------------------------------------------------------------------- the table


def benign_spans(frames: TraceFrames) -> set[str]:
    spans = frames.spans
    row = frames.samples.index[frames.samples["sample_index"] == 0]
    return set(spans.loc[spans["sample_row"].isin(row), "name"].astype(str))


def assert_read_inertly(vector: Vector, path: Path) -> None:
    """load_dump + flattening + a detail for every span: benign spans survive."""
    dump = load_dump(path)
    if vector.blocked:
        assert vector.blocked in dump.blocked_globals
    frames = build_frames(dump)
    assert benign_spans(frames) == BENIGN_SPANS
    for index in frames.span_core.index:
        span_detail(frames, index)
    assert benign_spans(load_frames(path)) == BENIGN_SPANS


@pytest.mark.parametrize("name", VECTOR_IDS)
def test_vector_runs_nothing_through_any_entry_point(
    name: str, hostile_files: dict[str, tuple[Path, Path]],
    cli_results: dict[str, tuple[subprocess.CompletedProcess, Path]],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    vector = next(v for v in VECTORS if v.name == name)
    path, marker = hostile_files[name]
    classes = {cls: dict(vars(cls)) for cls in (torch.Tensor, torch.UntypedStorage)}
    monkeypatch.chdir(tmp_path)  # anything written relative to the working directory shows

    if vector.refused:
        with pytest.raises(DumpError) as info:
            load_dump(path)
        assert "\n" not in str(info.value)
        with pytest.raises(DumpError):
            TraceTimeline.from_dump(path)
    else:
        assert_read_inertly(vector, path)
        widget = TraceTimeline.from_dump(path)
        assert benign_spans(widget.frames) == BENIGN_SPANS
        assert widget.payload["meta"]["n_samples_total"] == 2

    result, cli_cwd = cli_results[name]
    assert result.returncode == (2 if vector.refused else 0), result.stderr
    assert "Traceback" not in result.stderr
    if vector.refused:
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("slime-trace-viewer: ") and str(path) in line
    assert list(cli_cwd.iterdir()) == []

    assert side_effects(marker) == []
    assert list(tmp_path.iterdir()) == []
    assert {cls: dict(vars(cls)) for cls in classes} == classes


@pytest.mark.parametrize("name", VECTOR_IDS)
def test_every_vector_is_live(name: str, live_markers: dict[str, list[Path]]) -> None:
    """Without the restriction each file does run its payload (so the test above means it)."""
    assert live_markers[name], f"{name}: the payload did not run under plain torch.load"


# --------------------------------------------------------------------------- other findings


def test_tar_member_symlinked_to_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """torch extracts a tar's ``storages`` member and opens it; as a symlink to a FIFO that
    open never returns. The loader must refuse the tar before torch touches it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = tmp_path / "rollout_1.pt"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("storages")
        info.type, info.linkname = tarfile.SYMTYPE, str(fifo)
        tar.addfile(info)
    opened = threading.Event()
    done = threading.Event()

    def watch() -> None:
        # A write end opens without blocking only while someone reads: that is the loader.
        while not done.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                opened.set()
                return
            except OSError:
                time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(DumpError, match="tar archive"):
            load_dump(path)
    finally:
        done.set()
        watcher.join()
    assert not opened.is_set()


def test_error_messages_escape_terminal_control_characters(tmp_path: Path) -> None:
    """torch quotes a bad ``byteorder`` record in its error; the DumpError (printed by
    the CLI) must not carry the file's escape sequences to the terminal."""
    path = tmp_path / "rollout_1.pt"
    buffer = io.BytesIO()
    torch.save({"samples": []}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            evil = "\x1b]0;owned\x07\x1b[2J\x9b31m".encode()
            target.writestr(info.filename, evil if info.filename.endswith("/byteorder") else data)
    with pytest.raises(DumpError) as info:
        load_dump(path)
    message = str(info.value)
    assert message.isprintable() and "\\x1b" in message


def test_keys_of_a_dict_without_samples_are_shown_safely(tmp_path: Path) -> None:
    """The error lists the top-level keys; a 5,000-digit int key made ``repr`` raise."""
    path = tmp_path / "rollout_1.pt"
    torch.save({10**5000: 1, "a\x1bb": 2}, path)
    with pytest.raises(DumpError, match="no 'samples' key") as info:
        load_dump(path)
    assert str(info.value).isprintable() and "bits" in str(info.value)


def test_huge_rollout_ids_fall_back_to_the_file_name(tmp_path: Path) -> None:
    """An id past int64 (in the dict or the file name) broke the Int64 samples column."""
    path = tmp_path / "rollout_3.pt"
    torch.save({"rollout_id": 2**70, "samples": [benign_sample()]}, path)
    assert load_dump(path).rollout_id == 3
    named = tmp_path / f"rollout_{10**30}.pt"
    torch.save([benign_sample()], named)
    assert load_dump(named).rollout_id is None
    assert load_frames(named).samples["rollout_id"].isna().all()


def test_placeholder_repr_stays_short_for_huge_arguments(tmp_path: Path) -> None:
    """A placeholder's repr is built each time it is shown: a 10 MB string argument is
    cut before repr, and a 5,000-digit int (whose repr raises) is summarised."""
    path = tmp_path / "rollout_1.pt"
    payload = Reduce(os.system, "x" * 10_000_000, 10**5000)
    sample = hostile_sample("none")
    sample["trace"]["events"][2]["attrs"] = {"payload": payload}
    torch.save([sample], path)
    (loaded,) = load_dump(path).samples
    text = repr(loaded["trace"]["events"][2]["attrs"]["payload"])
    assert len(text) < 200 and "system" in text


def dag(depth: int) -> list:
    """A list of lists sharing each half: pickled in a few hundred bytes, 2**depth leaves."""
    node: list = [0]
    for _ in range(depth):
        node = [node, node]
    return node


@pytest.mark.parametrize("where", ["attrs", "name", "span_id", "source", "status", "label",
                                   "reward", "trace_id", "attr_key"])
def test_shared_reference_bombs_stay_bounded(tmp_path: Path, where: str) -> None:
    """A 2**60-leaf value (a few hundred bytes pickled) in any field: str(), repr() and the
    value converters used to expand it; everything must stay bounded."""
    bomb: object = dag(60)
    sample = hostile_sample("none")
    start, _, end = sample["trace"]["events"]
    targets = {"attrs": (end, "attrs", {"bomb": bomb}), "name": (start, "name", bomb),
               "span_id": (end, "span_id", bomb), "source": (sample["metadata"], "source", bomb),
               "status": (sample, "status", bomb), "label": (sample, "label", bomb),
               "reward": (sample, "reward", {"parts": bomb}),
               "trace_id": (sample["trace"], "trace_id", bomb),
               "attr_key": (end, "attrs", {frozenset({"k"}): bomb})}
    holder, key, value = targets[where]
    holder[key] = value
    path = tmp_path / "rollout_1.pt"
    torch.save([benign_sample(), sample], path)
    with time_limit(60):
        frames = load_frames(path)
        assert len(frames.spans) == 3
        for index in frames.span_core.index:
            span_detail(frames, index)
        TraceTimeline(frames).to_html(tmp_path / "page.html")
    assert benign_spans(frames) == BENIGN_SPANS


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


def chain_records(n: int) -> list[dict]:
    """A chain of ``n`` closed spans, each inside the previous one."""
    starts = [record("span_start", "link", float(i), f"s{i}", parent=f"s{i - 1}" if i else None)
              for i in range(n)]
    return starts + [record("span_end", "link", float(2 * n - i), f"s{i}") for i in range(n)]


@pytest.mark.parametrize("bomb", [
    b"N" + b"r" + (2**26).to_bytes(4, "little"),  # LONG_BINPUT: the memo grows to 2**27 slots
    op_call(op_global("builtins", "list"),
            op_call(op_global("builtins", "range"), op_value(3 * 10**7))),
], ids=["memo index", "list(range)"])
def test_memory_bombs_fail_within_the_budget(tmp_path: Path, bomb: bytes) -> None:
    """A few bytes asking for gigabytes (a 2**30 memo index zero-fills 16 GiB: the fuzzer's
    mutations of small.pt got the test process OOM-killed) fail as a DumpError in the
    rehearsal child, whose cap is lowered so these 1 GB versions show it without needing
    the real sizes. This process's own limits are never touched."""
    limits = resource.getrlimit(resource.RLIMIT_DATA)
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(bomb, "metadata"))
    with pytest.raises(DumpError, match="memory"):
        load_dump(path, memory_limit=256 << 20)
    assert resource.getrlimit(resource.RLIMIT_DATA) == limits
    benign = tmp_path / "rollout_2.pt"
    write_zip(benign, dump_stream(NONE, "metadata"))
    assert benign_spans(load_frames(benign)) == BENIGN_SPANS


@pytest.mark.parametrize("where", ["span_end_attrs", "metadata", "label", "event_name"])
def test_deeply_nested_values_stay_bounded(tmp_path: Path, where: str) -> None:
    """A list nested 200,000 deep (pickle builds it without recursion; torch.save could
    not write it): every converter stops at a fixed depth, nothing recurses into it."""
    n = 200_000
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(EMPTY_LIST * n + b"a" * (n - 1), where))
    with time_limit(60):
        widget = TraceTimeline.from_dump(path)
        frames = widget.frames
        assert len(frames.spans) == 3 and len(frames.events) == 1
        for index in frames.span_core.index:
            span_detail(frames, index)
        widget.to_html(tmp_path / "page.html")
    assert benign_spans(frames) == BENIGN_SPANS


def read_within_a_minute(records: list[dict]) -> RecordColumns:
    out = RecordColumns()
    with time_limit(60):
        read_carrier(0, records, out)
    return out


def test_late_parents_on_a_long_chain_are_linear() -> None:
    """Spans whose parent is recorded later were each checked for a cycle by walking to
    the root: a long chain plus many such spans was quadratic (16 s for 20k, before; about
    2 minutes for these 60k, 0.3 s now)."""
    n = 60_000
    chain = [record("span_start", "link", float(i), f"c{i}", parent=f"c{i - 1}" if i else None)
             for i in range(n)]
    late = [record("span_start", "leaf", float(n), f"l{i}", parent=f"c{n - 1}")
            for i in range(n)]
    out = read_within_a_minute(chain[:-1] + late + chain[-1:])
    assert sum(parent >= 0 for parent in out.span_parent) == 2 * n - 1
    assert "parent_cycle" not in out.warnings


def test_parent_inference_scan_is_bounded() -> None:
    """Thousands of open spans that all begin after an instant event made inference scan
    every one of them for every event (15 s for 20k, before; about 2 minutes for these
    60k, 1.4 s now)."""
    n = 60_000
    opens = [record("span_start", "late", 100.0, f"o{i}") for i in range(n)]
    early = [record("event", "early", 1.0) for _ in range(n)]
    out = read_within_a_minute(opens + early)
    assert set(out.event_parent) == {-1}


def test_deferred_cycle_is_still_cut_at_the_guess() -> None:
    """The union-find keeps the old rule: a cycle is cut at an inferred link."""
    records = [record("span_start", "a", 0.0, "a", parent="c"),
               record("span_start", "b", 1.0, "b"),  # parent inferred: a
               record("span_start", "c", 2.0, "c", parent="b")]
    out = read_within_a_minute(records)
    assert out.span_parent_id == ["c", None, "b"]
    assert out.span_parent == [2, -1, 1]
    assert out.warnings["parent_cycle"] == 1


def test_recorded_cycle_is_cut_at_the_link_that_closes_it() -> None:
    records = [record("span_start", "a", 0.0, "a", parent="b"),
               record("span_start", "b", 1.0, "b", parent="a")]
    out = read_within_a_minute(records)
    assert out.span_parent == [-1, 0] and out.warnings["parent_cycle"] == 1


# The quadratic-input tests below size their input so the old quadratic code would run
# for minutes (past the 60 s guard) while the linear code takes about a second.


def test_deep_chain_depths_are_linear() -> None:
    """Depths were found by one array pass per level: O(n * depth), 7 s for 60k links,
    so about 2 minutes for this chain (2 s now)."""
    n = 240_000
    sample = {"index": 0, "trace": {"events": chain_records(n)}}
    with time_limit(60):
        frames = build_frames([sample])
    assert frames.span_core["depth"].max() == n - 1


def test_many_open_spans_display_ends_are_linear() -> None:
    """Each open span's clip scanned its whole row and walked its ancestors: 8 s for 10k,
    so about 2 minutes for these 40k (0.4 s now)."""
    n = 40_000
    records = [record("span_start", "open", float(i), f"o{i}") for i in range(n)]
    with time_limit(60):
        frames = build_frames([{"index": 0, "trace": {"events": records}}])
    assert (frames.span_core["state"] == "open").sum() == n


def test_huge_int_attribute_key_gets_a_column() -> None:
    """Columns were named with str(key), which raises for a 5,000-digit int."""
    sample = {"index": 0, "trace": {"events": [
        record("span_start", "a", 0.0, "a", attrs={10**5000: 1}),
        record("span_end", "a", 1.0, "a")]}}
    frames = build_frames([sample])
    assert len(frames.spans) == 1


def test_attribute_keys_that_share_one_hash_stay_linear() -> None:
    """Int keys hash alike in every process: 40,000 spans each with its own multiple of
    2**61 - 1 as a key made grouping rows by key quadratic (51 s); minutes for 120,000."""
    n = 120_000
    keys = [i * (2**61 - 1) for i in range(1, n + 1)]
    records = [record("span_start", "s", float(i), f"s{i}") for i in range(n)]
    records += [record("span_end", "s", float(n + i), f"s{i}", attrs={key: 1, "x": 2})
                for i, key in enumerate(keys)]
    frames = build_frames([{"index": 0, "trace": {"events": records}}])
    with time_limit(60):
        spans = frames.spans
    assert spans["attr.x"].eq(2).all()
    assert spans[f"attr.{keys[0]}"].iloc[0] == 1
