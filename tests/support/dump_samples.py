"""What the dump-loading tests share: a traced sample to save, the way to read a
loaded sample's events, slime's status enum to pickle, and the marker file the
hostile fixture dump would create (``tests/sources/conftest.py`` checks after each
such test that it did not)."""

from __future__ import annotations

import contextlib
import enum
import sys
import types
from collections.abc import Iterator
from pathlib import Path

FIXTURE_MARKER = Path("/tmp/slime_trace_widget_fixture_PWNED")


def events_or_empty(sample: dict) -> list:
    """The carrier's event list, or [] for untraced / damaged carriers."""
    trace = sample.get("trace")
    events = trace.get("events") if isinstance(trace, dict) else None
    return events if isinstance(events, list) else []


def span_sample(index: int, attrs: dict) -> dict:
    """A sample dict whose one span carries ``attrs`` on its end record."""
    base = {"trace_id": "t" * 32, "sample_id": index, "group_id": 0, "attempt": 0,
            "span_id": f"{index:032x}", "name": "reward_model"}
    events = [{**base, "type": "span_start", "ts": 1.0},
              {**base, "type": "span_end", "ts": 2.0, "attrs": attrs}]
    return {"index": index, "status": "completed", "trace": {"version": 1, "events": events}}


@contextlib.contextmanager
def slime_status_enum() -> Iterator[type[enum.Enum]]:
    """slime's ``Sample.Status`` (its five members) under a throwaway module, importable
    only inside the ``with``: a dump pickled there holds the enum, whose class a safe
    load never imports."""
    module = types.ModuleType("fake_slime_status_types")

    class Sample:
        class Status(enum.Enum):
            PENDING = "pending"
            COMPLETED = "completed"
            TRUNCATED = "truncated"
            ABORTED = "aborted"
            FAILED = "failed"

    Sample.__module__ = Sample.Status.__module__ = module.__name__
    Sample.__qualname__, Sample.Status.__qualname__ = "Sample", "Sample.Status"
    module.Sample = Sample
    sys.modules[module.__name__] = module
    try:
        yield Sample.Status
    finally:
        sys.modules.pop(module.__name__, None)
