"""A pandas view is made only when its estimate fits in the memory available: the
estimate is an upper bound of what making the view allocates, and a view that does
not fit raises MemoryError, by name, before anything is made."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from slime_trace_widget.frames import view_memory
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


@pytest.mark.parametrize("name", SHAPES)
def test_the_estimate_is_at_least_what_the_view_allocates(name: str) -> None:
    frames = fixture(name)
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
