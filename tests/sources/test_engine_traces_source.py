"""What ``engine_traces=`` names: a collector folder whose span store never received a
span joins nothing (no generation span is missing a request SGLang never exported), one
with spans of other times still counts them missing, and what is no store is refused
with an error naming it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slime_trace_widget import load_frames
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.beyond import MISSING_WARNING
from slime_trace_widget.sources.engine.store import SUBDIR, SpanStore, holds_spans, read_spans
from slime_trace_widget.sources.engine.traces_source import EngineTracesError
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import stray_requests

DAY = 86_400.0


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TraceFrames]:
    folder = tmp_path_factory.mktemp("engine_source")
    path = write_demo_dump(folder / "rollout_0.pt", n_samples=6, seed=5)
    return path, load_frames(str(path), progress=False)


def generation_spans(frames: TraceFrames) -> int:
    return int((frames.span_core["origin"] != "engine").sum())


def test_a_store_that_never_received_a_span_joins_nothing(
        dump: tuple[Path, TraceFrames], tmp_path: Path) -> None:
    """What ``collect`` leaves when SGLang never exported: the store opened and closed,
    its folder holding only its ``.lock``."""
    path, plain = dump
    SpanStore(tmp_path).close()
    assert [p.name for p in (tmp_path / SUBDIR).iterdir()] == [".lock"]
    assert not holds_spans(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frames = load_frames(str(path), progress=False, engine_traces=str(tmp_path))
    assert MISSING_WARNING not in frames.warnings
    assert dict(frames.warnings) == dict(plain.warnings)
    assert len(frames.span_core) == len(plain.span_core)


def test_a_store_with_spans_of_other_times_counts_every_wait_missing(
        dump: tuple[Path, TraceFrames], tmp_path: Path) -> None:
    path, plain = dump
    store_requests(stray_requests(3, plain.t0 - DAY, plain.t0 - DAY + 60), tmp_path, SKEWS)
    assert holds_spans(tmp_path)
    frames = load_frames(str(path), progress=False, engine_traces=str(tmp_path))
    assert frames.warnings[MISSING_WARNING] > 0
    assert (frames.span_core["origin"] == "engine").sum() == 0


def test_a_span_in_the_write_ahead_file_is_held(tmp_path: Path,
                                                dump: tuple[Path, TraceFrames]) -> None:
    """A store still open has its spans in its write-ahead file, no finished file yet."""
    _, plain = dump
    source = tmp_path / "source"
    store_requests(stray_requests(1, plain.t0, plain.t1), source, SKEWS)
    spans = read_spans(source)
    store = SpanStore(tmp_path / "open")
    try:
        assert not holds_spans(tmp_path / "open")
        store.append(spans)
        assert not list((tmp_path / "open" / SUBDIR).glob("*.parquet"))
        assert holds_spans(tmp_path / "open")
    finally:
        store.close()


def test_what_is_no_engine_trace_store_is_refused_naming_it(
        dump: tuple[Path, TraceFrames], tmp_path: Path) -> None:
    """Read as a store, each was warned of once per read (three raw RuntimeWarnings) and
    every generation span of the dump was counted as missing its request."""
    path, _ = dump
    text, other, bare = tmp_path / "text.pt", tmp_path / "other.parquet", tmp_path / "bare"
    text.write_text("hello this is text\n")
    pq.write_table(pa.table({"x": [1, 2]}), other)
    bare.mkdir()
    (bare / "notes.txt").write_text("no store here\n")  # an empty folder may get one
    for source, problem in ((text, "not an engine-trace file"),
                            (other, "a Parquet file without the engine stores' time columns"),
                            ([text], "not an engine-trace file"),
                            (bare, "not a collector folder")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(EngineTracesError) as refused:
                load_frames(str(path), progress=False, engine_traces=source)
        named = source[0] if isinstance(source, list) else source
        assert str(refused.value).startswith(f"engine traces {named}: {problem}")
