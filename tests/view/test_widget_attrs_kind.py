"""The widget's ``attrs`` request names a ``kind``, ``"span"`` or ``"event"``
(``docs/payload.md``): any other kind, or none, is refused with an error that names
it, never answered with some event's details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget import TraceTimeline

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def timeline() -> TraceTimeline:
    return TraceTimeline.from_dump(FIXTURES / "small.pt")


def _ask(timeline: TraceTimeline, request: dict[str, Any]) -> dict[str, Any]:
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    timeline._on_message(timeline, {"type": "attrs", "index": 0, "req": 5, **request}, [])
    [reply] = sent
    return reply


@pytest.mark.parametrize("kind", ["seg", "spans", "", 1, None])
def test_a_kind_neither_span_nor_event_is_refused(timeline: TraceTimeline, kind: Any) -> None:
    reply = _ask(timeline, {"kind": kind})
    assert reply["req"] == 5 and reply["kind"] == kind
    assert "detail" not in reply
    assert reply["error"] == f"ValueError: kind must be 'span' or 'event', not {kind!r}"


def test_a_request_without_a_kind_is_refused(timeline: TraceTimeline) -> None:
    reply = _ask(timeline, {})
    assert "detail" not in reply and "not None" in reply["error"]


@pytest.mark.parametrize("kind", ["span", "event"])
def test_span_and_event_are_answered(timeline: TraceTimeline, kind: str) -> None:
    reply = _ask(timeline, {"kind": kind})
    assert "error" not in reply
    assert ("attrs" in reply["detail"]) == (kind == "event")


def test_a_selection_of_another_kind_is_not_taken_for_an_event(timeline: TraceTimeline) -> None:
    """``selected`` set from Python with an index and a kind that is neither: cleared, as
    an index out of range is, not completed with event 0's id."""
    timeline.selected = {"kind": "sample", "index": 0}
    assert timeline.selected == {}
    timeline.selected = {"kind": "event", "index": 0}
    assert timeline.selected["frame_index"] == timeline._view.event_index[0]
    timeline.selected = {"kind": "flame", "path": "a;b"}  # no index: kept as sent
    assert timeline.selected == {"kind": "flame", "path": "a;b"}


def test_a_request_for_a_view_no_longer_shown_is_refused() -> None:
    """Payload index 0 names another span once show() has swapped the view: a request
    made in the old view gets an error, not the new view's span."""
    timeline = TraceTimeline.from_dump(FIXTURES / "small.pt")
    before = timeline.view.payload["meta"]["view_id"]
    timeline.show(samples=timeline.samples.loc[[2]])
    stale = _ask(timeline, {"kind": "span", "view": before})
    assert stale["view"] == before and "detail" not in stale
    assert stale["error"] == f"ValueError: view {before!r} is no longer shown"
    now = timeline.view.payload["meta"]["view_id"]
    fresh = _ask(timeline, {"kind": "span", "view": now})
    assert fresh["detail"]["span_id"] == timeline.spans.at[timeline.view.span_index[0], "span_id"]
