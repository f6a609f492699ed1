"""Which spans a batch of new records opened, closed or marked, kept per trace as records
arrive: what a live view redraws, at a cost that grows with the new records only.

The rules are the carrier reader's (``frames.carrier``), applied record by record: an
end closes the earliest open start of its span id; a start without a parent takes the
most recently started open span that began no later (among the last
:data:`~slime_trace_widget.frames.carrier.PARENT_SCAN`); an end that arrives before
its start (records of two batches swapped in transit) waits for it. An end sent again
(new attributes only) changes no span: the end it updates was taken before it; one
standing in for an end not taken closes the span as that end, and the end arriving
after it changes nothing (``carriers.LiveTrace.stand_in``).

Records come checked (:func:`.carriers.read_rows`: each has a time), and names and ids
that are not text are made text without raising (:func:`~slime_trace_widget.values.short_text`),
lone surrogates replaced, so taking a batch in never fails halfway.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ...schema import (
    EVENT,
    RECORD_NAME,
    RECORD_PARENT_SPAN_ID,
    RECORD_SPAN_ID,
    RECORD_TYPE,
    SPAN_END,
    SPAN_START,
)
from ...tables.carrier import PARENT_SCAN
from ...values import clean_text, short_text
from .carriers import NewRecord


@dataclass
class OpenSpan:
    key: str
    span_id: str
    name: str
    start: float
    parent_span_id: str | None
    attempt: int


@dataclass
class SpanChanges:
    """What one batch of records did, as rows (tuples) a delta turns into tables."""

    opened: list[tuple] = field(default_factory=list)
    closed: list[tuple] = field(default_factory=list)
    events: list[tuple] = field(default_factory=list)


class SpanTracker:
    """Open spans per trace, kept up to date record by record."""

    def __init__(self) -> None:
        self.open: dict[str, dict[str, deque[OpenSpan]]] = {}
        self._early_ends: dict[str, dict[str, deque[tuple[float, Any]]]] = {}

    def take(self, records: list[NewRecord]) -> SpanChanges:
        """Take records in, in arrival order: the spans they opened and closed and the
        events they recorded."""
        changes = SpanChanges()
        for item in records:
            if item.resent:
                continue
            record, key, ts = item.record, item.trace.key, item.ts
            kind = record.get(RECORD_TYPE)
            name = _text(record.get(RECORD_NAME))
            attempt = record.get("attempt") if type(record.get("attempt")) is int else 0
            spans = self.open.setdefault(key, {})
            if kind == SPAN_START:
                span_id = _text(record.get(RECORD_SPAN_ID))
                parent = record.get(RECORD_PARENT_SPAN_ID)
                parent = _text(parent) if parent is not None else _inferred(spans, ts)
                span = OpenSpan(key, span_id, name, ts, parent, attempt)
                changes.opened.append((key, span_id, parent, name, ts, attempt))
                early = self._early_ends.get(key, {}).get(span_id)
                if early:
                    end, _ = early.popleft()
                    changes.closed.append((key, span_id, name, ts, end))
                else:
                    spans.setdefault(span_id, deque()).append(span)
            elif kind == SPAN_END:
                span_id = _text(record.get(RECORD_SPAN_ID))
                waiting = spans.get(span_id)
                if waiting:
                    span = waiting.popleft()
                    if not waiting:
                        del spans[span_id]
                    changes.closed.append((key, span_id, span.name, span.start, ts))
                else:
                    self._early_ends.setdefault(key, {}).setdefault(span_id, deque()).append(
                        (ts, record))
            elif kind == EVENT:
                parent = record.get(RECORD_PARENT_SPAN_ID)
                parent = _text(parent) if parent is not None else _inferred(spans, ts)
                changes.events.append((key, name, ts, parent, attempt))
        return changes

    def open_spans(self) -> list[OpenSpan]:
        return [span for spans in self.open.values() for waiting in spans.values()
                for span in waiting]


def _text(value: object) -> str:
    """A name or id as text: itself when it is a string, else its bounded text; lone
    surrogates replaced (``values.clean_text``), as the frames builder does: the delta's
    tables hold Arrow text, which cannot."""
    return clean_text(value if type(value) is str else short_text(value))


def _inferred(spans: dict[str, deque[OpenSpan]], ts: float) -> str | None:
    """The most recently started open span that began at or before ``ts``."""
    for span_id in islice(reversed(spans), PARENT_SCAN):
        if spans[span_id][-1].start <= ts:
            return span_id
    return None
