"""The worker side of loading: a helper process that forks one limited child per dump.

The helper (started by :mod:`.pool` with ``python -c``) imports numpy and
pyarrow once, pandas only for run-dataset jobs and torch only when a caller
asks for raw samples with their tensors, then waits for one JSON request per
line on stdin. Each job runs in a child forked from it, under a CPU time limit
and a memory cap, so a hostile file that would hash forever, allocate without
end or crash the interpreter ends that child only. The child reads the dump
with the restricted unpickler, flattens it and writes the tables as Arrow
files (:mod:`.arrow_files`); its verdict goes back as one JSON line (``ok`` or
``error``). A check job (``load_dump``'s) also says how much memory its load took
at its peak (``peak_bytes``), so the caller can refuse a load it has no room for.
The helper lives no longer than its caller: idle, it ends when its stdin ends; while
a job runs, it watches the pipe its messages go back on, and once nothing can read
them (the caller died, even by SIGKILL) the job, its forks and the helper end at once.

Forking the helper is safe, unlike forking a Jupyter kernel, because it starts no
thread of its own: a fork copies only the forking thread, so a lock another
thread held would stay locked in the child. The one other thread it has is
jemalloc's, started by importing pyarrow, which jemalloc's own fork handlers make
safe; the helper takes Arrow's buffers from malloc and OpenBLAS is held to one
thread (:func:`.pool._worker_environment`).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib.abc
import json
import math
import os
import select
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import resource
except ImportError:  # Windows: jobs run without CPU or memory limits of their own
    resource = None  # type: ignore[assignment]

from ...tables.samples import READ_FIELDS
from .errors import DumpError

if TYPE_CHECKING:
    from ...tables.core_tables import FrameTables
    from .files import LoadedDump

__all__ = ["read_for_frames", "serve"]

#: In a job's forked child, what the job read and built, kept until the child
#: ends: the child sends its verdict, then ends by ``os._exit``, which frees none of
#: it object by object. That holds because nothing the child holds needs a
#: finaliser (its files are written and closed before the verdict). None in the
#: helper, which must free what a job held.
_kept_until_exit: list | None = None


def serve() -> None:
    """Helper main loop: run each request line as a job, relaying the child's messages."""
    try:
        _prepare("frames")
        _use_the_system_allocator()
        broken = None
    except BaseException as exc:  # report it per request rather than dying silently
        broken = f"{type(exc).__name__}: {exc}"
    package_parent = str(Path(os.path.abspath(__file__)).parents[3])
    if len(sys.argv) > 1 and sys.argv[1] != package_parent:
        broken = f"it imported slime_trace_widget from {package_parent}, not {sys.argv[1]}"
    out = _Messages(_private_stdout())
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if broken is None:
            try:
                _prepare(request["job"])
            except BaseException as exc:
                broken = f"{type(exc).__name__}: {exc}"
        if broken is not None:
            out.send({"error": f"{request['name']}: the loader's worker cannot start ({broken})"})
        elif hasattr(os, "fork"):
            _run_in_child(request, out)
        else:
            _run_job(request, out)


def _prepare(job: str) -> None:
    """Import what a job needs once, in the helper, so each forked child starts warm."""
    from . import files  # noqa: F401

    if job == "check":  # load_dump's check loads with torch
        from . import torch_tensors  # noqa: F401
        return
    # Frames and dataset jobs: no torch; frames jobs no pandas either, as the worker
    # writes the tables it builds as they are (see _refuse_pandas).
    from ...tables import build  # noqa: F401
    from . import arrow_files, forked_attrs, plain_tensors  # noqa: F401
    if job == "dataset":
        from ..dataset import layout  # noqa: F401


def _use_the_system_allocator() -> None:
    """Arrow's buffers in the helper and its children come from malloc, not mimalloc:
    each job starts in a fresh fork, where mimalloc sets up its arenas anew and
    pays for the pages of its first buffers in system time, while malloc's cost is
    the same in a new process as in an old one."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _run_job(request: dict, out: _Messages) -> None:
    """Do one job as the loader would and report its verdict."""
    name = request["name"]
    verdict: dict = {"ok": True}
    try:
        if request["job"] == "frames":
            _frames_job(request)
        elif request["job"] == "dataset":
            verdict["report"] = _dataset_job(request)
        else:
            digest, peak = _check_job(request)
            out.send({"digest": digest})
            if peak is not None:
                verdict["peak_bytes"] = peak
    except DumpError as exc:
        out.send({"error": str(exc)})
    except MemoryError:
        out.send({"error": f"{name}: refused: loading it needs more memory than a file of "
                           "its size could (the loader's memory_limit)"})
    except Exception as exc:  # reported in the verdict, never raised in the helper
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:240]
        out.send({"error": f"{name}: could not be loaded ({detail})"})
    else:
        out.send(verdict)


def _frames_job(request: dict) -> None:
    """Read the dump (no torch for zip files), flatten it, write the tables as Arrow files."""
    from .arrow_files import write_tables

    tables = _flattened(request)
    write_tables(tables, request["out"])
    _keep_until_exit(tables)


def _dataset_job(request: dict) -> dict:
    """Read and flatten the dump as for frames, then write its tables into the run
    dataset at ``out``; report what was written and the file's content hash."""
    from ...frames.model import frames_from_tables
    from ..dataset.layout import write_dump
    from ..dataset.manifest import content_hash

    digest = content_hash(request["path"])
    frames = frames_from_tables(_flattened(request))
    if request.get("engine_traces"):
        from ..engine.window import with_engine_traces

        frames = with_engine_traces(frames, request["engine_traces"])
    report = write_dump(frames, Path(request["out"]), request["path"], request["stem"])
    return {**report, "blake2b": digest}


def _flattened(request: dict) -> FrameTables:
    """The flattened tables of the dump a job names; its samples die when this returns."""
    from ...tables.build import cyclic_gc_paused

    with cyclic_gc_paused():
        tables = _read_and_flatten(request)
        if _kept_until_exit is not None:
            # What the child read and built stays until it exits, so no collection
            # needs to look at it: the first one after the pause would scan all of
            # it while the frames are written. Frozen objects are skipped; newer
            # ones are still collected.
            gc.freeze()
        return tables


def read_for_frames(path: str, name: str | None = None, pipelined: bool = False) -> LoadedDump:
    """The dump at ``path`` as a frames job reads it: through the skim and the
    restricted unpickler (the skim forked when ``pipelined``), with the fields
    flattening never reads dropped."""
    from .files import load_dump_file

    loaded = load_dump_file(path, "frames", name=name, pipelined=pipelined)
    _drop_unread_fields(loaded.samples)
    return loaded


def _read_and_flatten(request: dict) -> FrameTables:
    from ...tables.build import build_tables
    from .forked_attrs import ForkedAttrTables

    spare_core = bool(request.get("spare_core"))  # else other jobs keep every core busy
    loaded = read_for_frames(request["path"], request["name"], pipelined=spare_core)
    _keep_until_exit(loaded)
    flag = request.get("spare_flag")
    if not spare_core and not flag:
        return build_tables(loaded)
    # No core was spare when the job started, but one may be by the time the fork
    # would start: the pool creates the file ``spare_flag`` once it has no other job
    # to start and a helper idles (the last of 3 dumps on 2 cores, say).
    spare = None if spare_core else functools.partial(os.path.exists, flag)
    if request["job"] == "frames":  # the fork's table goes where the other tables go
        return build_tables(loaded, ForkedAttrTables(request["out"], final=True, spare=spare))
    scratch = tempfile.mkdtemp(prefix="slime-trace-attrs-")
    try:
        return build_tables(loaded, ForkedAttrTables(scratch, spare=spare))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _keep_until_exit(value: object) -> None:
    """Hold ``value`` until this job's child ends, when the job runs in one."""
    if _kept_until_exit is not None:
        _kept_until_exit.append(value)


def _drop_unread_fields(samples: list) -> None:
    """Free what flattening never reads (token lists, log-probs...) before it starts:
    the peak of a big dump's load then stays that of unpickling it."""
    for sample in samples:
        if isinstance(sample, dict):
            for key in [key for key in sample
                        if not (type(key) is str and key in READ_FIELDS)]:
                del sample[key]


def _check_job(request: dict) -> tuple[str, int | None]:
    """Load the file as ``load_dump`` will in the caller; return the digest of its bytes
    and the memory that took at its peak, reading the file included (None where the
    system does not say)."""
    from .files import load_dump_bytes

    start = _status_bytes("VmRSS:")
    with open(request["path"], "rb") as handle:
        data = handle.read()
    load_dump_bytes(request["name"], data, "torch")
    peak = _status_bytes("VmHWM:")  # a fork starts with its resident size as its peak
    grown = None if start is None or peak is None else max(0, peak - start)
    return hashlib.blake2b(data).hexdigest(), grown


def _private_stdout() -> int:
    """A descriptor for the messages, with fd 1 itself sent to /dev/null.

    Anything else printing to stdout in the helper or a child (a library's
    notice) would otherwise land in the middle of the message stream.
    """
    channel = os.dup(sys.stdout.fileno())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return channel


class _Messages:
    """JSON lines written straight to a file descriptor, one ``write`` each."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict) -> None:
        payload = (json.dumps(message) + "\n").encode("ascii")
        while payload:
            payload = payload[os.write(self.fd, payload):]


def _run_in_child(request: dict, out: _Messages) -> None:
    """Fork, run the job in the child under its limits, and relay what it says."""
    global _kept_until_exit
    ends: tuple[int, ...] = ()
    try:
        ends = os.pipe()
        pid = os.fork()
    except OSError as exc:  # out of processes or memory: this job fails, the helper stays
        for end in ends:
            os.close(end)
        out.send({"error": f"{request['name']}: the loader could not start a job ({exc})"})
        return
    read_end, write_end = ends
    if pid == 0:  # the child: never returns
        code = 1
        _kept_until_exit = []
        try:
            os.close(read_end)
            os.close(out.fd)  # only the helper answers the parent
            _apply_limits(request)
            if request["job"] == "frames":
                _refuse_pandas()
            _run_job(request, _Messages(write_end))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        concluded = _relay(read_end, pid, out)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not concluded:
        out.send({"error": _death_message(request, os.waitstatus_to_exitcode(status))})


def _relay(child: int, pid: int, out: _Messages) -> bool:
    """Send on each line the job's child writes to the descriptor ``child`` until it
    ends; whether one was its verdict. Meanwhile the pipe to the caller is watched: once
    its reading end is closed everywhere, the caller is gone (killed or crashed without
    ending its helpers), and the job and the helper end at once
    (:func:`_end_with_the_caller`) rather than load for no one. (Not the helper's
    stdin: a caller may close that and still wait for the verdict.)"""
    watched = select.poll()
    watched.register(child, select.POLLIN)
    watched.register(out.fd, 0)  # a pipe with no reader left is reported whatever is asked
    concluded, pending = False, b""
    while True:
        ready = dict(watched.poll())
        if ready.get(out.fd, 0) & (select.POLLERR | select.POLLHUP):
            _end_with_the_caller(pid)
        if child not in ready:
            continue
        chunk = os.read(child, 1 << 16)
        if not chunk:
            return concluded  # a last line without its newline was cut off by a death
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            message = json.loads(line)
            concluded = "ok" in message or "error" in message
            out.send(message)


def _end_with_the_caller(pid: int) -> None:
    """End the job's child ``pid``, the processes it forked and this helper: the whole
    process group, which the pool starts the helper leading. A helper that does not
    lead its group (run some other way) ends the child, and then itself."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    os._exit(1)


def _refuse_pandas() -> None:
    """Make ``import pandas`` fail in a frames job's child, unless the helper has it.

    pyarrow imports pandas, where installed, on its first conversion (of a list or
    an array alike), only to ask whether the value is a pandas object, in a process
    that builds Arrow tables and never a DataFrame. This relies on two things:
    nothing a frames job runs needs pandas (a test checks ``sys.modules`` in the
    child after its job), and pyarrow takes a failed import of pandas as pandas not
    installed, converting as it does where it is not. (A None in ``sys.modules``
    would not do: pyarrow's compiled import takes it as the module.) The finder is
    the import system's public hook (``importlib.abc.MetaPathFinder``), and the
    child ends with its job, so nothing in it needs pandas later.
    """
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import finder that refuses pandas and finds nothing else."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("a frames job's worker does without pandas", name=name)
        return None


def _death_message(request: dict, code: int) -> str:
    """Why a worker child ended without a verdict, from its exit code."""
    name = request["name"]
    if code < 0 and -code == getattr(signal, "SIGXCPU", None):
        return (f"{name}: refused: loading it took more than {request['cpu_seconds']:g} s of "
                "CPU time (the loader's time_limit; a dump of this size needs far less)")
    if code < 0 and -code == signal.SIGKILL:
        return (f"{name}: refused: the system killed the worker loading it (out of "
                "memory, or far past the CPU time limit); nothing was loaded")
    if code < 0:
        return (f"{name}: the loader crashed on it in its worker "
                f"({signal.Signals(-code).name}); nothing was loaded")
    return f"{name}: the worker exited with status {code}; nothing was loaded"


_LARGEST_LIMIT = 2**63 - 1


def _apply_limits(request: dict) -> None:
    """CPU seconds and new memory for this child; no core file when a limit ends it."""
    if resource is None:
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # A limit past what the system can hold (2**63 - 1, the largest a limit can be set
    # to here, in seconds or bytes) is no limit: the child runs without it.
    if math.isfinite(request["cpu_seconds"]) and request["cpu_seconds"] < _LARGEST_LIMIT - 6:
        # SIGXCPU at the soft limit ends the child; the hard one (SIGKILL) is a backstop.
        cpu = max(1, math.ceil(request["cpu_seconds"]))
        _lower_limit(resource.RLIMIT_CPU, cpu, cpu + 5)
    used = _data_segment_bytes()
    if used is not None and math.isfinite(request["memory_bytes"]):
        cap = used + int(request["memory_bytes"])
        if cap < _LARGEST_LIMIT:
            _lower_limit(resource.RLIMIT_DATA, cap, None)


def _lower_limit(kind: int, soft: int, hard: int | None) -> None:
    """Set a resource limit no higher than the one the process already has."""
    old_soft, old_hard = resource.getrlimit(kind)
    infinite = resource.RLIM_INFINITY
    if old_hard != infinite:
        soft = min(soft, old_hard)
        hard = old_hard if hard is None else min(hard, old_hard)
    elif hard is None:
        hard = infinite
    if old_soft != infinite and old_soft < soft:
        soft = old_soft
    resource.setrlimit(kind, (soft, hard))


def _data_segment_bytes() -> int | None:
    """The process's data segment as RLIMIT_DATA counts it (``VmData``), on Linux."""
    return _status_bytes("VmData:")


def _status_bytes(field: str) -> int | None:
    """A size this process's ``/proc/self/status`` gives (``VmData:``, ``VmRSS:``,
    ``VmHWM:``...) in bytes, on Linux; else None."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
