"""The span ends' attribute table built in a forked process (sources/dumps/forked_attrs.py):
the frames equal those built in one process, whether the fork succeeds or fails."""

from __future__ import annotations

import os
import time
import weakref
from pathlib import Path

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.dumps import forked_attrs
from slime_trace_widget.sources.dumps.forked_attrs import ForkedAttrTables
from slime_trace_widget.tables.attr_columns import MAX_ATTR_COLUMNS, AttrTable
from tests.sources.test_wire import assert_same_frames
from tests.support.demo_shapes import sized_demo_samples


def _assert_same_attrs(one, other) -> None:
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(one, name).table.equals(getattr(other, name).table), name


def watch_table_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the table files this process writes from now on, in order: the
    frames' (``arrow_files``) and the attribute tables a job builds itself
    (``forked_attrs``). A fork's writes are its own process's, not seen here."""
    from slime_trace_widget.sources.dumps import arrow_files

    written: list[str] = []
    real_write = arrow_files.write_table

    def watched(table: object, path: str) -> None:
        written.append(os.path.basename(path))
        real_write(table, path)

    monkeypatch.setattr(arrow_files, "write_table", watched)
    monkeypatch.setattr(forked_attrs, "write_table", watched)
    return written


def _samples() -> list[dict]:
    samples = sized_demo_samples(40, seed=9, pd_share=1.0, extra_attrs=6)
    end = next(event for event in samples[3]["trace"]["events"] if event["type"] == "span_end")
    end["attrs"] = {f"key_{k}": k for k in range(MAX_ATTR_COLUMNS + 7)}  # past the cap
    return samples


def test_the_forked_table_equals_the_one_built_here(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = _samples()
    here = build_frames(samples)
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert_same_frames(forked, here)
    _assert_same_attrs(forked, here)
    assert forked.warnings["attr_columns_capped"] == here.warnings["attr_columns_capped"] > 0
    assert list(tmp_path.iterdir()) == []  # the fork's files are gone


def test_the_forked_tables_are_mapped_not_copied_and_outlive_their_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the fork's 198 MB table (146 MB dump) back as a copy took 0.10 s on the
    critical path, mapped 0.03 s; its file is deleted at once, the columns stay valid."""
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    reads: list[bool] = []
    real = forked_attrs.read_table

    def watched(path: str, mapped: bool = False) -> object:
        reads.append(mapped)
        return real(path, mapped=mapped)

    monkeypatch.setattr(forked_attrs, "read_table", watched)
    samples = _samples()
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert reads == [True, True]  # the span ends' and the events' tables
    assert list(tmp_path.iterdir()) == []
    _assert_same_attrs(forked, build_frames(samples))


def test_a_fork_that_fails_leaves_the_table_to_the_job(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = _samples()
    missing = tmp_path / "gone"  # the fork cannot write there and exits 1
    forked = build_frames(samples, ForkedAttrTables(str(missing)))
    here = build_frames(samples)
    assert_same_frames(forked, here)
    _assert_same_attrs(forked, here)


def test_small_and_huge_lists_are_not_forked(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    forks = []
    monkeypatch.setattr(forked_attrs, "_start_fork", lambda *args: forks.append(args))
    build_frames(make_demo_samples(4), ForkedAttrTables(str(tmp_path)))
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    monkeypatch.setattr(forked_attrs, "MAX_FORKED_ROWS", 10)
    build_frames(make_demo_samples(4), ForkedAttrTables(str(tmp_path)))
    assert forks == []


def test_a_few_thousand_span_ends_are_forked(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One load gains from the fork from about 1,500 span ends up (4,711 rows: 0.292 ->
    0.276 s); below MIN_FORKED_ROWS the table stays in the job."""
    forks = []
    monkeypatch.setattr(forked_attrs, "_start_fork", lambda *args: forks.append(args))
    monkeypatch.setattr(forked_attrs, "available_memory", lambda: None)
    samples = make_demo_samples(16, seed=3, agentic_share=1.0, min_turns=15, max_turns=55)
    real_spans = int((~build_frames(samples).span_core["virtual"]).sum())
    assert forked_attrs.MIN_FORKED_ROWS <= real_spans < 5_000
    build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert len(forks) == 1
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", real_spans + 1)
    build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert len(forks) == 1


def test_no_fork_without_memory_for_its_copies(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork copies the pages it reads: 1.1 GB more at the peak for 1.88M span ends."""
    forks = []
    monkeypatch.setattr(forked_attrs, "_start_fork", lambda *args: forks.append(args))
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = make_demo_samples(4)
    real_spans = int((~build_frames(samples).span_core["virtual"]).sum())
    room = forked_attrs.FORK_BYTES_PER_ROW * real_spans  # the fork starts on their ends
    monkeypatch.setattr(forked_attrs, "available_memory", lambda: room - 1)
    build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert forks == []
    monkeypatch.setattr(forked_attrs, "available_memory", lambda: room)
    build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert len(forks) == 1


FORKED_FILES = ["event_attrs.arrow", "span_end_attrs.arrow"]


ATTR_FILES = ["event_attrs.arrow", "span_end_attrs.arrow", "span_start_attrs.arrow"]


def test_final_tables_stay_as_the_frames_files_and_are_not_written_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frames job's fork writes the span ends' and events' tables where the frames go
    (198 MB for a million records): the job maps them from there and leaves them. The
    job writes the span starts' table there as soon as it has built it."""
    from slime_trace_widget.sources.dumps import wire

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = _samples()
    written = watch_table_writes(monkeypatch)
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path), final=True))
    assert written == ["span_start_attrs.arrow"]  # the fork wrote the other two
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(forked, name).file == wire.table_file(str(tmp_path), name)
    assert sorted(path.name for path in tmp_path.iterdir()) == ATTR_FILES
    written.clear()
    wire.write_frames(forked, str(tmp_path))
    assert not set(ATTR_FILES) & set(written)
    assert "samples.arrow" in written
    here = build_frames(samples)
    read_back = wire.read_frames(str(tmp_path))
    assert_same_frames(read_back, here)
    _assert_same_attrs(read_back, here)


def test_tables_a_final_job_builds_are_written_and_let_go_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a fork, the job writes each table as soon as it is built and lets it go
    before it builds the next, which then takes back that memory; the job's tables are
    the files, mapped, and equal those built in one process."""
    from slime_trace_widget.sources.dumps import wire

    steps: list[tuple[str, object]] = []
    built: list[weakref.ref] = []
    real_from_dicts = AttrTable.from_dicts

    def from_dicts(dicts: list, warnings: object = None) -> AttrTable:
        steps.append(("build", [table() is None for table in built]))
        table = real_from_dicts(dicts, warnings)
        built.append(weakref.ref(table))
        return table

    def write(table: object, path: str) -> None:
        steps.append(("write", os.path.basename(path)))
        real_write(table, path)

    real_write = forked_attrs.write_table
    monkeypatch.setattr(AttrTable, "from_dicts", staticmethod(from_dicts))
    monkeypatch.setattr(forked_attrs, "write_table", write)
    samples = _samples()
    no_spare_core = ForkedAttrTables(str(tmp_path), final=True, spare=lambda: False)
    job = build_frames(samples, no_spare_core)
    assert steps == [("build", []), ("write", "span_start_attrs.arrow"),
                     ("build", [True]), ("write", "span_end_attrs.arrow"),
                     ("build", [True, True]), ("write", "event_attrs.arrow")]
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(job, name).file == wire.table_file(str(tmp_path), name)
    monkeypatch.undo()
    _assert_same_attrs(job, build_frames(samples))


def test_a_final_table_the_fork_failed_is_built_and_written_by_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_trace_widget.sources.dumps import wire

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)

    job = os.getpid()
    real_write = forked_attrs.write_table

    def broken_write(table: object, path: str) -> None:
        if os.getpid() == job:
            real_write(table, path)
            return
        with open(path, "wb") as stream:
            stream.write(b"ARROW1 cut short")
        raise OSError("disk full")

    monkeypatch.setattr(forked_attrs, "write_table", broken_write)  # broken in the fork
    samples = _samples()
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path), final=True))
    # The fork's partial file is gone, and the job wrote each table itself.
    assert sorted(path.name for path in tmp_path.iterdir()) == ATTR_FILES
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(forked, name).file == wire.table_file(str(tmp_path), name)
    wire.write_frames(forked, str(tmp_path))
    here = build_frames(samples)
    _assert_same_attrs(wire.read_frames(str(tmp_path)), here)


def test_the_job_does_not_wait_for_the_fork_to_end(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Its table is complete once its line arrives; ending a process that shared a big
    heap takes 0.03 s more, so the job only looks (WNOHANG) and a thread reaps it."""
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    calls: list[tuple[int, int]] = []
    real_waitpid = os.waitpid

    def watched(pid: int, options: int) -> tuple[int, int]:
        calls.append((pid, options))
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", watched)
    build_frames(_samples(), ForkedAttrTables(str(tmp_path)))
    pid, options = calls[0]
    assert options == os.WNOHANG
    assert _wait_until_gone(pid), "the fork was never reaped"


def _watch_forks(monkeypatch: pytest.MonkeyPatch, steps: list[str] | None = None) -> list[int]:
    """The pids of the forks started from now on (and a "fork" step in ``steps``)."""
    pids: list[int] = []
    real_start = forked_attrs._start_fork

    def watched(*args: object) -> object:
        fork = real_start(*args)
        if fork is not None:
            pids.append(fork.pid)
        if steps is not None:
            steps.append("fork")
        return fork

    monkeypatch.setattr(forked_attrs, "_start_fork", watched)
    return pids


def _wait_until_gone(pid: int) -> bool:
    """Whether process ``pid`` is reaped (a zombie keeps its /proc entry until then)."""
    deadline = time.monotonic() + 120  # a hang guard, not a timing
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    return not os.path.exists(f"/proc/{pid}")


def test_the_fork_starts_before_the_pd_spans_are_made(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """On the 146 MB dump the job waited 0.3 s for a fork that started after the span
    columns and the PD spans; the fork now starts on the real spans' ends and gets the
    PD spans' over a pipe, and the job no longer waits for it."""
    from slime_trace_widget.tables import build

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    steps: list[str] = []
    _watch_forks(monkeypatch, steps)
    real_virtual = build.build_virtual_spans

    def watched_virtual(*args: object) -> object:
        steps.append("pd spans")
        return real_virtual(*args)

    monkeypatch.setattr(build, "build_virtual_spans", watched_virtual)
    samples = _samples()
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path)))
    assert steps == ["fork", "pd spans"]
    here = build_frames(samples)
    assert forked.span_core["virtual"].sum() > 0  # PD rows went through the pipe
    _assert_same_attrs(forked, here)


def test_pd_rows_pickle_cannot_write_leave_the_table_to_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    pids = _watch_forks(monkeypatch)
    samples = _samples()
    summary = next(event for sample in samples for event in sample["trace"]["events"]
                   if event.get("name") == "sglang_pd_summary")
    summary.setdefault("attrs", {})["lock"] = threading.Lock()  # PD spans copy it
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path)))
    here = build_frames(samples)
    assert "lock" in forked.span_end_attrs.keys
    _assert_same_attrs(forked, here)
    assert pids and _wait_until_gone(pids[0])
    assert list(tmp_path.iterdir()) == []


def test_a_fork_that_dies_before_taking_the_pd_rows_leaves_the_table_to_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PD rows (here past a pipe's 64 KiB) are sent by a thread: it stops on the
    broken pipe instead of blocking the job, and the job builds the table."""
    import threading

    class Broken:
        def add(self, dicts: list) -> None:
            raise RuntimeError("the fork fails at once")

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    monkeypatch.setattr(forked_attrs, "AttrTableBuilder", Broken)  # in the fork only
    samples = _samples()
    for sample in samples:
        for event in sample["trace"]["events"]:
            if event.get("name") == "sglang_pd_summary":
                event.setdefault("attrs", {})["note"] = "x" * 4096
    forked = build_frames(samples, ForkedAttrTables(str(tmp_path)))
    _assert_same_attrs(forked, build_frames(samples))
    deadline = time.monotonic() + 120  # a hang guard, not a timing
    while (any(thread.name.endswith("(_send)") for thread in threading.enumerate())
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert not any(thread.name.endswith("(_send)") for thread in threading.enumerate())


def test_a_flatten_that_fails_stops_its_fork(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_trace_widget.tables import build

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    pids = _watch_forks(monkeypatch)

    def broken_virtual(*args: object) -> object:
        raise RuntimeError("flattening failed")

    monkeypatch.setattr(build, "build_virtual_spans", broken_virtual)
    with pytest.raises(RuntimeError, match="flattening failed"):
        build_frames(_samples(), ForkedAttrTables(str(tmp_path)))
    assert pids and _wait_until_gone(pids[0])
    assert list(tmp_path.iterdir()) == []


def test_a_job_build_that_fails_after_a_failed_fork_raises_its_own_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork fails, then the job's own build of its tables runs out of memory (the
    worker's memory limit): the MemoryError is what the caller hears, not an error of
    cancelling the fork that was already reaped."""
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)

    class Broken:  # the fork fails at once, as a fork out of memory would
        def add(self, dicts: list) -> None:
            raise MemoryError("the fork ran out of memory")

    monkeypatch.setattr(forked_attrs, "AttrTableBuilder", Broken)
    job = os.getpid()
    own_build = ForkedAttrTables._built_here

    def built_here(self: ForkedAttrTables, position: int, dicts: list) -> AttrTable:
        if position != 0 and os.getpid() == job:
            raise MemoryError("the job ran out of memory too")
        return own_build(self, position, dicts)

    monkeypatch.setattr(ForkedAttrTables, "_built_here", built_here)
    samples = sized_demo_samples(40, seed=9, pd_share=1.0, extra_attrs=6)
    with pytest.raises(MemoryError, match="the job ran out of memory too"):
        build_frames(samples, ForkedAttrTables(str(tmp_path), final=True))
