"""Hostile ``.pt`` files through every way a user opens one: code execution.

Each vector is a file that runs code when unpickled without restriction: it
creates a marker file. Every file also holds a benign traced sample. Each
vector goes through the three entry points, ``load_dump`` (plus the
flattening), ``TraceTimeline.from_dump`` and the CLI in a subprocess, and must
leave no marker behind; where the loader reads the file (rather than refusing
it) the benign sample's spans must come through. ``test_every_vector_is_live``
loads every file once more with ``torch.load(weights_only=False)`` in a
subprocess and checks that each marker *does* appear there: a vector that
would not run anyway proves nothing.

tests/sources/test_dump_hostile.py already covers some payloads against ``load_dump``
alone (os.system, eval, exec, Popen and partial in trace attrs, double BUILD on an
OrderedDict, BUILD on the Counter class, protocol-0 ``__import__`` chains); the
vectors here use other encodings, placements and containers, so the table
adds to those rather than repeating them.

The findings of this pass that are not code execution but still let a file reach
outside the loader have files of their own: test_hostile_outside_loader.py (a tar
member that opens a FIFO, terminal escapes echoed in error messages, values too
big to show), test_hostile_bombs.py (exponential, huge and deep values) and
test_hostile_trace_shapes.py (quadratic trace shapes). The pickle builders and
file writers they share are in tests/support/hostile_pickles.py.
"""

from __future__ import annotations

import io
import os
import pickle
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from slime_trace_widget import DumpError, TraceTimeline
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.view.details import span_detail
from tests.support.hostile_pickles import (
    APPENDS,
    BENIGN_SPANS,
    BINPERSID,
    BUILD,
    EMPTY_DICT,
    EMPTY_LIST,
    MARK,
    NEWFALSE,
    NEWTRUE,
    NONE,
    SETITEM,
    SETITEMS,
    STORAGE_PID,
    TUPLE,
    TUPLE2,
    Reduce,
    benign_sample,
    benign_spans,
    dump_stream,
    hostile_sample,
    op_call,
    op_global,
    op_stack_global,
    op_text,
    op_value,
    write_legacy,
    write_tar,
    write_zip,
)

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- markers


def shell_touch(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def python_touch(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


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
