"""The span store's folded companions: written beside each finished file as it rolls,
read by a join instead of the spans, merged across files, and never trusted where the
same loops lie in two files (the reader goes back to the spans)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from slime_trace_widget.frames.engine import join_engine
from slime_trace_widget.sources.engine.store import LAYOUT, SUBDIR, SpanStore, read_spans
from tests.support.engine_builder import T0, Engine, frames_for, plain_slices

LOOPS = 400


def _engine() -> Engine:
    engine = Engine()
    engine.request("r-a", T0 + 1, T0 + 9, tp=2, slices=plain_slices(T0 + 1.1, T0 + 9, loops=LOOPS))
    engine.request("r-b", T0 + 2, T0 + 8, slices=plain_slices(T0 + 2.1, T0 + 8, loops=LOOPS))
    return engine


def _store(folder: Path, tables: list[pa.Table], roll_spans: int = 10**9) -> None:
    store = SpanStore(folder, roll_spans=roll_spans)
    for table in tables:
        store.append(table)
    store.close()


def _stretches(frames: object) -> list[tuple[str, int]]:
    spans = frames.spans  # type: ignore[attr-defined]
    loops = spans[((spans["origin"] == "engine") & (spans["name"] == "decode_loop")).to_numpy()]
    return sorted(zip(loops["attr.rid"], loops["attr.engine.decode_loops"], strict=True))


def _finished(folder: Path) -> list[Path]:
    return sorted(f for f in (folder / SUBDIR).iterdir() if LAYOUT.finished.fullmatch(f.name))


def test_each_finished_file_has_its_folded_companion(tmp_path: Path) -> None:
    table = _engine().table()
    _store(tmp_path, [table])
    [finished] = _finished(tmp_path)
    companion = LAYOUT.companion_of(finished)
    assert pq.read_metadata(finished).num_rows == len(table)
    assert pq.read_metadata(companion).num_rows < len(table) // 20
    frames = frames_for(["r-a", "r-b"])
    from_spans = join_engine(frames, read_spans(tmp_path))
    from_companion = join_engine(frames, read_spans(tmp_path, folded=True))
    assert _stretches(from_companion) == _stretches(from_spans) == [("r-a", LOOPS),
                                                                      ("r-b", LOOPS)]
    assert len(from_companion.span_core) == len(from_spans.span_core)


def test_a_run_cut_by_a_roll_is_one_stretch(tmp_path: Path) -> None:
    table = _engine().table().sort_by("start_ns")
    half = len(table) // 2
    _store(tmp_path, [table.slice(0, half), table.slice(half)], roll_spans=half)
    assert len(_finished(tmp_path)) == 2
    joined = join_engine(frames_for(["r-a", "r-b"]), read_spans(tmp_path, folded=True))
    assert _stretches(joined) == [("r-a", LOOPS), ("r-b", LOOPS)]


def test_loops_stored_in_two_files_are_read_from_the_spans(tmp_path: Path) -> None:
    """A retried export lands in the next file: its loops are the same spans again. The
    companions cannot tell them apart, so the read folds the spans themselves."""
    table = _engine().table().sort_by("start_ns")
    half = len(table) // 2
    again = table.slice(half - 50, 100)  # the tail of the first file, sent once more
    _store(tmp_path, [table.slice(0, half), again, table.slice(half)], roll_spans=half)
    assert len(_finished(tmp_path)) >= 2
    joined = join_engine(frames_for(["r-a", "r-b"]), read_spans(tmp_path, folded=True))
    assert _stretches(joined) == [("r-a", LOOPS), ("r-b", LOOPS)]


def test_a_companion_lost_in_a_crash_is_written_when_the_store_opens(tmp_path: Path) -> None:
    _store(tmp_path, [_engine().table()])
    [finished] = _finished(tmp_path)
    companion = LAYOUT.companion_of(finished)
    companion.unlink()
    (tmp_path / SUBDIR / "wal-000001.arrows").write_bytes(b"")  # the roll's leftover
    SpanStore(tmp_path).close()
    assert companion.exists()
    assert not (tmp_path / SUBDIR / "wal-000001.arrows").exists()
    joined = join_engine(frames_for(["r-a", "r-b"]), read_spans(tmp_path, folded=True))
    assert _stretches(joined) == [("r-a", LOOPS), ("r-b", LOOPS)]
