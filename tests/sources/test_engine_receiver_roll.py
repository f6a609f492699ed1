"""The receiver's write-ahead files: rolled by the bytes written as well as by rows and
age, and rolled (or recovered) a bounded piece at a time, into finished files whose rows
are exactly the ones written, sorted stably."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from slime_trace_widget.sources.engine import durable
from slime_trace_widget.sources.engine.span_schema import COLUMNS, START
from slime_trace_widget.sources.engine.store import LAYOUT, SUBDIR, SpanStore
from slime_trace_widget.sources.engine.stretches import DECODE_LOOP, fold_decode_loops
from tests.support.receiver import STARTUP_SECONDS

ROOT = Path(__file__).parents[2]
#: Big enough to make several pieces of a few rows, small enough to stay quick.
PIECE = 64 << 10
#: The largest piece a roll encodes at a time (made ``PIECE`` by the tests).
PIECE_BYTES = "slime_trace_widget.sources.engine.wal_roll.PIECE_BYTES"


def spans(numbers: list[int], starts: list[int], attribute_bytes: list[int],
          name: str = "slice", parent: str | None = None) -> pa.Table:
    """Stored spans ``span<number>`` starting at ``starts``, each with an attribute text
    of about ``attribute_bytes``."""
    rows = {column: [] for column in COLUMNS}
    for number, start, size in zip(numbers, starts, attribute_bytes, strict=True):
        rows["trace_id"].append("ab" * 16)
        rows["span_id"].append(f"{number:016x}")
        rows["parent_id"].append(parent)
        rows["name"].append(name)
        rows["start_ns"].append(start)
        rows["end_ns"].append(start + 10)
        rows["service"].append("sglang")
        rows["status"].append(number % 3)
        rows["attributes"].append(f'{{"n": {number}, "pad": "{"p" * size}"}}')
        rows["resource"].append("{}")
        rows["events"].append("[]")
        rows["links"].append("[]")
    return LAYOUT.rows(rows)


def shuffled_batches(count: int, rows_each: int, seed: int) -> list[pa.Table]:
    """Batches whose starts are out of order across and within them, with ties."""
    rng = random.Random(seed)
    batches, number = [], 0
    for _ in range(count):
        numbers = list(range(number, number + rows_each))
        number += rows_each
        starts = [10**18 + rng.randrange(40) for _ in numbers]
        sizes = [rng.choice([10, 1000, 30_000, 100_000]) for _ in numbers]
        batches.append(spans(numbers, starts, sizes))
    return batches


def finished_files(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / SUBDIR).iterdir() if LAYOUT.finished.fullmatch(p.name))


def check_pieces(path: Path) -> None:
    """Each row group of the finished file at ``path`` holds at most a piece of text (or
    one row): the roll wrote it a bounded piece at a time."""
    parquet = pq.ParquetFile(path)
    assert parquet.metadata.num_row_groups > 1
    for number in range(parquet.metadata.num_row_groups):
        group = parquet.read_row_group(number, columns=["attributes"])
        text = pc.sum(pc.binary_length(group["attributes"])).as_py()
        assert len(group) == 1 or text <= PIECE


def test_a_write_ahead_file_rolls_once_it_holds_roll_bytes(tmp_path: Path) -> None:
    """Before: it rolled only by rows (250,000) or age (60 s), so requests of large spans
    grew it, and the roll that read it, without bound."""
    store = SpanStore(tmp_path, roll_spans=10**9, roll_seconds=10**9, roll_bytes=100_000)
    written = [spans([number], [10**18 + number], [30_000]) for number in range(10)]
    sizes = []
    for table in written:
        store.append(table)
        wal = list((tmp_path / SUBDIR).glob("wal-*.arrows"))
        sizes.append(wal[0].stat().st_size if wal else 0)
    assert 0 in sizes  # rolled as the limit was reached
    assert max(sizes) < 100_000  # and never left past it
    rolled = finished_files(tmp_path)
    assert len(rolled) >= 2
    store.close()
    stored = pa.concat_tables(pq.read_table(path) for path in finished_files(tmp_path))
    assert stored.sort_by(START).equals(pa.concat_tables(written).sort_by(START))


def test_a_roll_writes_a_piece_at_a_time_and_keeps_every_row_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PIECE_BYTES, PIECE)
    batches = shuffled_batches(8, 12, seed=3)
    store = SpanStore(tmp_path, roll_spans=10**9, roll_seconds=10**9)
    for table in batches:
        store.append(table)
    store.close()
    [finished] = finished_files(tmp_path)
    check_pieces(finished)
    # sorted by start, stably: rows starting together keep the order they were written in
    assert pq.read_table(finished).equals(pa.concat_tables(batches).sort_by(START))
    first, last = LAYOUT.finished.fullmatch(finished.name).group(1, 2)
    everything = pa.concat_tables(batches)
    assert int(first) == pc.min(everything["start_ns"]).as_py()
    assert int(last) == pc.max(everything["end_ns"]).as_py()


def test_a_layout_kept_in_write_order_is_rolled_row_for_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout without a sort column (the live store's) keeps the write-ahead file's
    rows, in their order, across pieces: a reader's place (a row count) holds."""
    monkeypatch.setattr(PIECE_BYTES, PIECE)
    layout = durable.Layout(subdir="ordered", prefix="ordered", schema=LAYOUT.schema,
                            start=START, end="end_ns", sort_by="", what="test rows")
    batches = shuffled_batches(6, 10, seed=4)
    store = durable.DurableStore(tmp_path, layout, roll_rows=10**9, roll_seconds=10**9)
    for table in batches:
        store.append(table)
    store.close()
    [finished] = [p for p in (tmp_path / "ordered").iterdir()
                  if layout.finished.fullmatch(p.name)]
    check_pieces(finished)
    assert pq.read_table(finished).equals(pa.concat_tables(batches))


def test_a_killed_collectors_write_ahead_file_is_recovered_a_piece_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = shuffled_batches(5, 10, seed=5)
    written = tmp_path / "batches.arrows"
    with pa.OSFile(str(written), "wb") as sink, pa.ipc.new_stream(sink, LAYOUT.schema) as out:
        for table in batches:
            out.write_table(table)
    crash = ("import os, signal, sys, pyarrow as pa\n"
             "from slime_trace_widget.sources.engine.store import SpanStore\n"
             "store = SpanStore(sys.argv[1], roll_spans=10**9, roll_seconds=10**9)\n"
             "for batch in pa.ipc.open_stream(sys.argv[2]):\n"
             "    store.append(pa.Table.from_batches([batch]))\n"
             "os.kill(os.getpid(), signal.SIGKILL)\n")
    died = subprocess.run([sys.executable, "-c", crash, str(tmp_path), str(written)],
                          timeout=STARTUP_SECONDS, cwd=ROOT)
    assert died.returncode == -signal.SIGKILL
    assert list((tmp_path / SUBDIR).glob("wal-*.arrows")) and not finished_files(tmp_path)
    monkeypatch.setattr(PIECE_BYTES, PIECE)
    SpanStore(tmp_path).close()  # opening recovers it
    [finished] = finished_files(tmp_path)
    check_pieces(finished)
    assert pq.read_table(finished).equals(pa.concat_tables(batches).sort_by(START))
    assert not list((tmp_path / SUBDIR).glob("wal-*.arrows"))


def decode_loops() -> list[pa.Table]:
    """A request's root span and five decode loops under it, written out of order."""
    root = spans([1], [10**18], [10])
    return [root, *(spans([number], [10**18 + 100 * number], [20_000], name=DECODE_LOOP,
                          parent=f"{1:016x}") for number in (5, 3, 4, 2, 6))]


def test_a_roll_of_decode_loops_writes_their_folded_companion(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The companion is folded from the rolled rows as they were written, as before."""
    monkeypatch.setattr(PIECE_BYTES, PIECE)
    store = SpanStore(tmp_path, roll_spans=10**9, roll_seconds=10**9)
    for table in decode_loops():
        store.append(table)
    store.close()
    [finished] = finished_files(tmp_path)
    written = pa.concat_tables(decode_loops())
    assert pq.read_table(finished).equals(written.sort_by(START))
    companion = pq.read_table(LAYOUT.companion_of(finished))
    assert companion.equals(fold_decode_loops(written).table.sort_by(START))
    assert companion["loops"].to_pylist() == [0, 5]


def test_a_companion_a_crash_left_unwritten_is_made_from_the_write_ahead_file(
        tmp_path: Path) -> None:
    """A crash after the finished file was renamed into place, before its companion was
    written and its write-ahead file removed: opening the store writes the companion."""
    store = SpanStore(tmp_path, roll_spans=10**9, roll_seconds=10**9)
    for table in decode_loops():
        store.append(table)
    [wal] = (tmp_path / SUBDIR).glob("wal-*.arrows")
    kept = wal.read_bytes()  # what a crash after the rename leaves of it
    store.close()
    [finished] = finished_files(tmp_path)
    made = pq.read_table(LAYOUT.companion_of(finished))
    LAYOUT.companion_of(finished).unlink()
    wal.write_bytes(kept)
    SpanStore(tmp_path).close()
    assert finished_files(tmp_path) == [finished]
    assert pq.read_table(LAYOUT.companion_of(finished)).equals(made)
    assert not wal.exists()


def test_an_empty_or_cut_write_ahead_file_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / SUBDIR
    folder.mkdir()
    (folder / "wal-000001.arrows").write_bytes(b"")
    (folder / "wal-000002.arrows").write_bytes(b"\xff\xff\xff\xff cut in its schema")
    SpanStore(tmp_path).close()
    assert sorted(os.listdir(folder)) == [".lock"]
