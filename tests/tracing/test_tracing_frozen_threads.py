"""A recorded container another thread changes while the recorder walks it.

The walk converts items one by one and may run the caller's code (an object's
``repr``) in between; another thread can change the container then. The
recorder copies each builtin container at once before walking it, so it records
the container as it was before or after the change, never its ``repr`` text.
The change is made to happen in the middle of the walk by a hand-off between
the two threads, not by timing.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_event
from tests.support.traced_samples import events_of

pytestmark = pytest.mark.usefixtures("isolated_context")

#: Generous guard: the threads wait for each other, never for a time.
HANG_GUARD_S = 120


class _HandOff:
    """An item whose ``repr`` (what the recorder makes of it) lets another thread
    change the container holding it, and returns once that is done."""

    def __init__(self, change: Callable[[], None]) -> None:
        self.go, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._change, args=(change,))
        self.thread.start()

    def _change(self, change: Callable[[], None]) -> None:
        if self.go.wait(HANG_GUARD_S):
            change()
        self.done.set()

    def __repr__(self) -> str:
        self.go.set()
        assert self.done.wait(HANG_GUARD_S), "the other thread never changed the container"
        return "<hand-off>"

    def finish(self) -> None:
        self.go.set()  # a walk that never reached this item must not leave the thread waiting
        self.thread.join(HANG_GUARD_S)


def _recorded(value: Any) -> Any:
    sample = {"index": 0, "group_index": 0}
    trace_event(sample, "tick", attrs={"v": value})
    (record,) = events_of(sample)
    return record["attrs"]["v"]


def test_a_dict_changed_during_its_walk_is_recorded_as_it_was():
    shared: dict[Any, Any] = {}
    hand_off = _HandOff(lambda: (shared.pop(1), shared.update({7: "new", 8: "new"})))
    shared.update({0: hand_off, 1: [1], 2: [2]})
    try:
        assert _recorded(shared) == {"0": "<hand-off>", "1": [1], "2": [2]}
    finally:
        hand_off.finish()
    assert 1 not in shared, "the other thread did change the dict"


def test_a_set_changed_during_its_walk_is_recorded_as_it_was():
    shared: set[Any] = set()
    hand_off = _HandOff(lambda: (shared.discard(1), shared.update({99, 100})))
    shared.update({hand_off, 1, 2})
    try:
        recorded = _recorded(shared)
    finally:
        hand_off.finish()
    assert sorted(map(str, recorded)) == ["1", "2", "<hand-off>"]
    assert 99 in shared


def test_a_deque_and_a_list_changed_during_their_walk_are_recorded_as_they_were():
    for shared in (collections.deque(), []):
        hand_off = _HandOff(lambda shared=shared: (shared.append(9), shared.remove(1)))
        shared.extend([hand_off, 1, [2]])
        try:
            assert _recorded(shared) == ["<hand-off>", 1, [2]]
        finally:
            hand_off.finish()
        assert 9 in shared
