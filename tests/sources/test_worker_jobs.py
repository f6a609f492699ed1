"""One job inside a worker: what it imports, forks, keeps and writes.

Frames and dataset workers never import torch, a frames job's child never
imports pandas, and the helper's jobs take Arrow buffers from malloc; a job's
forked child freezes and keeps what it read while a job run in the helper
frees it; the fork that writes the attribute tables gives the same frames as
a job without it, whether the spare core was there at the start or came
later; and output that is not a worker's is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from slime_trace_widget.sources.dumps import pool, worker
from slime_trace_widget.sources.loading import load_frames
from tests.support.hostile_pickles import benign_sample

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_output_that_is_not_a_workers_is_refused(tmp_path: Path) -> None:
    """The caller checks what a worker wrote: a row reference outside its table fails."""
    from slime_trace_widget.frames import build_frames
    from slime_trace_widget.sources.dumps.wire import (
        WireError,
        read_frames,
        table_file,
        write_frames,
        write_table,
    )

    frames = build_frames([benign_sample()])
    write_frames(frames, str(tmp_path))
    spans = frames.tables.span_core
    outside = pa.array(np.full(spans.num_rows, 10**6, dtype=np.int64))
    write_table(spans.set_column(spans.schema.get_field_index("sample_row"), "sample_row",
                                 outside), table_file(str(tmp_path), "span_core"))
    with pytest.raises(WireError, match=r"sample_row points outside"):
        read_frames(str(tmp_path))
    (tmp_path / "segments.arrow").write_bytes(b"ARROW1 but not really")
    with pytest.raises(WireError, match=r"segments\.arrow"):
        read_frames(str(tmp_path))


@pytest.mark.parametrize("job", ["frames", "dataset"])
def test_frames_and_dataset_workers_never_import_torch(job: str) -> None:
    """torch costs a worker 2 s and 300 MB; reading dumps for frames needs none of it."""
    script = ("import sys; from slime_trace_widget.sources.dumps import worker; "
              f"worker._prepare({job!r}); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_frames_jobs_child_never_imports_pandas(tmp_path: Path) -> None:
    """A frames job builds Arrow tables and never a DataFrame: its child, forked from a
    helper that has not imported pandas, ends its job with no pandas in sys.modules,
    though pyarrow imports pandas where it can on its first conversion."""
    dump = FIXTURES / "rollout_eval_3.pt"
    job = pool.new_job(str(dump), "frames", str(tmp_path), None, None, spare_core=True)
    script = (
        "import sys\n"
        "from slime_trace_widget.sources.dumps import worker\n"
        "run_job = worker._run_job\n"
        "class Held(list):\n"
        "    send = list.append\n"
        "def run_and_tell(request, out):\n"
        "    verdict = Held()\n"
        "    run_job(request, verdict)\n"
        "    out.send({'pandas': 'pandas' in sys.modules})\n"
        "    for message in verdict:\n"
        "        out.send(message)\n"
        "worker._run_job = run_and_tell\n"
        "worker.serve()\n")
    result = subprocess.run([sys.executable, "-c", script], input=json.dumps(job.request) + "\n",
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"pandas": False}, {"ok": True}]
    from slime_trace_widget.sources.dumps.wire import read_frames

    assert len(read_frames(str(tmp_path)).span_core) > 0


@pytest.mark.parametrize("in_child", [True, False])
def test_a_jobs_child_freezes_what_it_keeps_so_collections_skip_it(
        monkeypatch: pytest.MonkeyPatch, in_child: bool) -> None:
    """Once the cyclic collector runs again after flattening, its first pass would scan
    every object of the dump (0.23 s on a million records): a child, which keeps them
    until it exits, moves them out of the collector's sight. The helper, which frees
    them, must not: frozen objects would never be collected there."""
    import gc

    monkeypatch.setattr(worker, "_kept_until_exit", [] if in_child else None)
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", None, None, None)
    before = gc.get_freeze_count()
    try:
        tables = worker._flattened(job.request)
        frozen = gc.get_freeze_count() - before
    finally:
        gc.unfreeze()
    assert tables.span_core.num_rows > 0
    if in_child:
        assert frozen > 1000
    else:
        assert frozen == 0


@pytest.mark.parametrize("in_child", [True, False])
def test_a_jobs_child_ends_holding_what_it_read_but_the_helper_frees_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_child: bool) -> None:
    """Freeing a million records took 0.6 s after the verdict was ready: a job's forked
    child keeps the dump it read and the tables it wrote until ``os._exit`` ends it. A
    job run in the helper itself (no fork) must free them, or the helper would grow."""
    from slime_trace_widget.sources.dumps import files
    from slime_trace_widget.sources.dumps.wire import read_frames

    read: list[weakref.ref] = []

    def load_and_watch(*args: object, **kwargs: object) -> files.LoadedDump:
        loaded = real_load(*args, **kwargs)
        read.append(weakref.ref(loaded))
        return loaded

    real_load = files.load_dump_file
    monkeypatch.setattr(files, "load_dump_file", load_and_watch)
    kept: list | None = [] if in_child else None
    monkeypatch.setattr(worker, "_kept_until_exit", kept)
    out = tmp_path / "out"
    out.mkdir()
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(out), None, None)
    worker._frames_job(job.request)
    assert len(read_frames(str(out)).spans) > 0
    if in_child:
        assert [type(value).__name__ for value in kept] == ["LoadedDump", "FrameTables"]
        assert read[0]() is kept[0]
    else:
        assert read[0]() is None


def test_a_frames_jobs_fork_writes_its_tables_into_the_frames_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a spare core, the fork's files are the frames' own: the job writes every other
    table and the caller reads frames equal to those of a job without the fork."""
    from slime_trace_widget.sources.dumps import forked_attrs, wire
    from tests.sources.test_forked_attrs import (
        FORKED_FILES,
        _assert_same_attrs,
        watch_table_writes,
    )
    from tests.sources.test_wire import assert_same_frames

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    written = watch_table_writes(monkeypatch)
    outs = {}
    for spare_core in (True, False):
        outs[spare_core] = tmp_path / str(spare_core)
        outs[spare_core].mkdir()
        job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(outs[spare_core]), None,
                           None, spare_core=spare_core)
        worker._frames_job(job.request)
        if spare_core:
            assert not set(FORKED_FILES) & set(written)
            assert all((outs[spare_core] / name).exists() for name in FORKED_FILES)
    assert all(written.count(name) == 1 for name in FORKED_FILES)  # the job without it
    forked, plain = (wire.read_frames(str(outs[spare_core])) for spare_core in (True, False))
    assert_same_frames(forked, plain)
    _assert_same_attrs(forked, plain)


@pytest.mark.parametrize("told", [True, False])
def test_a_job_started_without_a_spare_core_forks_if_one_is_free_by_then(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told: bool) -> None:
    """A job started while every core was busy names a file that the pool creates once
    a helper idles with nothing left to start. If the file is there when the job would
    fork, the fork writes the span ends' and events' tables; else the job writes every
    table itself. The frames are the same either way."""
    from slime_trace_widget.sources.dumps import forked_attrs, wire
    from tests.sources.test_forked_attrs import (
        FORKED_FILES,
        _assert_same_attrs,
        watch_table_writes,
    )
    from tests.sources.test_wire import assert_same_frames

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    written = watch_table_writes(monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    flag = out / pool.SPARE_FLAG
    if told:
        flag.touch()
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(out), None, None,
                       spare_core=False, spare_flag=str(flag))
    worker._frames_job(job.request)
    by_the_job = [name for name in FORKED_FILES if name in written]
    assert by_the_job == ([] if told else FORKED_FILES)
    frames, loaded = wire.read_frames(str(out)), load_frames(str(FIXTURES / "small.pt"))
    assert len(frames.spans) > 0
    assert_same_frames(frames, loaded)
    _assert_same_attrs(frames, loaded)


def test_the_helpers_jobs_take_arrow_buffers_from_malloc() -> None:
    """mimalloc's first buffers in a fresh fork cost 0.45 s of system time on a dump of a
    million records; every job runs in a fresh fork, so the helper uses malloc."""
    script = (
        "import sys, pyarrow as pa\n"
        "from slime_trace_widget.sources.dumps import worker\n"
        "worker._run_in_child = lambda request, out: print(pa.default_memory_pool()"
        ".backend_name, file=sys.stderr)\n"
        "worker.serve()\n")
    request = '{"job": "frames", "name": "x.pt"}\n'
    result = subprocess.run([sys.executable, "-c", script], input=request, capture_output=True,
                            text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "system"
