"""A pandas view is made only when its estimate fits in the memory available: the
estimate is an upper bound of what making the view allocates, and a view that does
not fit raises MemoryError, by name, before anything is made."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from slime_trace_widget.frames import build_frames, view_memory
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.frames.view_memory import (
    VIEW_MEMORY_SHARE,
    attr_view_bytes,
    table_view_bytes,
)
from slime_trace_widget.sources.loading import load_frames

FIXTURES = Path(__file__).parents[1] / "fixtures"
SHAPES = ["small.pt", "edge_weird_values.pt", "edge_malformed_events.pt", "legacy_v1_pd.pt",
          "shapes/62mb_agentic.pt", "shapes/146mb_1m.pt", "shapes/612mb_tokens.pt"]


def fixture(name: str) -> TraceFrames:
    return load_frames(FIXTURES / name, trusted=True, progress=False)


def estimates(frames: TraceFrames, look_at_text: bool = True) -> dict[str, int]:
    tables = frames.tables
    core = {name: table_view_bytes(getattr(tables, name), name, look_at_text)
            for name in ("samples", "span_core", "event_core", "segments")}
    return {**core,
            "spans": attr_view_bytes(frames.span_start_attrs, look_at_text)
            + attr_view_bytes(frames.span_end_attrs, look_at_text),
            "events": attr_view_bytes(frames.event_attrs, look_at_text)}


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """Views made once before: what the first one ever made imports or caches is not
    the view's."""
    frames = fixture("small.pt")
    for view in ("samples", "span_core", "event_core", "segments", "spans", "events"):
        getattr(frames, view)


def nested(depth: int, leaf: object, wrap: Callable[[object], object]) -> object:
    value = leaf
    for _ in range(depth):
        value = wrap(value)
    return value


def traced(spans: int, name: Callable[[int], str], attrs: Callable[[int], dict]
           ) -> TraceFrames:
    """Frames of samples of 50 spans each, named and attributed by span number."""
    samples = []
    for row in range(spans // 50):
        identity = {"trace_id": f"{row:032x}", "sample_id": row, "group_id": 0, "attempt": 0}
        records = []
        for number in range(row * 50, row * 50 + 50):
            span = {**identity, "name": name(number), "span_id": f"{number:016x}"}
            records.append({**span, "type": "span_start", "ts": 1e9 + number,
                            "attrs": attrs(number)})
            records.append({**span, "type": "span_end", "ts": 1e9 + number + 0.5})
        samples.append({"index": row, "group_index": 0, "status": "completed",
                        "trace": {**identity, "version": 1, "events": records}})
    return build_frames(samples)


#: Shapes the fixtures do not have, each where one cost of a view is largest.
HOSTILE = {
    "unique long names": lambda: traced(2000, lambda n: f"{n:08d}" + "n" * 2000,
                                        lambda n: {}),
    "nested lists": lambda: traced(2000, lambda n: "s",
                                   lambda n: {"deep": nested(30, [], lambda v: [v])}),
    "nested dicts": lambda: traced(2000, lambda n: "s",
                                   lambda n: {"deep": nested(30, 0, lambda v: {"": v})}),
    "astral text": lambda: traced(500, lambda n: "s", lambda n: {"t": "a" * 5000 + "\U0001F600"}),
    "many keys": lambda: traced(2000, lambda n: "s",
                                lambda n: {f"k{i}": i * 1.5 for i in range(60)}),
    "tiny texts": lambda: traced(5000, lambda n: "s", lambda n: {f"t{i}": "x" for i in range(20)}),
}


@pytest.mark.parametrize("name", [*SHAPES, *HOSTILE])
def test_the_estimate_is_at_least_what_the_view_allocates(name: str) -> None:
    frames = HOSTILE[name]() if name in HOSTILE else fixture(name)
    expected = estimates(frames)
    assert all(expected[view] <= bound for view, bound in estimates(frames, False).items())
    gc.collect()
    tracemalloc.start()
    try:
        # The core views first: spans and events reuse theirs, and add only the rest.
        for view in ("samples", "span_core", "event_core", "segments", "spans", "events"):
            before = tracemalloc.get_traced_memory()[0]
            getattr(frames, view)
            made = tracemalloc.get_traced_memory()[0] - before
            assert made <= expected[view], (view, made, expected[view])
    finally:
        tracemalloc.stop()


def test_a_view_that_does_not_fit_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = fixture("shapes/62mb_agentic.pt")
    needed = estimates(frames)
    room = int(needed["spans"] / VIEW_MEMORY_SHARE) - 1  # the core fits, the attributes not
    assert needed["span_core"] <= VIEW_MEMORY_SHARE * room
    monkeypatch.setattr(view_memory, "available_memory", lambda: room)
    with pytest.raises(MemoryError, match=r"frames\.spans would take up to .* of the "
                                          r".* of memory available: read the Arrow tables"):
        _ = frames.spans
    assert len(frames.span_core) == frames.tables.span_core.num_rows  # the core was made
    monkeypatch.setattr(view_memory, "available_memory", lambda: room + 1)
    assert list(frames.spans.index) == list(frames.span_core.index)  # made once it fits


def test_no_view_is_refused_where_memory_is_not_known(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = fixture("small.pt")
    monkeypatch.setattr(view_memory, "available_memory", lambda: None)
    assert len(frames.events) == frames.tables.event_core.num_rows


def test_the_widget_refuses_with_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_trace_widget import TraceTimeline

    frames = fixture("small.pt")
    monkeypatch.setattr(view_memory, "available_memory", lambda: 1024)
    with pytest.raises(MemoryError, match=r"frames\.span_core would take"):
        TraceTimeline(frames)


def test_the_perfetto_trace_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Perfetto document holds every attribute dict as the views do."""
    from slime_trace_widget.export.perfetto import perfetto_trace

    frames = fixture("small.pt")
    for view in ("samples", "span_core", "event_core"):  # what it reads besides
        getattr(frames, view)
    monkeypatch.setattr(view_memory, "available_memory", lambda: 64 << 10)
    with pytest.raises(MemoryError, match=r"the Perfetto trace would take up to .*Parquet"):
        perfetto_trace(frames)
    monkeypatch.setattr(view_memory, "available_memory", lambda: None)
    assert perfetto_trace(frames)["traceEvents"]
