"""Stand-ins for slime's samples, and readers of the records tracing wrote onto them.

Shared by the tracing tests (``tests/tracing/test_tracing_*.py``): the fake samples
a span can target, lookups of records by name or span, a deterministic clock, and
the check that a swallowed internal failure was logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: The logger tracing reports its own (swallowed) failures on.
LOGGER = "slime_trace_widget.tracing"


@dataclass
class FakeSample:
    """Stands in for slime's ``Sample``: a dataclass with no declared ``trace`` field."""

    index: int = 0
    group_index: int = 0
    response: str = ""


class SlottedSample:
    """A sample that cannot take a ``trace`` attribute."""

    __slots__ = ("group_index", "index")

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.group_index = 0


class Box:
    """Holds a sample one level down, for ``target_getter``."""

    def __init__(self, sample: FakeSample) -> None:
        self.sample = sample


def carrier_of(sample: Any) -> Any:
    """The sample's carrier, None when it has none."""
    return sample.get("trace") if isinstance(sample, dict) else getattr(sample, "trace", None)


def events_of(sample: Any) -> list[dict[str, Any]]:
    return carrier_of(sample)["events"]


def named(sample: Any, name: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events_of(sample) if e["name"] == name and kind in (None, e["type"])]


def span_pair(sample: Any, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The only start record named ``name`` and its end (None when open)."""
    (start,) = named(sample, name, "span_start")
    ends = [e for e in named(sample, name, "span_end") if e["span_id"] == start["span_id"]]
    assert len(ends) <= 1
    return start, (ends[0] if ends else None)


def starts(sample: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in events_of(sample) if e["type"] == "span_start" and e["name"] == name]


def end_of(sample: Any, start: dict[str, Any]) -> dict[str, Any] | None:
    ends = [e for e in events_of(sample)
            if e["type"] == "span_end" and e["span_id"] == start["span_id"]]
    assert len(ends) <= 1
    return ends[0] if ends else None


def step_clock(start: float = 1_000.0, step: float = 0.5):
    """A deterministic clock: each reading is ``step`` later than the previous one."""
    state = {"now": start - step}

    def now() -> float:
        state["now"] += step
        return state["now"]

    return now


def assert_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Tracing swallowed a failure and logged it, with its traceback, at debug level."""
    failures = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.DEBUG]
    assert failures
    assert any(r.exc_info for r in failures)
