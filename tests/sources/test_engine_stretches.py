"""The span store's folded companions: written beside each finished file as it rolls,
read by a join instead of the spans, merged across files, and never trusted where the
same loops lie in two files (the reader goes back to the spans)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from slime_trace_widget.sources.engine.join import join_engine
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


def test_rows_acknowledged_after_a_failed_write_are_kept(tmp_path: Path, monkeypatch) -> None:
    """A write cut short (a full disk) is not acknowledged; the appends after it are, and
    must not sit behind the half batch a reader stops at."""
    from slime_trace_widget.sources.engine import durable

    tables = []
    for number in range(3):
        engine = Engine()
        engine.request(f"r-{number}", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1.1, T0 + 9))
        tables.append(engine.table())
    full = {"now": False}

    class FillingDisk:
        """A file whose next write, once armed, keeps half its bytes and fails."""

        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def write(self, data: Any) -> int:
            if full["now"]:
                full["now"] = False
                self.handle.write(bytes(data)[:len(data) // 2])
                raise OSError(28, "No space left on device")
            return self.handle.write(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.handle, name)

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

    monkeypatch.setattr(durable, "open", lambda *a, **k: FillingDisk(open(*a, **k)),  # noqa: SIM115
                        raising=False)
    store = SpanStore(tmp_path)
    store.append(tables[0])
    full["now"] = True
    try:
        store.append(tables[1])
    except OSError:
        pass
    else:
        raise AssertionError("the failed write was acknowledged")
    store.append(tables[2])
    store.close()
    stored = read_spans(tmp_path).to_pandas()["attributes"]
    rids = set(stored.str.extract(r'"gen_ai.request.id": "([^"]+)"')[0].dropna())
    assert {"r-0", "r-2"} <= rids


def test_one_collector_per_folder(tmp_path: Path) -> None:
    import pytest

    first = SpanStore(tmp_path)
    with pytest.raises(RuntimeError, match="another collector"):
        SpanStore(tmp_path)
    first.close()
    SpanStore(tmp_path).close()  # free again once the first has closed


def test_a_file_of_few_loops_gets_no_companion_and_reads_the_same(tmp_path: Path) -> None:
    engine = Engine()
    engine.request("r-a", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1.1, T0 + 9, loops=2))
    _store(tmp_path, [engine.table()])
    [finished] = _finished(tmp_path)
    assert not LAYOUT.companion_of(finished).exists()
    joined = join_engine(frames_for(["r-a"]), read_spans(tmp_path, folded=True))
    assert _stretches(joined) == [("r-a", 2)]
