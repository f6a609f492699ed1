"""``span_stats`` and closed spans whose end precedes their start (a clock stepped
back while they ran): their length is unknown, so the duration figures leave them out
and ``end_before_start`` counts them, as the loader's warning of that name does. The
dumps are recorded with :mod:`slime_trace_widget.tracing` on a clock moved by hand,
saved with ``save_dump`` and read by the loader, or written by slime (a fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slime_trace_widget import analysis
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import trace_span, use_clock

FIXTURES = Path(__file__).parents[1] / "fixtures"


class _Clock:
    """Time the test sets by hand, stepping back when it must."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _recorded(path: Path, spans: list[tuple[str, float, float]]) -> TraceFrames:
    """One sample per ``(name, start, end)`` span, recorded and read back."""
    clock, samples = _Clock(), []
    with use_clock(clock):
        for index, (name, start, end) in enumerate(spans):
            sample = {"index": index, "group_index": 0}
            clock.now = start
            with trace_span(sample, name):
                clock.now = end
            samples.append(sample)
    save_dump(path, samples, rollout_id=0)
    return load_frames(path)


def test_a_span_ending_before_its_start_is_counted_apart(tmp_path: Path) -> None:
    frames = _recorded(tmp_path / "rollout_0.pt", [
        ("generate", 100, 102), ("generate", 110, 114), ("generate", 120, 119)])
    assert frames.warnings["end_before_start"] == 1
    generate = analysis.span_stats(frames).loc["generate"]
    assert generate["count"] == 2 and generate["end_before_start"] == 1
    assert generate["total"] == pytest.approx(6) and generate["mean"] == pytest.approx(3)
    assert generate["p50"] == pytest.approx(3) and generate["max"] == pytest.approx(4)
    assert generate["open"] == 0


def test_a_name_with_only_such_spans_keeps_its_row(tmp_path: Path) -> None:
    """A closed span of the name was recorded, so the name has its row, with no
    duration figures and the span counted."""
    frames = _recorded(tmp_path / "rollout_0.pt", [
        ("generate", 100, 102), ("reward", 110, 109.5)])
    stats = analysis.span_stats(frames, by="group_index")
    reward = stats.xs("reward", level="name").iloc[0]
    assert reward["count"] == 0 and reward["end_before_start"] == 1
    assert reward["total"] == 0 and reward["share"] == 0
    assert stats.xs("generate", level="name").iloc[0]["end_before_start"] == 0


def test_the_rows_count_what_the_loader_warns_of_in_a_slime_dump() -> None:
    frames = load_frames(FIXTURES / "edge_malformed_events.pt")
    spans = analysis.measured_spans(frames)
    stats = analysis.span_stats(frames)
    assert stats["end_before_start"].sum() == frames.warnings["end_before_start"] == 1
    closed = spans[(spans["state"] == "closed") & (spans["duration"] >= 0)]
    by_name = closed.groupby(closed["name"].astype(str))["duration"]
    assert stats["count"].to_dict() == by_name.count().to_dict()
    assert stats["total"].to_numpy() == pytest.approx(
        by_name.sum().reindex(stats.index).to_numpy())
    assert (stats["mean"] > 0).all()
