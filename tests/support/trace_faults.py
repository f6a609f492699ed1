"""What the tracing fault suite (``tests/tracing/test_tracing_faults_*.py``) shares.

The tally of injected faults (:data:`FAULTS`, checked in
``test_tracing_faults_total.py``), the values only user code can make, inputs that
refuse to be read, and the two checks every fault case ends with: the records
that survived are well formed, and the samples still save, load and flatten.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump
from tests.support.traced_samples import events_of

#: Faults injected by the fault suite, by kind; filled as the tests run.
FAULTS: Counter[str] = Counter()


def inject(kind: str, count: int = 1) -> None:
    """Count one injected fault of ``kind``."""
    FAULTS[kind] += count


class Result:
    """A value only the user's code can have made: results are checked by identity."""


class UserError(Exception):
    """The user's own exception: it must come out of a traced call as the same object."""


class BrokenMapping(dict):
    """A mapping whose contents cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("items failed")

    def __iter__(self) -> Any:
        raise RuntimeError("iteration failed")

    def keys(self) -> Any:
        raise RuntimeError("keys failed")


def self_containing_list() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def assert_well_formed(sample: Any) -> None:
    """Every record of an undamaged carrier: finite time, resolvable parent, one end per start."""
    events = events_of(sample)
    ids = {e["span_id"] for e in events if e["type"] == "span_start"}
    assert len(ids) == sum(e["type"] == "span_start" for e in events)
    ended: Counter[str] = Counter()
    for event in events:
        assert math.isfinite(event["ts"])
        assert event.get("parent_span_id") in ids | {None}
        if event["type"] == "span_end":
            assert event["span_id"] in ids
            ended[event["span_id"]] += 1
    assert all(count == 1 for count in ended.values())


def assert_loadable(samples: list[Any], path: Path) -> TraceFrames:
    """The samples survive slime's save, the safe loader and the flattening."""
    save_dump(path, samples, rollout_id=0)
    loaded = load_dump(path)
    assert len(loaded.samples) == len(samples)
    frames = build_frames(loaded)
    assert len(frames.samples) == len(samples)
    return frames
