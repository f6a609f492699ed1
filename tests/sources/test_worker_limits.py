"""Files that hurt without running code stop in the worker's child process.

A tuple key that shares its halves (2**64 leaves to hash) and int keys that all
hash to 0 (quadratic dict insertion) freeze the C unpickler, where no signal
reaches it. Loads of such files run in a subprocess here, with a timeout, so a
broken guard fails the test instead of hanging the suite: the CPU-time limit
(given or the default) refuses them, Ctrl-C ends the stuck child, and a record
that inflates to 1.5 GB is inflated (and refused) in the child only.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

from slime_trace_widget.sources.dumps import pool
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.support.hostile_pickles import (
    APPENDS,
    BENIGN_SPANS,
    EMPTY_DICT,
    EMPTY_LIST,
    MARK,
    NONE,
    PROTO2,
    SETITEM,
    SETITEMS,
    STOP,
    benign_sample,
    benign_spans,
    op_text,
    op_value,
    write_zip,
)
from tests.support.processes import running_processes

ROOT = Path(__file__).resolve().parents[2]


def tuple_key_bomb() -> bytes:
    """A dict keyed by ``()`` paired with itself 64 times (DUP, TUPLE2): 2**64 leaves."""
    return EMPTY_DICT + b")" + b"2\x86" * 64 + op_value(1) + SETITEM


def colliding_int_keys(count: int = 200_000) -> bytes:
    """A dict of int keys that all hash to 0 (multiples of 2**61 - 1): about 4 minutes of
    probing for 200,000 keys, in a 2.4 MB file."""
    keys = b"".join(op_value(i * (2**61 - 1)) + NONE for i in range(1, count + 1))
    return EMPTY_DICT + MARK + keys + SETITEMS


BOMBS = {"tuple key of 2**64 leaves": tuple_key_bomb, "200,000 colliding int keys":
         colliding_int_keys}


def write_bomb_after_samples(path: Path, bomb: bytes, benign_count: int = 3000) -> None:
    """A dump whose samples list holds ``benign_count`` traced samples, then the bomb.

    The benign part (about 2 MB) keeps this process's load busy while the child
    reaches the bomb, so a gate that let the load run ahead would hang it.
    """
    samples = op_value(benign_sample()) * benign_count + bomb
    write_zip(path, PROTO2 + EMPTY_DICT + op_text("samples") + EMPTY_LIST + MARK + samples
              + APPENDS + SETITEM + STOP)


LOAD_IN_SUBPROCESS = """
import sys, time
from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading as load
started = time.perf_counter()
try:
    getattr(load, sys.argv[3])(sys.argv[1], time_limit=float(sys.argv[2]))
except DumpError as exc:
    print(f"{time.perf_counter() - started:.1f} s DumpError: {exc}")
else:
    print("loaded")
"""


def load_in_subprocess(path: Path, time_limit: float, timeout: float = 90,
                       loader: str = "load_dump") -> str:
    """Load ``path`` in a fresh interpreter; what it printed. A hang fails the test."""
    result = subprocess.run([sys.executable, "-c", LOAD_IN_SUBPROCESS, str(path),
                             str(time_limit), loader], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def live_processes_in_group(group: int) -> list[int]:
    return [pid for pid, _, pgrp in running_processes() if pgrp == group]


@pytest.mark.parametrize("loader", ["load_dump", "load_frames"])
@pytest.mark.parametrize("bomb", list(BOMBS), ids=list(BOMBS))
def test_cpu_bombs_are_refused_instead_of_freezing_the_process(tmp_path: Path, bomb: str,
                                                                loader: str) -> None:
    path = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(path, BOMBS[bomb]())
    out = load_in_subprocess(path, time_limit=3, loader=loader)
    assert "DumpError" in out and str(path) in out and "CPU time" in out, out


def test_default_time_limit_stops_a_bomb_opened_as_a_widget(tmp_path: Path) -> None:
    """No limit given: the default (10 s plus 1 s per MB) applies to the widget's load."""
    path = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(path, tuple_key_bomb(), benign_count=10)
    script = ("import sys\nfrom slime_trace_widget import DumpError, TraceTimeline\n"
              "try:\n    TraceTimeline.from_dump(sys.argv[1])\n"
              "except DumpError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert "refused: loading it took more than 10" in result.stdout, result.stdout + result.stderr
    assert "s of CPU time" in result.stdout


def test_interrupting_a_stuck_load_ends_the_child_and_the_next_load_works(
        tmp_path: Path) -> None:
    bomb = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(bomb, tuple_key_bomb(), benign_count=10)
    benign = tmp_path / "rollout_2.pt"
    torch.save({"rollout_id": 2, "samples": [benign_sample()]}, benign)
    load_dump(benign)  # the helper is running
    helper = pool._IDLE.workers[0]._process
    assert helper is not None
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        load_dump(bomb, time_limit=120)
    timer.join()
    assert time.monotonic() - started < 60
    deadline = time.monotonic() + 10  # SIGKILL reaches the stuck child a moment later
    while live_processes_in_group(helper.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_processes_in_group(helper.pid) == []  # the helper and the stuck child
    assert benign_spans(load_frames(benign)) == BENIGN_SPANS


INFLATE_AND_MEASURE = """
import resource, sys
from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading as load
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    getattr(load, sys.argv[2])(sys.argv[1], memory_limit=256 << 20)
    print("loaded")
except DumpError as exc:
    print(f"DumpError: {exc}")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, "MB more")
"""


@pytest.mark.parametrize("loader", ["load_dump", "load_frames"])
def test_a_compressed_data_record_is_inflated_in_the_child_only(tmp_path: Path,
                                                                 loader: str) -> None:
    """A 1.5 MB file whose deflated record holds 1.5 GB: torch inflates it whole, in the
    worker only (refused at the memory limit); the frames worker streams the record
    and stops at the pickle's end, never inflating the padding."""
    buffer = io.BytesIO()
    torch.save({"samples": []}, buffer)
    path = tmp_path / "rollout_1.pt"
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                target.writestr(info.filename, data + bytes(1500 << 20), zipfile.ZIP_DEFLATED)
            else:
                target.writestr(info, data)
    result = subprocess.run([sys.executable, "-c", INFLATE_AND_MEASURE, str(path), loader],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = result.stdout.splitlines()
    if loader == "load_dump":
        assert lines and lines[0].startswith("DumpError") and str(path) in lines[0], result
    else:
        assert lines and lines[0] == "loaded", result
    assert int(lines[-1].split()[0]) < 500, lines  # the kernel never held the 1.5 GB
