"""What ``engine_traces=`` names: a collector folder whose span store never received a
span joins nothing (no generation span is missing a request SGLang never exported), one
with spans of other times still counts them missing."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from slime_trace_widget import load_frames
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.beyond import MISSING_WARNING
from slime_trace_widget.sources.engine.store import SUBDIR, SpanStore, holds_spans, read_spans
from slime_trace_widget.sources.live.frames_of import holds_engine_traces
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
    assert not holds_engine_traces(tmp_path)
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
    assert holds_spans(tmp_path) and holds_engine_traces(tmp_path)
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
        assert holds_engine_traces(tmp_path / "open")
    finally:
        store.close()
